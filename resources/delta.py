"""Delta I/O with Delta Lake for Spark: reads, appends, partition replacements and the change
feed. Merges are ``resources.delta_merge``. Every write runs on Spark's executors and commits
through Delta's own transaction log; no table is written by another engine.

delta-rs reads a table's log where no Spark is needed: ``resources.delta_log``.

Transaction markers ``{app id: version}`` make writes idempotent: a write carrying a marker the
table already holds (at that version or later) is skipped by Delta itself, and a caller can ask
whether a table holds a marker before doing any work. Delta records one marker per commit: a
write with several commits the others right after it, each alone (``commit_markers``); a crash
between them leaves only the later markers unrecorded, so the next run reads those upstream
changes again, which only a merge or a replace (the same result twice) may do.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StringType, StructType

from resources.delta_log import Markers, unheld
from resources.object_store import hadoop_uri

CHANGE_TYPE = "_change_type"  # the change data feed's column naming the kind of change
INSERTED = ("insert", "update_postimage")  # change types that carry a row's new content
FEED_COLUMNS = ("_change_type", "_commit_version", "_commit_timestamp")

PartitionFilters = list[tuple[str, str, Any]]  # [(column, op, value)], op: = != < <= > >= in

# Delta's session settings naming the marker of the next SQL write (MERGE, DELETE).
TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"


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
    frame: DataFrame, mode: str, partition_by: Sequence[str], markers: Markers | None
) -> DataFrameWriter:
    writer = plain_strings(frame).write.format("delta").mode(mode)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    for app_id, version in list((markers or {}).items())[:1]:  # Delta's one marker per commit
        writer = writer.option("txnAppId", app_id).option("txnVersion", version)
    return writer


def append(
    frame: DataFrame,
    uri: str,
    partition_by: Sequence[str] = (),
    markers: Markers | None = None,
) -> None:
    """Append ``frame``'s rows (creating the table if needed); new columns are added. A write
    whose markers the table holds is skipped: the commit carries one it lacks."""
    missing = unheld(uri, markers)
    if markers and not missing:
        return
    _writer(frame, "append", partition_by, missing).option("mergeSchema", "true").save(
        hadoop_uri(uri)
    )
    commit_markers(frame.sparkSession, uri, missing, skip_first=True)


def replace(
    frame: DataFrame,
    uri: str,
    partitions: PartitionFilters | None,
    partition_by: Sequence[str],
    markers: Markers | None = None,
) -> None:
    """Replace every row matching ``partitions`` (the whole table, schema and layout, when None)
    with ``frame``'s rows in one commit, which carries the first of the ``markers`` the table
    lacks; the others follow alone. A replace is written even when the table holds every marker
    (a deliberate rebuild); a crash before the last marker makes the next run replace the same
    rows again. Delta counts a replace as a data change, a new schema too: readers of the change
    feed see its rows deleted and inserted."""
    missing = unheld(uri, markers)
    writer = _writer(frame, "overwrite", partition_by, missing)
    if partitions is None:
        writer = writer.option("overwriteSchema", "true")
    else:
        writer = writer.option("replaceWhere", predicate(partitions))
    writer.save(hadoop_uri(uri))
    commit_markers(frame.sparkSession, uri, missing, skip_first=True)


def commit_markers(
    spark: SparkSession, uri: str, markers: Markers | None, skip_first: bool = False
) -> None:
    """Commit each of ``markers`` (after the first with ``skip_first``) alone, with no rows, to
    the existing table at ``uri``: the table records what its writer consumed."""
    items = list((markers or {}).items())[1 if skip_first else 0 :]
    if not items:
        return
    schema = read(spark, uri).limit(0)
    for app_id, version in items:
        _writer(schema, "append", (), {app_id: version}).save(hadoop_uri(uri))


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


@contextlib.contextmanager
def marker_for_writes(spark: SparkSession, markers: Markers | None) -> Iterator[None]:
    """The session's writes in the block (a MERGE, which takes no writer options) carry the
    first of ``markers``, through Delta's session settings; they are unset after the block.

    (Unset, not restored: no one else sets them, and a marker left behind would be given to the
    session's next write. The settings are the session's: steps running at once have sessions
    of their own, ``SparkResource.get_session``.)
    """
    for app_id, version in list((markers or {}).items())[:1]:
        spark.conf.set(TXN_APP_ID, app_id)
        spark.conf.set(TXN_VERSION, str(version))
        try:
            yield
        finally:
            spark.conf.unset(TXN_APP_ID)
            spark.conf.unset(TXN_VERSION)
        return
    yield
