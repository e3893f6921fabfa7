"""Change data capture into keyed tables (pure Spark): SCD1 keeps the newest row of each key,
SCD2 every version with its validity. Both take changes in any order, more than once, and late.

Changes are ordered by ``_sequence`` (the declared ``order_by``), ties by the Kafka offset. A
delete is remembered (the ``<table>_deletes`` table: keys and sequence), so that a change older
than it, arriving after it, never brings the row back; a delete wins a tie.

A column a change holds Debezium's placeholder in (``_unavailable``: the connector could not read
it, an unchanged TOASTed value) takes the value of the key's last change before it that had one
(of the batch, or stored), never across a delete: NULL when there is none (``fill``).

A truncate (declared ``truncate: apply``) is a delete of every key at its sequence
(``truncated``): of the keys stored when it arrives, and of any key of a change arriving after it.
The deletes table records it as a delete of no key (its key columns NULL).
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse_assets.sources.decoding.debezium import TRUNCATE
from lakehouse_assets.sources.decoding.reader import DELETED, OP, SEQUENCE, UNAVAILABLE
from lakehouse_assets.sources.writing.transforms import KAFKA_COLUMNS, newest_per_key
from resources.delta_merge import Side

DELETES_SUFFIX = "_deletes"
VALID_FROM, VALID_TO, IS_CURRENT = "valid_from", "valid_to", "is_current"


def newer(source: Side, target: Side) -> Column:
    """A merge's condition for a source row replacing (or deleting) the target row of its key:
    a later sequence, or the same one at the same or a later Kafka offset."""
    sequence, offset = SEQUENCE, "_kafka_offset"
    return (source(sequence) > target(sequence)) | (
        (source(sequence) == target(sequence)) & (source(offset) >= target(offset))
    )


DELETE_COLUMNS = (SEQUENCE, "_kafka_offset", "_kafka_timestamp")
SEQUENCE_SQL_TYPE = "decimal(38,6)"
# The kinds each type holds (a decimal sequence, as tables of earlier versions have, holds all).
HOLDS = {"bigint": {"long"}, "double": {"long", "double"}, "timestamp": {"timestamp"}}
METADATA = {OP, "_raw_change_type", *KAFKA_COLUMNS}  # after the data columns and validity


def after_deletes(changes: DataFrame, deletes: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The ``changes`` newer than the last recorded delete of their key (a delete wins a tie)."""
    last = deletes.groupBy(*keys).agg(F.max(SEQUENCE).alias("_last_delete"))
    newer = F.col("_last_delete").isNull() | (F.col(SEQUENCE) > F.col("_last_delete"))
    return changes.join(last, list(keys), "left").where(newer).drop("_last_delete")


