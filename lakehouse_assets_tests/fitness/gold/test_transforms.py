"""Gold transforms on small hand-built DataFrames, expectations computed by hand."""

from __future__ import annotations

from datetime import UTC, date, datetime

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from lakehouse_assets.fitness.gold import transforms

DAY = datetime(2026, 11, 1, tzinfo=UTC).timestamp()
WORKOUT = "user_id long, workout_id long, session_id long, start_time timestamp, end_time timestamp"


def at(minutes: float) -> datetime:
    """A time on 2026-11-01, ``minutes`` after midnight UTC (naive, as Spark returns it)."""
    return datetime.fromtimestamp(DAY + minutes * 60, UTC).replace(tzinfo=None)


def test_workout_bpm_summary_aggregates_and_keeps_users_without_profile(
    spark: SparkSession,
) -> None:
    readings = spark.createDataFrame(
        [
            (1, 1, 1, at(60), at(90), at(61), 80.0),
            (1, 1, 1, at(60), at(90), at(62), 100.0),
            (1, 1, 1, at(60), at(90), at(63), 120.0),
            (2, 5, 1, at(30), at(40), at(31), 70.0),
        ],
        WORKOUT + ", time timestamp, heartrate double",
    )
    bins = spark.createDataFrame(
        [(1, "25-35", "female", "Austin", "TX")],
        "user_id long, age string, gender string, city string, state string",
    )
    expected = spark.createDataFrame(
        [
            (1, date(2026, 11, 1), 1, 1, "25-35", "female", "Austin", "TX", 80.0, 100.0, 120.0, 3),
            (2, date(2026, 11, 1), 5, 1, None, None, None, None, 70.0, 70.0, 70.0, 1),
        ],
        "user_id long, date date, workout_id long, session_id long, age string, gender string, "
        "city string, state string, min_bpm double, avg_bpm double, max_bpm double, "
        "num_recordings long",
    )
    assertDataFrameEqual(transforms.workout_bpm_summary(readings, bins), expected)


def test_gym_summary_counts_overlapping_visits_once_for_exercise(spark: SparkSession) -> None:
    logs = spark.createDataFrame(
        [
            ("m1", "5", at(60), at(120)),  # 60 minutes
            ("m1", "5", at(90), at(150)),  # overlaps: 60 more minutes in the gym
            ("m2", "5", at(0), at(10)),  # a mac without a user: no exercise
        ],
        "mac_address string, gym string, login timestamp, logout timestamp",
    )
    completed = spark.createDataFrame(
        [
            (1, 1, 1, at(95), at(115.5)),  # starts inside both visits: 20.5 minutes, once
            (1, 2, 1, at(150), at(160)),  # starts at a logout (inclusive): 10 minutes
            (1, 3, 1, at(200), at(210)),  # outside every visit
        ],
        WORKOUT,
    )
    users = spark.createDataFrame(
        [(1, "m1", at(0))], "user_id long, mac_address string, registration_timestamp timestamp"
    )
    expected = spark.createDataFrame(
        [("5", "m1", date(2026, 11, 1), 120.0, 30.5), ("5", "m2", date(2026, 11, 1), 10.0, 0.0)],
        "gym string, mac_address string, date date, minutes_in_gym double, "
        "minutes_exercising double",
    )
    assertDataFrameEqual(transforms.gym_summary(logs, completed, users), expected)
