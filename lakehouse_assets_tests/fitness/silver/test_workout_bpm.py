"""silver.workout_bpm from its three upstream tables, written directly (no Kafka): late readings of
an old workout, a re-registration, a move to a new device, a device handed to another user, a late
registration. Expected rows follow docs/fitness_pipeline.md: a reading is the workout's user's when
the user had registered its device at the reading's time."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.constants import DATE, SILVER
from lakehouse_assets.fitness.names import COMPLETED_WORKOUTS, HEART_RATE, USERS
from lakehouse_assets.fitness.names import WORKOUT_BPM as TABLE
from lakehouse_assets.fitness.silver import workout_bpm as workout_bpm_module
from lakehouse_assets.fitness.silver.workout_bpm import READINGS_IN_WORKOUT_BPM, workout_bpm
from resources import LakeResource

JAN_1, JAN_2, JAN_3 = date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 3)


def at(day: date, clock: str) -> datetime:
    hours, minutes = (int(part) for part in clock.split(":"))
    return datetime(day.year, day.month, day.day, hours, minutes, tzinfo=UTC)


def frame(table: pa.Table) -> DataFrame:
    return SparkSession.active().createDataFrame(table)


def register(lake: LakeResource, device: int, registered: datetime, user: int = 1) -> None:
    users = {"user_id": [user], "device_id": [device], "mac_address": [f"m{user}"]}
    lake.merge(
        SILVER,
        USERS,
        frame(pa.table({**users, "registration_timestamp": [registered]})),
        ["user_id", "registration_timestamp"],
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


def bpm(lake: LakeResource, spark: SparkSession) -> list[tuple[int, int, str, float]]:
    """``(user_id, session_id, "day hh:mm", heartrate)`` of workout 1, partitioned by start."""
    rows = lake.read(spark, SILVER, TABLE).collect()
    assert all(r.workout_id == 1 for r in rows)
    assert all(r[DATE] == r.start_time.astimezone(UTC).date() for r in rows)
    return sorted(
        (r.user_id, r.session_id, r.time.astimezone(UTC).strftime("%d %H:%M"), r.heartrate)
        for r in rows
    )


def complete(
    lake: LakeResource, session: int, start: datetime, end: datetime, user: int = 1
) -> None:
    workout = {"user_id": [user], "workout_id": [1], "session_id": [session]}
    times = {"start_time": [start], "end_time": [end], DATE: [start.date()]}
    lake.merge(
        SILVER, COMPLETED_WORKOUTS, frame(pa.table({**workout, **times})), list(workout),
        partition_by=[DATE],
    )  # fmt: skip


def test_late_readings_a_late_workout_and_registrations_change_only_what_follows_them(
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
        (2002, at(JAN_3, "00:05"), 65.0),  # another device, in that workout
    ])  # fmt: skip
    dg.materialize([workout_bpm], resources=env)
    session_1 = [(1, 1, "01 23:30", 90.0), (1, 1, "02 00:30", 100.0), (1, 1, "02 01:00", 110.0)]
    assert bpm(lake, spark) == session_1
    assert lake.table(SILVER, TABLE).metadata().partition_columns == [DATE]

    read(lake, [(1001, at(JAN_1, "23:45"), 95.0)])  # a late reading of the old workout
    dg.materialize([workout_bpm], resources=env)
    session_1.insert(1, (1, 1, "01 23:45", 95.0))
    assert bpm(lake, spark) == session_1

    complete(lake, 2, at(JAN_2, "23:50"), at(JAN_3, "00:20"))  # its reading is already there
    dg.materialize([workout_bpm], resources=env)
    assert bpm(lake, spark) == [*session_1, (1, 2, "03 00:10", 60.0)]

    register(lake, 1001, at(JAN_2, "09:00"))  # the same device again: no row changes
    before = lake.version(SILVER, TABLE)
    dg.materialize([workout_bpm], resources=env)
    nothing, _ = lake.changes_since(spark, SILVER, TABLE, before)
    assert nothing.count() == 0 and len(bpm(lake, spark)) == 5

    # A move to device 2002: session 2 (after it) takes 2002's reading instead of 1001's;
    # session 1 (before it) keeps 1001's, and 2002's reading then stays nobody's.
    register(lake, 2002, at(JAN_2, "10:00"))
    dg.materialize([workout_bpm], resources=env)
    assert bpm(lake, spark) == [*session_1, (1, 2, "03 00:05", 65.0)]

    # User 2 takes device 1001 at 23:55: its reading at 00:10 is user 2's (1001 was nobody's
    # between user 1's move and then); user 1's rows do not change.
    register(lake, 1001, at(JAN_2, "23:55"), user=2)
    complete(lake, 1, at(JAN_2, "23:52"), at(JAN_3, "00:30"), user=2)
    dg.materialize([workout_bpm], resources=env)
    assert bpm(lake, spark) == [*session_1, (1, 2, "03 00:05", 65.0), (2, 1, "03 00:10", 60.0)]

    register(lake, 3003, at(JAN_3, "10:00"))  # a device with no readings after it: no change
    before = lake.version(SILVER, TABLE)
    dg.materialize([workout_bpm], resources=env)
    nothing, _ = lake.changes_since(spark, SILVER, TABLE, before)
    assert nothing.count() == 0

    # A registration arriving late, dated 23:35 on Jan 1: user 1 wore 2002 from then until the
    # re-registration of 1001 at 09:00 on Jan 2. Session 1 keeps 90 (23:30), takes 2002's 70
    # (23:40) and loses 1001's later readings.
    register(lake, 2002, at(JAN_1, "23:35"))
    dg.materialize([workout_bpm], resources=env)
    assert bpm(lake, spark) == [
        (1, 1, "01 23:30", 90.0),
        (1, 1, "01 23:40", 70.0),
        (1, 2, "03 00:05", 65.0),
        (2, 1, "03 00:10", 60.0),
    ]


def test_a_reading_missing_from_workout_bpm_fails_its_reconciliation(
    env: dict[str, Any], spark: SparkSession
) -> None:
    lake: LakeResource = env["lake"]
    register(lake, 1001, at(JAN_1, "08:00"))
    complete(lake, 1, at(JAN_1, "23:00"), at(JAN_2, "01:00"))
    read(lake, [(1001, at(JAN_1, "23:30"), 90.0), (1001, at(JAN_2, "00:30"), 100.0)])
    assert reconciliation(dg.materialize([workout_bpm], resources=env)).passed

    # A row lost from the incrementally kept table: the next run (nothing new upstream, so it
    # writes nothing, and checks every day) finds the reading missing, and the check blocks what
    # is downstream.
    spark.sql(f"DELETE FROM delta.`{lake.spark_path(SILVER, TABLE)}` WHERE heartrate = 100.0")
    reconciled = reconciliation(dg.materialize([workout_bpm], resources=env, raise_on_error=False))
    assert not reconciled.passed and reconciled.metadata["offending_rows"].value == 1
    assert "workout_bpm" in reconciled.metadata["sample"].value

    # An incremental run checks the workouts of the days it may change: a workout and a reading
    # on Jan 3 (the workouts of Jan 2 and 3) leave Jan 1's workout unchecked...
    complete(lake, 2, at(JAN_3, "10:00"), at(JAN_3, "11:00"))
    read(lake, [(1001, at(JAN_3, "10:30"), 80.0)])
    reconciled = reconciliation(dg.materialize([workout_bpm], resources=env, raise_on_error=False))
    assert reconciled.passed and reconciled.metadata["offending_rows"].value == 0
    # ...and a late reading of it (Jan 2, so the workouts of Jan 1 and 2) finds the loss again.
    read(lake, [(1001, at(JAN_2, "00:40"), 105.0)])
    reconciled = reconciliation(dg.materialize([workout_bpm], resources=env, raise_on_error=False))
    assert not reconciled.passed and reconciled.metadata["offending_rows"].value == 1


def test_readings_committed_while_it_runs_are_the_next_runs(
    env: dict[str, Any], spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another run (the heart-rate stream's) commits readings to ``silver.heart_rate`` after this
    run has read its changes: this run neither merges nor expects them (its reconciliation
    passes), and the next run takes them."""
    lake: LakeResource = env["lake"]
    register(lake, 1001, at(JAN_1, "08:00"))
    complete(lake, 1, at(JAN_1, "23:00"), at(JAN_2, "01:00"))
    read(lake, [(1001, at(JAN_1, "23:30"), 90.0)])
    meanwhile: list[tuple[int, datetime, float | None]] = []  # committed once the run has read
    original = workout_bpm_module.read_changes

    def read_then_commit(*args: Any, **kwargs: Any) -> Any:
        changes = original(*args, **kwargs)
        if args[3] == (SILVER, HEART_RATE) and meanwhile:
            read(lake, [meanwhile.pop()])
        return changes

    monkeypatch.setattr(workout_bpm_module, "read_changes", read_then_commit)
    meanwhile.append((1001, at(JAN_1, "23:40"), 95.0))
    assert reconciliation(dg.materialize([workout_bpm], resources=env)).passed  # creates it
    assert bpm(lake, spark) == [(1, 1, "01 23:30", 90.0)]

    meanwhile.append((1001, at(JAN_2, "00:30"), 100.0))
    assert reconciliation(dg.materialize([workout_bpm], resources=env)).passed  # merges into it
    assert bpm(lake, spark) == [(1, 1, "01 23:30", 90.0), (1, 1, "01 23:40", 95.0)]

    assert reconciliation(dg.materialize([workout_bpm], resources=env)).passed
    assert bpm(lake, spark) == [
        (1, 1, "01 23:30", 90.0),
        (1, 1, "01 23:40", 95.0),
        (1, 1, "02 00:30", 100.0),
    ]


def reconciliation(ran: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    [reconciled] = [e for e in ran.get_asset_check_evaluations()
                    if e.check_name == READINGS_IN_WORKOUT_BPM]  # fmt: skip
    return reconciled
