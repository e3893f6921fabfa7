"""The lake resource: Delta tables at ``<root>/<layer>/<table>``, committed through delta-rs.

Every commit happens on the driver through ``deltalake``; Spark reads a table's current snapshot
as Parquet from the snapshot's own file list, never by listing the folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import TableNotFoundError
from pydantic import Field
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

# Every table records its changes, so downstream layers can read them incrementally.
TABLE_CONFIGURATION = {"delta.enableChangeDataFeed": "true"}
# Retries when another writer (a stream, OPTIMIZE) commits the same version first.
MAX_COMMIT_RETRIES = 15
# Object-store schemes as delta-rs names them, and as Hadoop (Spark) does.
_HADOOP_SCHEMES = {"s3://": "s3a://"}


Markers = Mapping[str, int]


def commit_properties(
    markers: Markers | None = None, metadata: dict[str, Any] | None = None
) -> CommitProperties:
    """Commit properties carrying idempotency markers ``{app id: version}``, if any."""
    transactions = [Transaction(app_id, version) for app_id, version in (markers or {}).items()]
    return CommitProperties(
        custom_metadata=metadata,
        max_commit_retries=MAX_COMMIT_RETRIES,
        app_transactions=transactions or None,
    )


class LakeResource(dg.ConfigurableResource):
    """Where the lake lives and how its Delta tables are read and written."""

    root: str = Field(
        default="lake",
        description="Lake root: a local folder (relative to the working directory) or an "
        "object-store URI (s3://, abfss://, gs://).",
    )
    storage_options: dict[str, str] = Field(
        default_factory=dict,
        description="Options passed to delta-rs for object storage (credentials, region...).",
    )
    max_files_per_trigger: int = Field(
        default=1000, description="Landing-zone files read per micro-batch at most."
    )

    @property
    def root_uri(self) -> str:
        """The lake root as an absolute path or URI."""
        if "://" in self.root:
            return self.root.rstrip("/")
        return os.path.abspath(self.root)

    def table_uri(self, layer: str, table: str) -> str:
        """Location of a table: ``<root>/<layer>/<table>``."""
        return f"{self.root_uri}/{layer}/{table}"

    def path(self, *parts: str) -> str:
        """A location under the lake root (checkpoints, landing zone)."""
        return "/".join([self.root_uri, *parts])

    def spark_path(self, *parts: str) -> str:
        """A location under the lake root as Spark (Hadoop) names it: s3:// becomes s3a://."""
        return _hadoop_uri(self.path(*parts))

    def read_csv_stream(
        self, spark: SparkSession, folder: Sequence[str], columns: Sequence[str]
    ) -> DataFrame:
        """A stream of the CSV files dropped in ``<root>/<folder...>``: every column as a string
        (nothing is lost to parsing), plus ``source_file``, the file each row came from.

        Files whose names start with ``.`` or ``_`` are ignored until renamed: writers should
        write under such a name and rename when done.
        """
        if "://" not in self.root_uri:
            os.makedirs(self.path(*folder), exist_ok=True)
        return (
            spark.readStream.schema(", ".join(f"`{column}` string" for column in columns))
            .option("header", "true")
            .option("maxFilesPerTrigger", str(self.max_files_per_trigger))
            .csv(self.spark_path(*folder))
            .select("*", F.col("_metadata.file_path").alias("source_file"))
        )

    def exists(self, layer: str, table: str) -> bool:
        """Whether the table has been created."""
        return DeltaTable.is_deltatable(self.table_uri(layer, table), self.storage_options)

    def table(self, layer: str, table: str) -> DeltaTable:
        """The table's latest snapshot through delta-rs."""
        return DeltaTable(self.table_uri(layer, table), storage_options=self.storage_options)

    def find(self, layer: str, table: str) -> DeltaTable | None:
        """The table's latest snapshot, or None before the table exists (one log read)."""
        try:
            return self.table(layer, table)
        except TableNotFoundError:
            return None

    def _existing(self, layer: str, table: str) -> DeltaTable:
        delta = self.find(layer, table)
        if delta is None:
            raise FileNotFoundError(
                f"Delta table {layer}.{table} does not exist at {self.table_uri(layer, table)}"
            )
        return delta

    def version(self, layer: str, table: str) -> int | None:
        """The table's current version, or None before it exists."""
        delta = self.find(layer, table)
        return delta.version() if delta else None

    def committed_version(self, layer: str, table: str, app_id: str) -> int | None:
        """The last version ``app_id`` committed to the table with a transaction marker."""
        delta = self.find(layer, table)
        return delta.transaction_version(app_id) if delta else None

    def holds(self, layer: str, table: str, markers: Markers) -> bool:
        """Whether the table holds every ``{app id: version}`` marker (or a later version)."""
        delta = self.find(layer, table)
        if delta is None:
            return False
        for app_id, version in markers.items():
            committed = delta.transaction_version(app_id)
            if committed is None or committed < version:
                return False
        return True

    def history(self, layer: str, table: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The table's commits, newest first."""
        delta = self.find(layer, table)
        return delta.history(limit) if delta else []

    def row_count(self, layer: str, table: str) -> int:
        """Rows in the table's current snapshot, from the file statistics (no data read)."""
        delta = self.find(layer, table)
        return row_count(delta) if delta else 0

    def table_metadata(self, layer: str, table: str) -> dict[str, Any]:
        """Dagster metadata for a materialization: row count, name, location, version."""
        delta = self.find(layer, table)
        return {
            "dagster/row_count": row_count(delta) if delta else 0,
            "dagster/table_name": f"{layer}.{table}",
            "dagster/storage_kind": "delta",
            "table_uri": dg.MetadataValue.path(self.table_uri(layer, table)),
            "delta_version": delta.version() if delta else None,
        }

    def read(self, spark: SparkSession, layer: str, table: str) -> DataFrame:
        """The table's current snapshot as a Spark DataFrame.

        Raises:
            FileNotFoundError: the table does not exist yet.
        """
        delta = self._existing(layer, table)
        schema = from_arrow_schema(pa.schema(delta.schema()))
        files = [_hadoop_uri(uri) for uri in delta.file_uris()]
        if not files:
            return spark.createDataFrame([], schema)
        base = _hadoop_uri(self.table_uri(layer, table))
        # Partition values live in the paths (hive style); basePath makes Spark read them back.
        frame = spark.read.schema(schema).option("basePath", base).parquet(*files)
        return frame.select(*schema.fieldNames())

    def changes_since(
        self, spark: SparkSession, layer: str, table: str, after_version: int | None
    ) -> tuple[DataFrame, int]:
        """Rows inserted or updated after ``after_version`` (every row when None), from the change
        data feed, and the table version they reach.

        Raises:
            FileNotFoundError: the table does not exist yet.
        """
        delta = self._existing(layer, table)
        current = delta.version()
        schema = pa.schema(delta.schema())
        first = 0 if after_version is None else after_version + 1
        if first > current:
            return spark.createDataFrame([], from_arrow_schema(schema)), current
        feed = delta.load_cdf(starting_version=first, ending_version=current)
        changes = pa.RecordBatchReader.from_stream(feed).read_all()
        change_type = changes["_change_type"].cast(pa.string())
        inserted = pc.is_in(change_type, pa.array(["insert", "update_postimage"]))  # pyright: ignore[reportAttributeAccessIssue]
        kept = changes.select(schema.names).cast(schema).filter(inserted)
        return spark.createDataFrame(kept, from_arrow_schema(schema)), current

    def append(
        self,
        layer: str,
        table: str,
        data: pa.Table,
        partition_by: Sequence[str] | None = None,
        markers: Markers | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> int:
        """Append rows (creating the table if needed) and return the new table version.

        With ``markers`` (``{app id: version}``) the commit carries transaction markers, so a
        caller can tell later whether this write already happened (see ``holds``).
        """
        write_deltalake(
            self.table_uri(layer, table),
            data,
            mode="append",
            partition_by=list(partition_by) if partition_by else None,
            configuration=TABLE_CONFIGURATION,  # used only when the table is created
            schema_mode="merge",
            storage_options=self.storage_options,
            commit_properties=commit_properties(markers, metadata),
        )
        return self.table(layer, table).version()

    def overwrite_where(
        self,
        layer: str,
        table: str,
        data: pa.Table,
        predicate: str,
        partition_by: Sequence[str] | None = None,
        markers: Markers | None = None,
    ) -> int:
        """Replace the rows matching ``predicate`` (e.g. one partition) with ``data``."""
        write_deltalake(
            self.table_uri(layer, table),
            data,
            mode="overwrite",
            predicate=predicate,
            partition_by=list(partition_by) if partition_by else None,
            configuration=TABLE_CONFIGURATION,
            storage_options=self.storage_options,
            commit_properties=commit_properties(markers),
        )
        return self.table(layer, table).version()

    def replace(
        self, layer: str, table: str, data: pa.Table, markers: Markers | None = None
    ) -> int:
        """Replace the whole table (schema included) with ``data``; returns the new version."""
        write_deltalake(
            self.table_uri(layer, table),
            data,
            mode="overwrite",
            schema_mode="overwrite",
            configuration=TABLE_CONFIGURATION,
            storage_options=self.storage_options,
            commit_properties=commit_properties(markers),
        )
        return self.table(layer, table).version()

    def merge(
        self,
        layer: str,
        table: str,
        data: pa.Table,
        keys: Sequence[str],
        markers: Markers | None = None,
        update_when: str | None = None,
        delete_flag: str | None = None,
    ) -> int:
        """Upsert ``data`` by ``keys``: matching rows are updated, the others inserted.

        Args:
            update_when: a SQL condition over ``source`` and ``target`` that a matching row must
                meet to be updated (e.g. ``source.ts > target.ts``: the newest wins).
            delete_flag: a boolean column of ``data``: rows where it is true delete their match
                and are never inserted. The column itself is not stored.
        """
        kept = [name for name in data.column_names if name != delete_flag]
        delta = self.find(layer, table)
        if delta is None:
            rows = data
            if delete_flag:
                rows = data.filter(pc.invert(data[delete_flag]))  # pyright: ignore[reportAttributeAccessIssue]
            return self.append(layer, table, rows.select(kept), markers=markers)
        merger = delta.merge(
            data,
            " AND ".join(f"target.`{key}` = source.`{key}`" for key in keys),
            source_alias="source",
            target_alias="target",
            merge_schema=True,
            commit_properties=commit_properties(markers),
        )
        live = f"NOT source.`{delete_flag}`" if delete_flag else None
        if delete_flag:
            merger = merger.when_matched_delete(f"source.`{delete_flag}`")
        update = " AND ".join(c for c in (live, update_when) if c) or None
        excluded = [delete_flag] if delete_flag else None
        merger.when_matched_update_all(update, except_cols=excluded).when_not_matched_insert_all(
            live, except_cols=excluded
        ).execute()
        return delta.version()

    def delete(
        self,
        layer: str,
        table: str,
        predicate: str,
        markers: Markers | None = None,
    ) -> int | None:
        """Delete the rows matching ``predicate``; returns the new version (None: no table)."""
        delta = self.find(layer, table)
        if delta is None:
            return None
        delta.delete(predicate, commit_properties=commit_properties(markers))
        return delta.version()


def row_count(delta: DeltaTable) -> int:
    actions = pa.table(delta.get_add_actions(flatten=True))
    return sum(count or 0 for count in actions["num_records"].to_pylist())


def _hadoop_uri(uri: str) -> str:
    for delta_scheme, hadoop_scheme in _HADOOP_SCHEMES.items():
        if uri.startswith(delta_scheme):
            return hadoop_scheme + uri[len(delta_scheme) :]
    return uri
