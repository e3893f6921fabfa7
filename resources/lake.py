"""The lake resource: where the Delta tables live (``<root>/<layer>/<table>``), and the calls that
need that configuration. The Delta I/O itself is ``resources.delta``: Delta Lake for Spark reads
and writes every table; delta-rs reads their logs where no Spark is needed
(``resources.delta_log``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg
from deltalake import DeltaTable
from pydantic import Field
from pyspark.sql import Column, DataFrame, SparkSession

from resources import catalog, delta, delta_log, delta_merge, files, object_store
from resources.delta import Markers, PartitionFilters
from resources.object_store import hadoop_uri
from resources.settings import check_schema_prefix, schema_prefix


class LakeResource(dg.ConfigurableResource):
    """Where the lake lives and how its Delta tables are read and written."""

    root: str = Field(
        default="lake",
        description="Lake root: a local folder (relative to the working directory) or an "
        "object-store URI (s3://, abfss://, gs://).",
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Options for delta-rs on object storage, beyond those it reads from the "
        "standard variables (AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL...).",
    )
    max_files_per_trigger: int = Field(
        default=1000, description="Landing-zone files read per micro-batch at most."
    )
    schema_prefix: str = Field(
        default_factory=schema_prefix,
        description="The prefix of the lake's schemas in the catalog (LAKEHOUSE_SCHEMA_PREFIX): "
        "with `acme`, its tables are acme_bronze.<table>, acme_silver.<table>, acme_gold.<table>; "
        "without, bronze.<table>, silver.<table>, gold.<table>.",
    )

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Before a step or a sensor touches the lake: a clear error, naming the root, when its
        object store cannot be used (``object_store.check_root``) or its schema prefix is not an
        identifier."""
        check_schema_prefix(self.schema_prefix, "The lake's schema_prefix")
        object_store.check_root(self.root_uri)

    @property
    def root_uri(self) -> str:
        """The lake root as an absolute path or URI."""
        return object_store.absolute(self.root)

    def table_uri(self, layer: str, table: str) -> str:
        """Location of a table: ``<root>/<layer>/<table>``."""
        return f"{self.root_uri}/{layer}/{table}"

    def table_name(self, layer: str, table: str) -> str:
        """The table's name in the catalog: ``<schema>.<table>`` (``resources.catalog``)."""
        return f"{catalog.schema_name(self.schema_prefix, layer)}.{table}"

    def path(self, *parts: str) -> str:
        """A location under the lake root (checkpoints, landing zone)."""
        return "/".join([self.root_uri, *parts])

    def spark_path(self, *parts: str) -> str:
        """A location under the lake root as Spark (Hadoop) names it: s3:// becomes s3a://."""
        return hadoop_uri(self.path(*parts))

    def read_text(self, *parts: str) -> str | None:
        """The text of the file at ``<root>/<parts...>``, or None when there is none."""
        return files.read_text(self.path(*parts))

    def write_text(self, text: str, *parts: str) -> None:
        """Write ``text`` to the file at ``<root>/<parts...>``, whole (``files.write_text``)."""
        files.write_text(self.path(*parts), text)

    def tables(self, layer: str) -> list[str]:
        """The names of the tables of ``layer`` in the lake (folders with a Delta log)."""
        return files.delta_folders(self.path(layer))

    # ----- the log -----------------------------------------------------------------------------
    def find(self, layer: str, table: str) -> DeltaTable | None:
        """The table's latest snapshot, or None before the table exists (one log read)."""
        return delta_log.find(self.table_uri(layer, table), self.storage_options)

    def table(self, layer: str, table: str) -> DeltaTable:
        """The table's latest snapshot.

        Raises:
            FileNotFoundError: the table does not exist yet.
        """
        snapshot = self.find(layer, table)
        if snapshot is None:
            raise FileNotFoundError(
                f"Delta table {layer}.{table} does not exist at {self.table_uri(layer, table)}"
            )
        return snapshot

    def exists(self, layer: str, table: str) -> bool:
        """Whether the table has been created."""
        return self.find(layer, table) is not None

    def version(self, layer: str, table: str) -> int | None:
        """The table's current version, or None before it exists."""
        snapshot = self.find(layer, table)
        return snapshot.version() if snapshot else None

    def committed_version(self, layer: str, table: str, app_id: str) -> int | None:
        """The last version ``app_id`` committed to the table with a transaction marker."""
        return self.committed_versions(layer, table, [app_id])[app_id]

    def committed_versions(
        self, layer: str, table: str, app_ids: Sequence[str]
    ) -> dict[str, int | None]:
        """The last version each of ``app_ids`` committed to the table with a marker (one log
        read for all)."""
        return delta_log.held(self.find(layer, table), app_ids)

    def holds(self, layer: str, table: str, markers: Markers) -> bool:
        """Whether the table holds every ``{app id: version}`` marker (or a later version)."""
        versions = delta_log.held(self.find(layer, table), markers.keys())
        return not delta_log.missing(markers, versions)

    def history(self, layer: str, table: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The table's commits, newest first."""
        snapshot = self.find(layer, table)
        return snapshot.history(limit) if snapshot else []

    def rows_written(self, layer: str, table: str, after_version: int | None) -> int | None:
        """The rows the first data commit after ``after_version`` took (a merge's source rows, an
        append's rows), from the log; None when none follows (``delta_log.rows_written``)."""
        snapshot = self.find(layer, table)
        return delta_log.rows_written(snapshot, after_version) if snapshot else None

    def row_count(self, layer: str, table: str) -> int:
        """Rows in the table's current snapshot, from the file statistics (no data read)."""
        snapshot = self.find(layer, table)
        return delta_log.row_count(snapshot) if snapshot else 0

    def partition_row_counts(self, layer: str, table: str, column: str) -> dict[str, int]:
        """Rows per value of the partition column ``column`` (ISO text for a date), from the file
        statistics (no data read); empty before the table exists."""
        snapshot = self.find(layer, table)
        return delta_log.partition_row_counts(snapshot, column) if snapshot else {}

    def table_metadata(
        self, layer: str, table: str, snapshot: DeltaTable | None = None
    ) -> dict[str, Any]:
        """Dagster metadata for a materialization: row count, name, location, version (of
        ``snapshot`` when given, else of the table's current snapshot)."""
        snapshot = snapshot or self.find(layer, table)
        return {
            "dagster/row_count": delta_log.row_count(snapshot) if snapshot else 0,
            "dagster/table_name": self.table_name(layer, table),
            "dagster/storage_kind": "delta",
            "table_uri": dg.MetadataValue.path(self.table_uri(layer, table)),
            # An identifier, not a measure: text, so the UI does not chart it.
            "delta_version": dg.MetadataValue.text(str(snapshot.version()) if snapshot else "none"),
        }

    # ----- data --------------------------------------------------------------------------------
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

    def rows_changed(self, layer: str, table: str, after_version: int | None) -> int:
        """About how many rows the table's change feed holds after ``after_version`` (all its
        rows when None), from the log (``delta_log.rows_changed``); 0 before it exists."""
        snapshot = self.find(layer, table)
        return delta_log.rows_changed(snapshot, after_version) if snapshot else 0

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

    def update_matched(
        self,
        layer: str,
        table: str,
        source: DataFrame,
        on: delta_merge.Condition,
        clauses: Sequence[tuple[delta_merge.Condition, Sequence[str]]],
    ) -> int:
        """Update the table's rows matched by ``source``; see ``delta_merge.update_matched``.
        Returns the new version."""
        delta_merge.update_matched(source, self.table_uri(layer, table), on, clauses)
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
