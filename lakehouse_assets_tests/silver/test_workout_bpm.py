"""silver.workout_bpm from its three upstream tables, written directly (no Kafka): late readings of
an old workout, a re-registration, new devices. Expected rows follow docs/fitness_pipeline.md."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import dagster as dg
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.checks.reconciliation import READINGS_IN_WORKOUT_BPM
from lakehouse_assets.constants import COMPLETED_WORKOUTS, DATE, HEART_RATE, SILVER, USERS
from lakehouse_assets.constants import WORKOUT_BPM as TABLE
from lakehouse_assets.silver.assets import workout_bpm
from resources import LakeResource

JAN_1, JAN_2, JAN_3 = date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 3)


def at(day: date, clock: str) -> datetime:
    hours, minutes = (int(part) for part in clock.split(":"))
    return datetime(day.year, day.month, day.day, hours, minutes, tzinfo=UTC)


def frame(table: pa.Table) -> DataFrame:
    return SparkSession.active().createDataFrame(table)


def register(lake: LakeResource, device: int, registered: datetime) -> None:
    users = {"user_id": [1], "device_id": [device], "mac_address": ["m1"]}
    lake.merge(
        SILVER,
        USERS,
        frame(pa.table({**users, "registration_timestamp": [registered]})),
        ["user_id"],
    )


def read(lake: LakeResource, readings: list[tuple[int, datetime, float | None]]) -> None:
    devices, times, rates = zip(*readings, strict=True)
    rows = pa.table(
        {
            "device_id": list(devices),
            "time": list(times),
            "heartrate": list(rates),
            "valid": [rate is not None and rate > 0 for rate in rates],
            DATE: [time.date() for time in times],
        }
    )
    lake.merge(SILVER, HEART_RATE, frame(rows), ["device_id", "time"], partition_by=[DATE])


def bpm(lake: LakeResource, spark: SparkSession) -> list[tuple[int, str, float]]:
    """``(session_id, "day hh:mm", heartrate)`` of user 1's workout 1, partitioned by start."""
    rows = lake.read(spark, SILVER, TABLE).collect()
    assert all((r.user_id, r.workout_id) == (1, 1) for r in rows)
    assert all(r[DATE] == r.start_time.astimezone(UTC).date() for r in rows)
    return sorted(
        (r.session_id, r.time.astimezone(UTC).strftime("%d %H:%M"), r.heartrate) for r in rows
    )


def complete(lake: LakeResource, session: int, start: datetime, end: datetime) -> None:
    workout = {"user_id": [1], "workout_id": [1], "session_id": [session]}
    times = {"start_time": [start], "end_time": [end], DATE: [start.date()]}
    lake.merge(
        SILVER, COMPLETED_WORKOUTS, frame(pa.table({**workout, **times})), list(workout),
        partition_by=[DATE],
    )  # fmt: skip


def test_late_readings_a_late_workout_a_re_registration_and_a_new_device(
    env: dict[str, Any], spark: SparkSession
) -> None:
    lake: LakeResource = env["lake"]
    register(lake, 1001, at(JAN_1, "08:00"))
    complete(lake, 1, at(JAN_1, "23:00"), at(JAN_2, "01:00"))
    read(lake, [
        (1001, at(JAN_1, "22:59"), 80.0),  # before the start
        (1001, at(JAN_1, "23:30"), 90.0),
        (1001, at(JAN_2, "00:30"), 100.0),  # the next day, still in the workout
        (1001, at(JAN_2, "00:45"), None),  # not valid
        (1001, at(JAN_2, "01:00"), 110.0),  # the end is included
        (1001, at(JAN_2, "01:01"), 120.0),  # after the end
        (2002, at(JAN_1, "23:40"), 70.0),  # another device
        (1001, at(JAN_3, "00:10"), 60.0),  # of a workout that completes later
    ])  # fmt: skip
    dg.materialize([workout_bpm], resources=env)
    assert bpm(lake, spark) == [
        (1, "01 23:30", 90.0),
        (1, "02 00:30", 100.0),
        (1, "02 01:00", 110.0),
    ]
    assert lake.table(SILVER, TABLE).metadata().partition_columns == [DATE]

    read(lake, [(1001, at(JAN_1, "23:45"), 95.0)])  # a late reading of the old workout
    dg.materialize([workout_bpm], resources=env)
    assert bpm(lake, spark)[:2] == [(1, "01 23:30", 90.0), (1, "01 23:45", 95.0)]

    complete(lake, 2, at(JAN_2, "23:50"), at(JAN_3, "00:20"))  # its reading is already there
    dg.materialize([workout_bpm], resources=env)
    assert bpm(lake, spark)[-1] == (2, "03 00:10", 60.0)

    register(lake, 1001, at(JAN_2, "09:00"))  # the same device again: no row changes
    before = lake.version(SILVER, TABLE)
    dg.materialize([workout_bpm], resources=env)
    nothing, _ = lake.changes_since(spark, SILVER, TABLE, before)
    assert nothing.count() == 0 and len(bpm(lake, spark)) == 5

    register(lake, 2002, at(JAN_2, "10:00"))  # a new device: its readings replace the old one's
    dg.materialize([workout_bpm], resources=env)
    assert bpm(lake, spark) == [(1, "01 23:40", 70.0)]

    register(lake, 3003, at(JAN_3, "10:00"))  # a device with no readings in the workouts
    dg.materialize([workout_bpm], resources=env)
    assert bpm(lake, spark) == []


def test_a_reading_missing_from_workout_bpm_fails_its_reconciliation(
    env: dict[str, Any], spark: SparkSession
) -> None:
    lake: LakeResource = env["lake"]
    register(lake, 1001, at(JAN_1, "08:00"))
    complete(lake, 1, at(JAN_1, "23:00"), at(JAN_2, "01:00"))
    read(lake, [(1001, at(JAN_1, "23:30"), 90.0), (1001, at(JAN_2, "00:30"), 100.0)])
    ran = dg.materialize([workout_bpm], resources=env)
    [reconciled] = [e for e in ran.get_asset_check_evaluations()
                    if e.check_name == READINGS_IN_WORKOUT_BPM]  # fmt: skip
    assert reconciled.passed

    # A row lost from the incrementally kept table: the next run (nothing new upstream, so it
    # writes nothing) finds the reading missing, and the check blocks what is downstream.
    spark.sql(f"DELETE FROM delta.`{lake.spark_path(SILVER, TABLE)}` WHERE heartrate = 100.0")
    ran = dg.materialize([workout_bpm], resources=env, raise_on_error=False)
    [reconciled] = [e for e in ran.get_asset_check_evaluations()
                    if e.check_name == READINGS_IN_WORKOUT_BPM]  # fmt: skip
    assert not reconciled.passed and reconciled.metadata["offending_rows"].value == 1
    assert "workout_bpm" in reconciled.metadata["sample"].value
