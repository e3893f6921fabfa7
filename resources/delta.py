"""Delta I/O with Delta Lake for Spark: reads, appends, partition replacements and the change
feed. Merges are ``resources.delta_merge``. Every write runs on Spark's executors and commits
through Delta's own transaction log; no table is written by another engine.

delta-rs reads a table's log where no Spark is needed: ``resources.delta_log``.

Transaction markers ``{app id: version}`` make writes idempotent: a write's markers are recorded
in its own commit (``delta_log.recording``), a write whose markers the table already holds (at
that version or later) is skipped, and a caller can ask whether a table holds a marker before
doing any work. Every write is one commit: a crash leaves it whole or absent.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StringType, StructType

from resources.delta_log import Markers, recording
from resources.object_store import hadoop_uri

CHANGE_TYPE = "_change_type"  # the change data feed's column naming the kind of change
INSERTED = ("insert", "update_postimage")  # change types that carry a row's new content
FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")

PartitionFilters = list[tuple[str, str, Any]]  # [(column, op, value)], op: = != < <= > >= in


def quoted(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def table_name(uri: str) -> str:
    """The SQL name of the table at ``uri``: ``delta.`<path>```."""
    return f"delta.{quoted(hadoop_uri(uri))}"


def literal(value: Any) -> str:
    """``value`` as a SQL literal (a string, a number, a date or timestamp as ISO text)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if value is None:
        return "NULL"
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def predicate(partitions: PartitionFilters) -> str:
    """The SQL condition of ``partitions`` (every filter holds)."""
    conditions = []
    for column, op, value in partitions:
        if op in ("in", "not in"):
            values = ", ".join(literal(v) for v in value)
            empty = "FALSE" if op == "in" else "TRUE"
            conditions.append(f"{quoted(column)} {op.upper()} ({values})" if values else empty)
        else:
            conditions.append(f"{quoted(column)} {op} {literal(value)}")
    return " AND ".join(conditions) or "TRUE"


def read(
    spark: SparkSession,
    uri: str,
    version: int | None = None,
    partitions: PartitionFilters | None = None,
) -> DataFrame:
    """The table's rows (at ``version``, else its latest; of the partitions matching
    ``partitions``): Delta prunes the files by their partition values and statistics."""
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    frame = reader.load(hadoop_uri(uri))
    return frame.where(predicate(partitions)) if partitions else frame


def feed(spark: SparkSession, uri: str, after_version: int | None, version: int) -> DataFrame:
    """The change data feed after ``after_version`` up to ``version`` (the whole table at
    ``version``, as inserts, when None): the rows with their ``_change_type``.

    Raises:
        pyspark.errors.PySparkException: a commit to read was removed from the log (log
            retention), or the table's change data feed was off then.
    """
    if after_version is None:
        return read(spark, uri, version).withColumn(CHANGE_TYPE, F.lit("insert"))
    if after_version >= version:
        return read(spark, uri, version).withColumn(CHANGE_TYPE, F.lit("insert")).limit(0)
    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", after_version + 1)
        .option("endingVersion", version)
        .load(hadoop_uri(uri))
    )
    return changes.drop(*FEED_COLUMNS[1:])


def changes(
    spark: SparkSession,
    uri: str,
    after_version: int | None,
    version: int,
    with_change_type: bool = False,
) -> DataFrame:
    """Rows inserted or updated after ``after_version`` up to ``version`` (the whole table when
    None), with their ``_change_type`` if asked; see ``feed``."""
    inserted = feed(spark, uri, after_version, version).where(F.col(CHANGE_TYPE).isin(*INSERTED))
    return inserted if with_change_type else inserted.drop(CHANGE_TYPE)


def changed_values(
    spark: SparkSession, uri: str, after_version: int | None, version: int, columns: Sequence[str]
) -> DataFrame:
    """The distinct ``columns`` values that rows took or left after ``after_version``: held by
    rows inserted or updated to them, or by rows updated away from them or deleted, and not on
    both sides (a row updated with the same ``columns`` values brings none)."""
    rows = feed(spark, uri, after_version, version)
    kind = F.col(CHANGE_TYPE)
    after = rows.where(kind.isin(*INSERTED)).select(*columns)
    before = rows.where(kind.isin("update_preimage", "delete")).select(*columns)
    return after.subtract(before).unionByName(before.subtract(after))


def _has_strings(kind: DataType) -> bool:
    if isinstance(kind, StringType):
        return True
    if isinstance(kind, StructType):
        return any(_has_strings(field.dataType) for field in kind.fields)
    if isinstance(kind, ArrayType):
        return _has_strings(kind.elementType)
    if isinstance(kind, MapType):
        return _has_strings(kind.keyType) or _has_strings(kind.valueType)
    return False


