"""Delta I/O: read a snapshot, write files and commit, replace partitions, merge, read the change
feed. delta-rs keeps the log; Spark reads and writes the data.

Every function takes a table's URI (``<lake root>/<layer>/<table>``) and the object-store options;
none keeps state, so a ``foreachBatch`` sink that runs on a Spark Connect server calls them as well
as the run's process does. No path whose size grows with the data passes through the driver's
Python process. Merges are ``resources.delta_merge``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import TableNotFoundError
from deltalake.schema import Schema as DeltaSchema
from deltalake.transaction import create_table_with_add_actions
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

from resources.delta_files import Location, hadoop_uri, write_files

# Every table records its changes, so downstream layers can read them incrementally.
TABLE_CONFIGURATION = {"delta.enableChangeDataFeed": "true"}
# Retries when another writer (a stream, OPTIMIZE) commits the same version first.
MAX_COMMIT_RETRIES = 15
CHANGE_TYPE = "_change_type"  # the change data feed's column naming the kind of change
INSERTED = ("insert", "update_postimage")  # change types that carry a row's new content

Markers = Mapping[str, int]  # transaction markers {app id: version}
Options = Mapping[str, str]  # object-store options of delta-rs
PartitionFilters = list[tuple[str, str, Any]]  # delta-rs's [(column, op, value)]


def commit_properties(
    markers: Markers | None = None, metadata: Mapping[str, Any] | None = None
) -> CommitProperties:
    """Commit properties carrying idempotency markers ``{app id: version}``, if any."""
    transactions = [Transaction(app_id, version) for app_id, version in (markers or {}).items()]
    return CommitProperties(
        custom_metadata=dict(metadata) if metadata else None,
        max_commit_retries=MAX_COMMIT_RETRIES,
        app_transactions=transactions or None,
    )


def find(uri: str, options: Options | None = None) -> DeltaTable | None:
    """The table's latest snapshot, or None before it exists (one log read)."""
    try:
        return DeltaTable(uri, storage_options=dict(options or {}))
    except TableNotFoundError:
        return None


def spark_schema(delta: DeltaTable) -> StructType:
    """The table's schema as Spark's."""
    return from_arrow_schema(pa.schema(delta.schema()))


def read(
    spark: SparkSession, delta: DeltaTable, partitions: PartitionFilters | None = None
) -> DataFrame:
    """The snapshot's rows (of the partitions matching ``partitions``) as a Spark DataFrame, read
    by the executors from the snapshot's own file list, never by listing the folder."""
    schema = spark_schema(delta)
    files = [hadoop_uri(unquote(uri)) for uri in delta.file_uris(file_pruning_predicate=partitions)]
    return _read_files(spark, files, schema, hadoop_uri(delta.table_uri))


def _read_files(spark: SparkSession, files: list[str], schema: StructType, base: str) -> DataFrame:
    if not files:
        return spark.createDataFrame([], schema)
    # Partition values live in the folder names (hive style); basePath makes Spark read them.
    frame = spark.read.schema(schema).option("basePath", base).parquet(*files)
    return frame.select(*schema.fieldNames())


def changes(
    spark: SparkSession,
    delta: DeltaTable,
    after_version: int | None,
    with_change_type: bool = False,
) -> tuple[DataFrame, int]:
    """Rows inserted or updated after ``after_version`` (the whole snapshot when None), and the
    version they reach (with their ``_change_type`` if asked); see ``feed``."""
    rows, current = feed(spark, delta, after_version)
    inserted = rows.where(F.col(CHANGE_TYPE).isin(*INSERTED))
    return (inserted if with_change_type else inserted.drop(CHANGE_TYPE)), current


def new_values(
    spark: SparkSession, delta: DeltaTable, after_version: int | None, columns: Sequence[str]
) -> tuple[DataFrame, int]:
    """The distinct ``columns`` values that rows took after ``after_version`` and did not hold
    before it (a row updated with the same ``columns`` values brings none), and the version."""
    rows, current = feed(spark, delta, after_version)
    kind = F.col(CHANGE_TYPE)
    after = rows.where(kind.isin(*INSERTED)).select(*columns)
    before = rows.where(kind == "update_preimage").select(*columns)
    return after.subtract(before), current


