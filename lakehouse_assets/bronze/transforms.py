"""Pure bronze transforms: Kafka records and landing-file lines to bronze rows."""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

# Bronze Kafka tables are partitioned by the UTC date of the Kafka record timestamp.
KAFKA_BRONZE_PARTITION = "date"


def kafka_to_bronze(records: DataFrame, ingested_at: datetime) -> DataFrame:
    """Kafka records with their ingestion time and the UTC date of their Kafka timestamp.

    Args:
        records: rows of the Kafka source (topic, partition, offset, key, value, timestamp).
        ingested_at: when this batch is written to bronze (timezone-aware).
    """
    return records.withColumn("ingested_at", F.lit(ingested_at).cast("timestamp")).withColumn(
        KAFKA_BRONZE_PARTITION, F.to_date(F.col("timestamp"))
    )


def landing_to_bronze(rows: DataFrame, ingested_at: datetime) -> DataFrame:
    """Landing-zone lines (bytes, with ``source_file``) with their ingestion time.

    Args:
        rows: rows of the landing lines stream.
        ingested_at: when this batch is written to bronze (timezone-aware).
    """
    return rows.withColumn("ingested_at", F.lit(ingested_at).cast("timestamp"))


# The foreachBatch transforms of the bronze streams: module-level (so pickled by reference) and
# stamped with the time the batch is written.
def stamped_kafka_batch(records: DataFrame) -> DataFrame:
    """``kafka_to_bronze`` of a micro-batch, ingested now."""
    return kafka_to_bronze(records, ingested_at=datetime.now(UTC))


def stamped_landing_batch(rows: DataFrame) -> DataFrame:
    """``landing_to_bronze`` of a micro-batch, ingested now."""
    return landing_to_bronze(rows, ingested_at=datetime.now(UTC))