def ddl(kind: DataType) -> str:
    """``kind`` in Spark's DDL, struct field names quoted."""
    if isinstance(kind, StructType):
        return f"struct<{','.join(f'{quoted(f.name)}:{ddl(f.dataType)}' for f in kind.fields)}>"
    if isinstance(kind, ArrayType):
        return f"array<{ddl(kind.elementType)}>"
    if isinstance(kind, MapType):
        return f"map<{ddl(kind.keyType)},{ddl(kind.valueType)}>"
    return "string" if isinstance(kind, StringType) else kind.simpleString()


def plain_strings(frame: DataFrame) -> DataFrame:
    """``frame`` with its string columns cast to Spark's default string type.

    Over Spark Connect (4.2) the strings of a ``mapInArrow`` result carry the default collation
    explicitly, and Delta then stores their type as ``string collate UTF8_BINARY``, which other
    Delta readers (delta-rs) refuse. A cast to the type written in DDL makes them plain
    ``string`` again (a cast to the type object does not); it changes no value.
    """
    return frame.select(
        *[
            F.col(quoted(f.name)).cast(ddl(f.dataType)).alias(f.name)
            if _has_strings(f.dataType)
            else F.col(quoted(f.name))
            for f in frame.schema.fields
        ]
    )


def _writer(
    frame: DataFrame, mode: str, partition_by: Sequence[str], options: Mapping[str, str]
) -> DataFrameWriter:
    writer = plain_strings(frame).write.format("delta").mode(mode).options(**options)
    return writer.partitionBy(*partition_by) if partition_by else writer


def append(
    frame: DataFrame,
    uri: str,
    partition_by: Sequence[str] = (),
    markers: Markers | None = None,
) -> None:
    """Append ``frame``'s rows (creating the table if needed) in one commit that records
    ``markers``; new columns are added. A write whose markers the table holds is skipped."""
    options = recording(uri, markers)
    if options is None:
        return
    _writer(frame, "append", partition_by, options).option("mergeSchema", "true").save(
        hadoop_uri(uri)
    )


def replace(
    frame: DataFrame,
    uri: str,
    partitions: PartitionFilters | None,
    partition_by: Sequence[str],
    markers: Markers | None = None,
) -> None:
    """Replace every row matching ``partitions`` (the whole table, schema and layout, when None)
    with ``frame``'s rows in one commit, which records the ``markers`` unless the table holds
    them all. A replace is written even then (a deliberate rebuild). Delta counts a replace as
    a data change, a new schema too: readers of the change feed see its rows deleted and
    inserted."""
    writer = _writer(frame, "overwrite", partition_by, recording(uri, markers) or {})
    if partitions is None:
        writer = writer.option("overwriteSchema", "true")
    else:
        writer = writer.option("replaceWhere", predicate(partitions))
    writer.save(hadoop_uri(uri))


def commit_markers(spark: SparkSession, uri: str, markers: Markers | None) -> None:
    """Record ``markers`` in a commit of no rows to the existing table at ``uri``, unless it
    holds them all: the table records what its writer consumed."""
    options = recording(uri, markers)
    if options:
        schema = read(spark, uri).limit(0)
        _writer(schema, "append", (), options).save(hadoop_uri(uri))


@contextlib.contextmanager
def session_settings(spark: SparkSession, settings: Mapping[str, str]) -> Iterator[None]:
    """Set session settings for the block, then restore them (the session may be shared)."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


# Delta's session settings of the next SQL write (MERGE, DELETE), by their writer option.
SQL_WRITE_SETTINGS = {
    "txnAppId": "spark.databricks.delta.write.txnAppId",
    "txnVersion": "spark.databricks.delta.write.txnVersion",
    "userMetadata": "spark.databricks.delta.commitInfo.userMetadata",
}


@contextlib.contextmanager
def recorded_by_writes(spark: SparkSession, options: Mapping[str, str]) -> Iterator[None]:
    """The session's writes in the block (a MERGE, which takes no writer options) record the
    markers of ``options`` (``delta_log.recording``), through Delta's session settings; they are
    unset after the block.

    (Unset, not restored: no one else sets them, and a marker left behind would be given to the
    session's next write. The settings are the session's: steps running at once have sessions
    of their own, ``SparkResource.get_session``.)
    """
    settings = {SQL_WRITE_SETTINGS[name]: value for name, value in options.items()}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key in settings:
            spark.conf.unset(key)
