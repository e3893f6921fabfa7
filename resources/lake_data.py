"""A table's rows in Spark: reads and change feeds, and the writes (by Delta Lake for Spark,
``resources.delta`` and ``resources.delta_merge``), each followed by the table's registration
in the catalog."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession

from resources import catalog, delta, delta_merge
from resources.delta import Markers, PartitionFilters
from resources.lake_log import LakeLog


class LakeData(LakeLog):
    """Reads and writes of a table's rows."""

    def read(
        self,
        spark: SparkSession,
        layer: str,
        table: str,
        partitions: PartitionFilters | None = None,
        version: int | None = None,
    ) -> DataFrame:
        """The table's rows at ``version`` (else its current snapshot), of the partitions matching
        ``partitions``, in Spark.

        Raises:
            FileNotFoundError: the table does not exist yet.
        """
        self.table(layer, table)  # a clear error for a missing table
        return delta.read(spark, self.table_uri(layer, table), version, partitions)

    def changes_since(
        self,
        spark: SparkSession,
        layer: str,
        table: str,
        after_version: int | None,
        with_change_type: bool = False,
    ) -> tuple[DataFrame, int]:
        """Rows inserted or updated after ``after_version`` (every row when None), from the change
        data feed, and the table version they reach; with the feed's ``_change_type`` column
        (``insert``, ``update_postimage``) when ``with_change_type``.

        Raises:
            FileNotFoundError: the table does not exist yet.
        """
        version = self.table(layer, table).version()
        uri = self.table_uri(layer, table)
        return delta.changes(spark, uri, after_version, version, with_change_type), version

    def changed_values(
        self,
        spark: SparkSession,
        layer: str,
        table: str,
        after_version: int | None,
        columns: Sequence[str],
    ) -> tuple[DataFrame, int]:
        """The ``columns`` values rows took or left after ``after_version``, and the table
        version they reach; see ``resources.delta.changed_values``."""
        version = self.table(layer, table).version()
        uri = self.table_uri(layer, table)
        return delta.changed_values(spark, uri, after_version, version, columns), version

    def append(
        self,
        layer: str,
        table: str,
        rows: DataFrame,
        partition_by: Sequence[str] = (),
        markers: Markers | None = None,
    ) -> int:
        """Append rows (creating the table if needed) and return the new table version.

        With ``markers`` (``{app id: version}``) the commit carries transaction markers, so a
        caller can tell later whether this write already happened (see ``holds``).
        """
        delta.append(rows, self.table_uri(layer, table), partition_by, markers)
        return self.register(rows.sparkSession, layer, table)

    def replace_partitions(
        self,
        layer: str,
        table: str,
        rows: DataFrame,
        partitions: PartitionFilters,
        partition_by: Sequence[str],
        markers: Markers | None = None,
    ) -> int:
        """Replace the partitions matching ``partitions`` (e.g. a range of days) with ``rows``."""
        delta.replace(rows, self.table_uri(layer, table), partitions, partition_by, markers)
        return self.register(rows.sparkSession, layer, table)

    def replace(
        self,
        layer: str,
        table: str,
        rows: DataFrame,
        markers: Markers | None = None,
        partition_by: Sequence[str] = (),
    ) -> int:
        """Replace the whole table with ``rows`` (its schema and layout ``partition_by``) in one
        commit; returns the new version."""
        delta.replace(rows, self.table_uri(layer, table), None, partition_by, markers)
        return self.register(rows.sparkSession, layer, table)

    def merge(
        self,
        layer: str,
        table: str,
        source: DataFrame,
        keys: Sequence[str],
        markers: Markers | None = None,
        update_when: delta_merge.Condition | None = None,
        delete_flag: str | None = None,
        partition_by: Sequence[str] = (),
        replace: Column | None = None,
        within_partitions: bool = True,
        insert_only: bool = False,
    ) -> int:
        """Upsert ``source`` (a batch's changes) by ``keys``; see ``resources.delta_merge``.
        Returns the new version."""
        delta_merge.merge(
            source,
            self.table_uri(layer, table),
            keys,
            markers=markers,
            update_when=update_when,
            delete_flag=delete_flag,
            partition_by=partition_by,
            replace=replace,
            within_partitions=within_partitions,
            insert_only=insert_only,
        )
        return self.register(source.sparkSession, layer, table)

    def register(self, spark: SparkSession, layer: str, table: str, new: bool | None = None) -> int:
        """Register the table in the catalog as ``table_name(layer, table)`` (once per process
        while its columns stay the same: ``resources.catalog.register``); returns its version.
        ``new``: the caller's write created the table; when None, whether the table is at its
        first version, which the write just before made.

        Raises:
            FileNotFoundError: the table does not exist.
            catalog.CatalogClash: the name is registered for another location.
        """
        snapshot = self.table(layer, table)
        tree = catalog.schema_tree(snapshot.schema().fields)
        schema = catalog.schema_name(self.schema_prefix, layer)
        new = snapshot.version() == 0 if new is None else new
        catalog.register(spark, schema, table, self.spark_path(layer, table), tree, new)
        return snapshot.version()