def feed(
    spark: SparkSession, delta: DeltaTable, after_version: int | None
) -> tuple[DataFrame, int]:
    """The change data feed after ``after_version`` (the whole snapshot, as inserts, when None):
    the rows with their ``_change_type``, read by Spark from the commits' files
    (``_change_data/`` where a commit has them, else its added files, which are inserts), and the
    version they reach.

    Raises:
        FileNotFoundError: a commit to read was removed from the log (log retention).
    """
    current = delta.version()
    if after_version is None:
        return read(spark, delta).withColumn(CHANGE_TYPE, F.lit("insert")), current
    schema = spark_schema(delta)
    added: list[str] = []
    changed: list[str] = []
    for version in range(after_version + 1, current + 1):
        actions = _commit_actions(delta.table_uri, version)
        cdc = [action["cdc"]["path"] for action in actions if "cdc" in action]
        data = [a["add"]["path"] for a in actions if "add" in a and a["add"]["dataChange"]]
        (changed if cdc else added).extend(cdc or data)
    base = hadoop_uri(delta.table_uri)
    frame = _read_files(spark, [f"{base}/{unquote(path)}" for path in added], schema, base)
    frame = frame.withColumn(CHANGE_TYPE, F.lit("insert"))
    if changed:
        typed = StructType([*schema.fields]).add(CHANGE_TYPE, "string")
        files = [f"{base}/{unquote(path)}" for path in changed]
        frame = frame.unionByName(_read_files(spark, files, typed, base + "/_change_data"))
    return frame, current


def _commit_actions(table_uri: str, version: int) -> list[dict[str, Any]]:
    log = Location.of(f"{table_uri}/_delta_log/{version:020d}.json")
    try:
        with log.filesystem.open_input_stream(log.path) as stream:
            lines = stream.read().decode().splitlines()
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"Commit {version} of the Delta table {table_uri} is no longer in its log, so its "
            "changes cannot be read incrementally: rebuild the downstream table from scratch."
        ) from error
    return [json.loads(line) for line in lines if line.strip()]


def append(
    frame: DataFrame,
    uri: str,
    options: Options | None = None,
    partition_by: Sequence[str] = (),
    markers: Markers | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> int:
    """Append ``frame``'s rows (creating the table if needed); returns the new version. The
    executors write the files; the commit carries ``markers``, so a caller can tell later whether
    this write already happened."""
    actions = write_files(frame, uri, partition_by)
    return _commit(
        frame, uri, options, actions, mode="append", partition_by=partition_by, markers=markers,
        metadata=metadata,
    )  # fmt: skip


def replace_partitions(
    frame: DataFrame,
    uri: str,
    partitions: PartitionFilters | None,
    partition_by: Sequence[str],
    options: Options | None = None,
    markers: Markers | None = None,
) -> int:
    """Replace every partition matching ``partitions`` (the whole table when None) with
    ``frame``'s rows, in one commit."""
    actions = write_files(frame, uri, partition_by)
    return _commit(
        frame, uri, options, actions, mode="overwrite", partition_by=partition_by,
        partitions=partitions, markers=markers,
    )  # fmt: skip


def rewrite(
    frame: DataFrame,
    uri: str,
    partition_by: Sequence[str],
    options: Options | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> int:
    """Replace the whole table with ``frame``, the same rows in a new layout (its schema becomes
    ``frame``'s), in one commit whose files are no data change: readers of the change data feed
    see nothing new, and transaction markers are kept. Returns the new version."""
    actions = write_files(frame, uri, partition_by, data_change=False)
    return _commit(
        frame, uri, options, actions, mode="overwrite", partition_by=partition_by,
        metadata=metadata,
    )  # fmt: skip


def _commit(
    frame: DataFrame,
    uri: str,
    options: Options | None,
    actions: list[Any],
    *,
    mode: str,
    partition_by: Sequence[str],
    partitions: PartitionFilters | None = None,
    markers: Markers | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> int:
    """Commit ``actions`` (files ``frame`` was written to), creating the table if needed."""
    schema = DeltaSchema.from_arrow(to_arrow_schema(frame.schema, timezone="UTC"))
    properties = commit_properties(markers, metadata)
    delta = find(uri, options)
    if delta is None:
        create_table_with_add_actions(
            uri,
            schema,
            actions,
            partition_by=list(partition_by) or None,
            configuration=TABLE_CONFIGURATION,
            storage_options=dict(options or {}),
            commit_properties=properties,
        )
        return 0
    if mode == "append":
        _add_new_columns(delta, schema)  # an append's commit does not change the schema itself
    delta.create_write_transaction(
        actions,
        mode,
        schema,
        partition_by=list(partition_by) or None,
        partition_filters=partitions,
        commit_properties=properties,
    )
    delta.update_incremental()  # the commit does not move this snapshot
    return delta.version()


def _add_new_columns(delta: DeltaTable, schema: DeltaSchema) -> None:
    """Add the columns of ``schema`` that the table does not have (nullable, at the end)."""
    stored = {field.name for field in delta.schema().fields}
    new = [field for field in schema.fields if field.name not in stored]
    if new:
        delta.alter.add_columns(new)
        delta.update_incremental()


def row_count(delta: DeltaTable) -> int:
    """Rows in the snapshot, from the files' statistics (no data read)."""
    actions = pa.table(delta.get_add_actions(flatten=True))
    return sum(count or 0 for count in actions["num_records"].to_pylist())