def scd1(changes: DataFrame, deletes: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The change to merge per key: its newest, unless a recorded delete is newer. Merged with
    the ``newer`` condition, a delete (``_deleted``) removes the row, others replace it."""
    return after_deletes(newest_per_key(changes, keys, order=[SEQUENCE]), deletes, keys)


def fill(events: DataFrame, keys: Sequence[str], columns: Sequence[str]) -> DataFrame:
    """``events`` (changes and deletes of keys) with each of ``columns`` that an event lists in
    ``_unavailable`` set to the value of the last earlier event of its key (by sequence, then
    offset) that gave one since the key's last delete (NULL if none did); ``_unavailable``
    dropped. An event of no ``_unavailable`` column (a stored row) gives all its values."""
    order = [SEQUENCE, "_kafka_offset"]
    running = Window.partitionBy(*keys).orderBy(*order).rowsBetween(Window.unboundedPreceding, 0)
    segment = F.sum(F.col(DELETED).cast("int")).over(running)  # a delete starts a new chain
    events = events.withColumn("_segment", segment)
    earlier = (
        Window.partitionBy(*keys, "_segment").orderBy(*order)
        .rowsBetween(Window.unboundedPreceding, -1)
    )  # fmt: skip
    none = F.lit(None).cast("array<string>")
    unavailable = F.col(UNAVAILABLE) if UNAVAILABLE in events.columns else none
    filled = []
    for name in events.columns:
        column = F.col(f"`{name}`")
        if name not in columns:
            filled.append(column)
            continue
        missing = F.coalesce(F.array_contains(unavailable, name), F.lit(False))
        # A struct, so that a NULL the change gave is a value and not "no value".
        given = F.when(~missing & ~F.col(DELETED), F.struct(column.alias("v")))
        previous = F.last(given, ignorenulls=True).over(earlier)
        filled.append(F.when(missing, previous["v"]).otherwise(column).alias(name))
    return events.select(*filled).drop("_segment", UNAVAILABLE)


def fill_from_stored(
    changes: DataFrame,
    stored: DataFrame,
    deletes: DataFrame,
    keys: Sequence[str],
    columns: Sequence[str],
) -> DataFrame:
    """``changes`` filled (``fill``) from the changes before them: of the batch, the ``stored``
    rows of their keys (SCD1: one per key), and the recorded ``deletes`` of their keys."""
    batch = "_from_batch"
    events = (
        changes.withColumn(batch, F.lit(True))
        .unionByName(
            stored.withColumn(DELETED, F.lit(False)).withColumn(batch, F.lit(False)),
            allowMissingColumns=True,
        )
        .unionByName(
            deletes.withColumn(DELETED, F.lit(True)).withColumn(batch, F.lit(False)),
            allowMissingColumns=True,
        )
    )
    kept = [name for name in changes.columns if name != UNAVAILABLE]
    return fill(events, keys, columns).where(F.col(batch)).select(*[f"`{c}`" for c in kept])


def truncated(
    rows: DataFrame, known: DataFrame, recorded: DataFrame, keys: Sequence[str]
) -> tuple[DataFrame, DataFrame]:
    """The batch's truncates made deletes of keys: ``rows`` without its truncates, with a delete
    of each key of ``rows`` at each truncate of the batch and each ``recorded`` one (rows of the
    deletes table of no key), and of each key of ``known`` (the stored keys) at each truncate of
    the batch; then the same with the batch's truncates, which the deletes table records."""
    is_truncate = F.col(OP) == TRUNCATE
    truncates, changes = rows.where(is_truncate), rows.where(~is_truncate)
    batch_at = truncates.select(*DELETE_COLUMNS)
    every_at = batch_at.unionByName(recorded.select(*DELETE_COLUMNS))
    emptied = (
        changes.select(*keys).distinct().crossJoin(every_at)
        .unionByName(known.select(*keys).crossJoin(batch_at))
    )  # fmt: skip
    deletes = emptied.withColumn(DELETED, F.lit(True)).withColumn(OP, F.lit(TRUNCATE))
    written = changes.unionByName(deletes, allowMissingColumns=True)
    return written, written.unionByName(truncates)


def new_deletes(changes: DataFrame, keys: Sequence[str]) -> DataFrame:
    """The deletes among ``changes``, as the deletes table records them."""
    return changes.where(F.col(DELETED)).select(*keys, *DELETE_COLUMNS).distinct()


def validity_type(kinds: set[str]) -> str:
    """The type of ``valid_from`` and ``valid_to`` of a new table whose first changes' order
    values are of ``kinds``: theirs (``double`` for integers beside fractions), or the decimal
    sequence when date-times and numbers mix."""
    for kind in ("bigint", "double", "timestamp"):
        if kinds <= HOLDS[kind]:
            return kind
    return SEQUENCE_SQL_TYPE


def holds(validity: str, kind: Column) -> Column:
    """Whether ``valid_from`` of type ``validity`` holds an order value of ``kind``."""
    return kind.isin(*HOLDS[validity]) if validity in HOLDS else F.lit(True)


def _validity(sequence: Column, validity: str) -> Column:
    if validity == "timestamp":  # the sequence of an ISO date-time is its epoch microseconds
        return F.timestamp_micros(sequence.cast("bigint"))
    return sequence.cast(validity)


def _sequence(valid_from: Column, stored: str) -> Column:
    if stored == "timestamp":
        return F.unix_micros(valid_from).cast(SEQUENCE_SQL_TYPE)
    return valid_from.cast(SEQUENCE_SQL_TYPE)


def scd2(
    changes: DataFrame,
    versions: DataFrame,
    deletes: DataFrame,
    keys: Sequence[str],
    validity: str | None = None,
    fill_columns: Sequence[str] = (),
) -> DataFrame:
    """Every version of the keys of ``changes``, recomputed from the stored ``versions`` and
    ``deletes`` of those keys and the new changes: each non-delete change is a version valid
    from its sequence until the next change of its key (``valid_to`` null and ``is_current``
    while there is none; a delete closes the version before it and opens none). ``valid_from``
    and ``valid_to`` are of type ``validity`` (see ``validity_type``; by default the decimal
    sequence). ``fill_columns``: those holding the placeholder in some changes (``fill``)."""
    validity = validity or SEQUENCE_SQL_TYPE
    stored_type = versions.schema[VALID_FROM].dataType.simpleString()
    stored = (
        versions.drop(VALID_TO, IS_CURRENT)
        .select("*", _sequence(F.col(VALID_FROM), stored_type).alias(SEQUENCE))
        .drop(VALID_FROM)
    )
    events = (
        changes.unionByName(stored.withColumn(DELETED, F.lit(False)), allowMissingColumns=True)
        .unionByName(deletes.withColumn(DELETED, F.lit(True)), allowMissingColumns=True)
    )  # fmt: skip
    # One change per key and sequence: a delete wins, then the higher offset (duplicates go).
    same = Window.partitionBy(*keys, SEQUENCE).orderBy(F.desc(DELETED), F.desc("_kafka_offset"))
    events = events.withColumn("_n", F.row_number().over(same)).where("_n = 1").drop("_n")
    if fill_columns:
        events = fill(events, keys, fill_columns)
    in_order = Window.partitionBy(*keys).orderBy(SEQUENCE)
    timed = events.withColumn(VALID_TO, _validity(F.lead(SEQUENCE).over(in_order), validity))
    rows = timed.where(~F.col(DELETED)).drop(DELETED)
    rows = rows.withColumn(VALID_FROM, _validity(F.col(SEQUENCE), validity)).drop(SEQUENCE)
    rows = rows.withColumn(IS_CURRENT, F.col(VALID_TO).isNull())
    validity_columns = (VALID_FROM, VALID_TO, IS_CURRENT)
    data = [c for c in rows.columns if c not in validity_columns and c not in METADATA]
    return rows.select(*data, *validity_columns, *[c for c in rows.columns if c in METADATA])
