"""Bronze transforms on small hand-built DataFrames."""

from __future__ import annotations

from datetime import UTC, date, datetime

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from lakehouse_assets.bronze.transforms import kafka_to_bronze, landing_to_bronze
from resources.kafka import KAFKA_COLUMNS


def test_kafka_to_bronze_adds_ingestion_time_and_utc_date(spark: SparkSession) -> None:
    late_evening = datetime(2026, 3, 1, 23, 59, 59, tzinfo=UTC)
    record = (b"k", b'{"a": 1}', "bpm", 0, 7, late_evening, 0, [("h", b"\x00")])
    records = spark.createDataFrame([record], KAFKA_COLUMNS)
    ingested = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    expected = spark.createDataFrame(
        [(*record, ingested, date(2026, 3, 1))],
        KAFKA_COLUMNS + ", ingested_at timestamp, date date",
    )
    assertDataFrameEqual(kafka_to_bronze(records, F.lit(ingested)), expected)


def test_landing_to_bronze_keeps_the_line_and_file_and_adds_load_time(spark: SparkSession) -> None:
    line = (b"m1,5,100,\xffsoon", "/lake/landing/gym_logins/a.csv")
    rows = spark.createDataFrame([line], "line binary, source_file string")
    loaded = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    expected = spark.createDataFrame(
        [(*line, loaded)], "line binary, source_file string, ingested_at timestamp"
    )
    assertDataFrameEqual(landing_to_bronze(rows, F.lit(loaded)), expected)


def test_ingestion_time_is_the_time_of_the_query_by_default(spark: SparkSession) -> None:
    rows = spark.createDataFrame([(b"x", "a.csv")], "line binary, source_file string")
    before = datetime.now(UTC).timestamp() * 1e6
    ingested = landing_to_bronze(rows).select(F.unix_micros("ingested_at")).first()
    after = datetime.now(UTC).timestamp() * 1e6
    assert ingested is not None
    assert before <= ingested[0] <= after
