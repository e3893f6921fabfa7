"""The newest row per key, as the declared sources' modes keep it."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakehouse_assets.sources.writing.transforms import newest_per_key

COLUMNS = "id long, name string, _sequence long, _kafka_offset long"


def test_the_highest_order_value_wins_then_the_highest_offset(spark: SparkSession) -> None:
    rows = spark.createDataFrame(
        [
            (1, "old", 10, 5),
            (1, "new", 20, 3),  # a higher sequence wins over a higher offset
            (2, "first", 7, 1),
            (2, "second", 7, 2),  # a tie on the sequence: the higher offset
            (3, "no sequence", None, 9),
            (3, "sequenced", 1, 8),  # a null sequence is lower than any
            (None, "a", 1, 1),
            (None, "b", 2, 1),  # rows without a key are one key
        ],
        COLUMNS,
    )
    newest = newest_per_key(rows, ["id"], order=["_sequence"])
    assert newest.columns == ["id", "name", "_sequence", "_kafka_offset"]
    assert sorted(newest.collect(), key=lambda row: (row.id is not None, row.id)) == [
        (None, "b", 2, 1),
        (1, "new", 20, 3),
        (2, "second", 7, 2),
        (3, "sequenced", 1, 8),
    ]


def test_without_an_order_the_highest_offset_wins(spark: SparkSession) -> None:
    rows = spark.createDataFrame(
        [("k", 1, 4), ("k", 2, 6), ("k", 3, 5), ("j", 4, 1)],
        "_kafka_key string, value long, _kafka_offset long",
    )
    newest = newest_per_key(rows, ["_kafka_key"])
    assert sorted(newest.collect()) == [("j", 4, 1), ("k", 2, 6)]
