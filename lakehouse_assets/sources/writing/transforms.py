"""Pure Spark logic of the declared sources: the refined rows (typed columns, Kafka coordinates,
the bronze change feed's kind of change, derived partition columns), and the newest row per key.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

CHANGE_TYPE = "_change_type"  # the bronze change data feed's column
# The refined rows' Kafka columns, from the bronze record's (the key as text).
KAFKA_COLUMNS = {
    "_kafka_key": "key", "_kafka_topic": "topic", "_kafka_partition": "partition",
    "_kafka_offset": "offset", "_kafka_timestamp": "timestamp",
}  # fmt: skip
# A declared csv source's rows' columns beside its fields, from the bronze row's.
LANDING_COLUMNS = {"_landing_file": "source_file", "_ingested_at": "ingested_at"}


def refined(
    records: DataFrame,
    columns: Sequence[str],
    partitions: Sequence[tuple[str, str | None]],
    keep: Sequence[str | Column] = (),
) -> DataFrame:
    """The refined rows: the record's typed ``columns``, the Kafka coordinates as ``_kafka_*``,
    the bronze change feed's kind of change as ``_raw_change_type``, derived partition columns
    (``(column, date source)``: the UTC date of the source column), and ``keep`` as they are."""
    meta = [F.col(source).alias(name) for name, source in KAFKA_COLUMNS.items()]
    meta[0] = F.col("key").cast("string").alias("_kafka_key")
    if CHANGE_TYPE in records.columns:
        meta.append(F.col(CHANGE_TYPE).alias("_raw_change_type"))
    rows = records.select(*[F.col(f"`{c}`") for c in columns], *meta, *keep)
    for column, source in partitions:
        if source is not None:
            rows = rows.withColumn(column, F.to_date(F.col(source)))
    return rows


def newest_per_key(rows: DataFrame, keys: Sequence[str], order: Sequence[str] = ()) -> DataFrame:
    """The newest row of each key: the highest ``order`` values, then the highest Kafka offset."""
    ranking = [F.desc(column) for column in (*order, "_kafka_offset")]
    newest = Window.partitionBy(*keys).orderBy(*ranking)
    return rows.withColumn("_rank", F.row_number().over(newest)).where("_rank = 1").drop("_rank")
