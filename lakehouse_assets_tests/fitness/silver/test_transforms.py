"""Silver transforms on small hand-built DataFrames, expectations computed by hand."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual

from lakehouse_assets.fitness.silver import transforms


def ts(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)


def test_users_keep_every_registration_and_the_later_ingested_of_one_given_twice(
    spark: SparkSession,
) -> None:
    rows = spark.createDataFrame(
        [
            (1, 1001, "m1", 100, ts(10), "a.csv"),
            (1, 1009, "m9", 300, ts(10), "a.csv"),  # a move: kept beside the first
            (2, 1002, "m2", 200, ts(10), "a.csv"),
            (2, 1003, "m3", 200, ts(20), "b.csv"),  # the same registration, ingested later
        ],
        "user_id long, device_id long, mac_address string, registration_timestamp long, "
        "ingested_at timestamp, source_file string",
    )
    expected = spark.createDataFrame(
        [(1, 1001, "m1", ts(100)), (1, 1009, "m9", ts(300)), (2, 1003, "m3", ts(200))],
        "user_id long, device_id long, mac_address string, registration_timestamp timestamp",
    )
    assertDataFrameEqual(transforms.users(rows), expected)


def test_a_registration_is_in_force_until_its_users_or_its_devices_next(
    spark: SparkSession,
) -> None:
    users = spark.createDataFrame(
        [(1, 1001, ts(100)), (1, 1009, ts(300)), (2, 1001, ts(500)), (3, 1001, ts(500))],
        "user_id long, device_id long, registration_timestamp timestamp",
    )
    expected = spark.createDataFrame(
        [
            (1, 1001, ts(100), ts(300)),  # the user's next registration
            (1, 1009, ts(300), None),
            (2, 1001, ts(500), ts(500)),  # a tie on the device: the higher user id's
            (3, 1001, ts(500), None),
        ],
        "user_id long, device_id long, since timestamp, until timestamp",
    )
    assertDataFrameEqual(transforms.in_force(users, "device_id"), expected)


def test_gym_logs_keep_the_latest_logout(spark: SparkSession) -> None:
    rows = spark.createDataFrame(
        [("m1", "5", 100, 200), ("m1", "5", 100, 260), ("m1", "5", 400, 500)],
        "mac_address string, gym string, login long, logout long",
    )
    expected = spark.createDataFrame(
        [("m1", "5", ts(100), ts(260)), ("m1", "5", ts(400), ts(500))],
        "mac_address string, gym string, login timestamp, logout timestamp",
    )
    assertDataFrameEqual(transforms.gym_logs(rows), expected)


PROFILE = (
    "user_id long, update_type string, timestamp decimal(20,6), dob string, sex string, "
    "gender string, first_name string, last_name string, street_address string, city string, "
    "state string, zip long, partition int, offset long"
)


def test_newest_profile_event_wins_whatever_the_arrival_order(spark: SparkSession) -> None:
    def event(user: int, kind: str, at: str, name: str, offset: int) -> tuple:
        return (
            user,
            kind,
            Decimal(at),
            "01/31/1990",
            "F",
            "female",
            name,
            "L",
            "1 St",
            "Austin",
            "TX",
            73301,
            0,
            offset,
        )

    events = spark.createDataFrame(
        [
            event(1, "update", "20.25", "newest", 0),  # arrives first, but is the newest
            event(1, "new", "10", "oldest", 1),
            event(2, "new", "10", "x", 2),
            event(2, "delete", "30", "x", 3),
            event(2, "update", "20", "late", 4),  # older than the delete: stays deleted
        ],
        PROFILE,
    )
    result = {r.user_id: r for r in transforms.latest_profiles(events).collect()}
    assert (result[1].first_name, result[1].deleted) == ("newest", False)
    assert result[1].updated == datetime(1970, 1, 1, 0, 0, 20, 250000)
    assert result[1].dob == date(1990, 1, 31)
    assert result[2].deleted is True


def test_heart_rate_validity_and_dedup(spark: SparkSession) -> None:
    readings = spark.createDataFrame(
        [
            (5, 100, Decimal("71.5"), 0, 0),
            (5, 100, Decimal("71.5"), 0, 1),
            (5, 110, None, 0, 2),
            (5, 120, Decimal("0"), 0, 3),
        ],
        "device_id long, time long, heartrate decimal(20,6), partition int, offset long",
    )
    expected = spark.createDataFrame(
        [(5, ts(100), 71.5, True), (5, ts(110), None, False), (5, ts(120), 0.0, False)],
        "device_id long, time timestamp, heartrate double, valid boolean",
    )
    assertDataFrameEqual(transforms.heart_rate(readings), expected)


def test_workouts_one_row_per_action(spark: SparkSession) -> None:
    actions = spark.createDataFrame(
        [
            (1, 2, 1, "start", Decimal(100), 0, 0),
            (1, 2, 1, "start", Decimal(100), 0, 1),
            (1, 2, 1, "stop", Decimal(700), 0, 2),
        ],
        "user_id long, workout_id long, session_id long, action string, "
        "timestamp decimal(20,6), partition int, offset long",
    )
    expected = spark.createDataFrame(
        [(1, 2, 1, "start", ts(100)), (1, 2, 1, "stop", ts(700))],
        "user_id long, workout_id long, session_id long, action string, time timestamp",
    )
    assertDataFrameEqual(transforms.workouts(actions), expected)


def test_completed_workouts_pair_within_three_hours(spark: SparkSession) -> None:
    actions = spark.createDataFrame(
        [
            (1, 1, 1, "start", ts(0)),
            (1, 1, 1, "stop", ts(3 * 3600)),  # exactly 3 h: kept
            (1, 1, 2, "start", ts(0)),
            (1, 1, 2, "stop", ts(3 * 3600 + 1)),  # too long
            (1, 2, 1, "start", ts(100)),  # no stop yet: waits
            (2, 1, 1, "start", ts(500)),
            (2, 1, 1, "stop", ts(400)),  # stop before start
        ],
        "user_id long, workout_id long, session_id long, action string, time timestamp",
    )
    expected = spark.createDataFrame(
        [(1, 1, 1, ts(0), ts(3 * 3600))],
        "user_id long, workout_id long, session_id long, start_time timestamp, end_time timestamp",
    )
    assertDataFrameEqual(transforms.completed_workouts(actions), expected)


def test_workout_bpm_takes_valid_readings_in_the_window(spark: SparkSession) -> None:
    completed = spark.createDataFrame(
        [(1, 1, 1, ts(100), ts(200))],
        "user_id long, workout_id long, session_id long, start_time timestamp, end_time timestamp",
    )
    users = spark.createDataFrame(
        [(1, 1001, ts(0))], "user_id long, device_id long, registration_timestamp timestamp"
    )
    readings = spark.createDataFrame(
        [
            (1001, ts(100), 80.0, True),  # at the start: outside (start < time)
            (1001, ts(150), 90.0, True),
            (1001, ts(160), None, False),  # not valid
            (1001, ts(200), 95.0, True),  # at the end: inside (time <= end)
            (1002, ts(150), 70.0, True),  # another device
        ],
        "device_id long, time timestamp, heartrate double, valid boolean",
    )
    rows = transforms.workout_bpm(completed, readings, users).collect()
    assert sorted((r.time, r.heartrate) for r in rows) == [(ts(150), 90.0), (ts(200), 95.0)]


def test_user_bins_use_whole_years_at_the_as_of_date(spark: SparkSession) -> None:
    from pyspark.sql import functions as F

    profiles = spark.createDataFrame(
        [
            (1, date(2008, 6, 2), "f", "A", "TX"),  # 17 on 2026-06-01 (birthday tomorrow)
            (2, date(2008, 6, 1), "m", "A", "TX"),  # 18 on the day
            (3, date(2001, 6, 2), "f", "A", "TX"),  # 24
            (4, date(2001, 6, 1), "f", "A", "TX"),  # 25: lower bound inclusive
            (5, date(1931, 6, 1), "f", "A", "TX"),  # 95
            (6, None, None, None, None),
        ],
        "user_id long, dob date, gender string, city string, state string",
    )
    bins = transforms.user_bins(profiles, F.lit(date(2026, 6, 1)))
    assert {r.user_id: r.age for r in bins.collect()} == {
        1: "under 18",
        2: "18-25",
        3: "18-25",
        4: "25-35",
        5: "95+",
        6: "invalid age",
    }
