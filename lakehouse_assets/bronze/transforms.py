"""Pure bronze transforms: Kafka records and landing-file lines to bronze rows."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.constants import KAFKA_BRONZE_PARTITION


def kafka_to_bronze(records: DataFrame, ingested_at: Column | None = None) -> DataFrame:
    """Kafka records with their ingestion time and the UTC date of their Kafka timestamp.

    Args:
        records: rows of the Kafka source (topic, partition, offset, key, value, timestamp).
        ingested_at: when the rows are written to bronze; by default the time of the query (in
            a stream, of its micro-batch).
    """
    return records.withColumn("ingested_at", _now(ingested_at)).withColumn(
        KAFKA_BRONZE_PARTITION, F.to_date(F.col("timestamp"))
    )


def landing_to_bronze(rows: DataFrame, ingested_at: Column | None = None) -> DataFrame:
    """Landing-zone lines (bytes, with ``source_file``) with their ingestion time.

    Args:
        rows: rows of the landing lines stream.
        ingested_at: when the rows are written to bronze; by default the time of the query (in
            a stream, of its micro-batch).
    """
    return rows.withColumn("ingested_at", _now(ingested_at))


def _now(ingested_at: Column | None) -> Column:
    return F.current_timestamp() if ingested_at is None else ingested_at
