"""Data-quality rules on small hand-built tables: every rule of every fitness table passes on good
rows and fails, alone, on rows crafted to break it; the counts and samples are hand-counted."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.checks.rules import TableRules, accepted_values, condition, primary_key
from lakehouse_assets.checks.transforms import count_offending, evaluate
from lakehouse_assets.constants import GOLD, SILVER
from lakehouse_assets.fitness.gold.rules import RULES as GOLD_RULES
from lakehouse_assets.fitness.silver.rules import RULES as SILVER_RULES
from lakehouse_assets.sources.declaration.model import SourceDeclaration
from lakehouse_assets.sources.writing.rules import source_rules

T0 = datetime(2026, 11, 1, 8, 0)
MIN = timedelta(minutes=1)
WORKOUT = "user_id long, workout_id long, session_id long"
Row = dict[str, Any]

# Every fitness table's rules, by (layer, table).
RULES = {(SILVER, t): r for t, r in SILVER_RULES.items()} | {
    (GOLD, t): r for t, r in GOLD_RULES.items()
}

# Per fitness table: its schema and two good rows (distinct keys; edge cases that must pass).
GOOD: dict[tuple[str, str], tuple[str, list[Row]]] = {
    (SILVER, "users"): (  # one user's two registrations
        "user_id long, device_id long, mac_address string, registration_timestamp timestamp",
        [{"user_id": 1, "device_id": 11, "mac_address": "a", "registration_timestamp": T0},
         {"user_id": 1, "device_id": 12, "mac_address": "b",
          "registration_timestamp": T0 + MIN}],
    ),
    (SILVER, "gym_logs"): (
        "mac_address string, gym string, login timestamp, logout timestamp",
        [{"mac_address": "a", "gym": "1", "login": T0, "logout": T0 + MIN},
         {"mac_address": "a", "gym": "1", "login": T0 + MIN, "logout": None}],
    ),
    (SILVER, "user_profile"): (
        "user_id long, city string",
        [{"user_id": 1, "city": "Oslo"}, {"user_id": 2, "city": None}],
    ),
    (SILVER, "heart_rate"): (  # an invalid reading of 0 is kept: plausibility asks valid ones
        "device_id long, time timestamp, heartrate double, valid boolean",
        [{"device_id": 1, "time": T0, "heartrate": 250.0, "valid": True},
         {"device_id": 1, "time": T0 + MIN, "heartrate": 0.0, "valid": False}],
    ),
    (SILVER, "workouts"): (
        f"{WORKOUT}, action string, time timestamp",
        [{"user_id": 1, "workout_id": 1, "session_id": 1, "action": "start", "time": T0},
         {"user_id": 1, "workout_id": 1, "session_id": 1, "action": "stop", "time": T0 + MIN}],
    ),
    (SILVER, "completed_workouts"): (
        f"{WORKOUT}, start_time timestamp, end_time timestamp",
        [{"user_id": 1, "workout_id": 1, "session_id": 1, "start_time": T0,
          "end_time": T0 + 180 * MIN},
         {"user_id": 1, "workout_id": 2, "session_id": 1, "start_time": T0, "end_time": T0 + MIN}],
    ),
    (SILVER, "workout_bpm"): (
        f"{WORKOUT}, start_time timestamp, end_time timestamp, time timestamp, heartrate double",
        [{"user_id": 1, "workout_id": 1, "session_id": 1, "start_time": T0,
          "end_time": T0 + 9 * MIN, "time": T0 + 9 * MIN, "heartrate": 25.0},
         {"user_id": 1, "workout_id": 1, "session_id": 1, "start_time": T0,
          "end_time": T0 + 9 * MIN, "time": T0 + MIN, "heartrate": 90.0}],
    ),
    (SILVER, "user_bins"): (
        "user_id long, age string",
        [{"user_id": 1, "age": "95+"}, {"user_id": 2, "age": "invalid age"}],
    ),
    (GOLD, "workout_bpm_summary"): (  # a user without a profile has a null age
        "user_id long, date date, workout_id long, session_id long, age string, "
        "min_bpm double, avg_bpm double, max_bpm double, num_recordings long",
        [{"user_id": 1, "date": date(2026, 11, 1), "workout_id": 1, "session_id": 1,
          "age": "18-25", "min_bpm": 80.0, "avg_bpm": 80.0, "max_bpm": 80.0, "num_recordings": 1},
         {"user_id": 2, "date": date(2026, 11, 1), "workout_id": 1, "session_id": 1,
          "age": None, "min_bpm": 70.0, "avg_bpm": 75.0, "max_bpm": 80.0, "num_recordings": 2}],
    ),
    (GOLD, "gym_summary"): (
        "gym string, mac_address string, date date, minutes_in_gym double, "
        "minutes_exercising double",
        [{"gym": "1", "mac_address": "a", "date": date(2026, 11, 1), "minutes_in_gym": 0.0,
          "minutes_exercising": 0.0},
         {"gym": "1", "mac_address": "a", "date": date(2026, 11, 2), "minutes_in_gym": 30.5,
          "minutes_exercising": 12.25}],
    ),
}  # fmt: skip


def _set(**values: Any) -> Callable[[list[Row]], list[Row]]:
    """Breaks the first row by giving it ``values``."""
    return lambda rows: [{**rows[0], **values}, rows[1]]


def _duplicate(rows: list[Row]) -> list[Row]:
    """The first row twice more (its key three times: two rows beyond the first)."""
    return [*rows, rows[0], rows[0]]


# Per fitness table and check: how to break it, and the offending rows that makes.
BREAK: dict[tuple[str, str, str], tuple[Callable[[list[Row]], list[Row]], int]] = {
    **{(layer, table, "primary_key_unique"): (_duplicate, 2) for layer, table in GOOD},
    (SILVER, "users", "primary_key_not_null"): (_set(user_id=None), 1),
    (SILVER, "gym_logs", "primary_key_not_null"): (_set(gym=None), 1),
    (SILVER, "gym_logs", "logout_after_login"): (_set(logout=T0), 1),  # logout == login
    (SILVER, "user_profile", "primary_key_not_null"): (_set(user_id=None), 1),
    (SILVER, "heart_rate", "primary_key_not_null"): (_set(time=None), 1),
    (SILVER, "heart_rate", "heartrate_plausible"): (_set(heartrate=251.0), 1),
    (SILVER, "workouts", "primary_key_not_null"): (_set(action=None), 1),
    (SILVER, "workouts", "accepted_action"): (_set(action="pause"), 1),
    (SILVER, "completed_workouts", "primary_key_not_null"): (_set(session_id=None), 1),
    (SILVER, "completed_workouts", "workout_duration"): (_set(end_time=T0 + 181 * MIN), 1),
    (SILVER, "workout_bpm", "primary_key_not_null"): (_set(user_id=None), 1),
    (SILVER, "workout_bpm", "heartrate_plausible"): (_set(heartrate=24.9), 1),
    (SILVER, "workout_bpm", "reading_inside_workout"): (_set(time=T0), 1),  # == start_time
    (SILVER, "user_bins", "primary_key_not_null"): (_set(user_id=None), 1),
    (SILVER, "user_bins", "accepted_age"): (_set(age="18-24"), 1),
    (GOLD, "workout_bpm_summary", "primary_key_not_null"): (_set(workout_id=None), 1),
    (GOLD, "workout_bpm_summary", "accepted_age"): (_set(age="adult"), 1),
    (GOLD, "workout_bpm_summary", "bpm_ordered"): (_set(min_bpm=81.0), 1),
    (GOLD, "workout_bpm_summary", "recordings_positive"): (_set(num_recordings=0), 1),
    (GOLD, "gym_summary", "primary_key_not_null"): (_set(date=None), 1),
    (GOLD, "gym_summary", "minutes_non_negative"): (_set(minutes_exercising=-0.01), 1),
}


def test_every_rule_of_every_fitness_table_has_a_crafted_break() -> None:
    named = {
        (layer, table, name) for (layer, table), r in RULES.items() for name in r.check_names()
    }
    assert set(GOOD) == set(RULES)
    assert named == set(BREAK)


@pytest.mark.parametrize("layer, table", sorted(GOOD))
def test_good_rows_pass_every_rule(spark: SparkSession, layer: str, table: str) -> None:
    schema, rows = GOOD[(layer, table)]
    counts = count_offending(spark.createDataFrame(rows, schema), RULES[(layer, table)])
    assert counts == dict.fromkeys(RULES[(layer, table)].check_names(), 0)


@pytest.mark.parametrize("layer, table, name", sorted(BREAK))
def test_each_crafted_break_fails_its_rule_alone(
    spark: SparkSession, layer: str, table: str, name: str
) -> None:
    schema, rows = GOOD[(layer, table)]
    breaking, offending = BREAK[(layer, table, name)]
    counts = count_offending(spark.createDataFrame(breaking(rows), schema), RULES[(layer, table)])
    expected = dict.fromkeys(RULES[(layer, table)].check_names(), 0)
    assert counts == {**expected, name: offending}


def test_a_failed_rule_comes_with_a_sample_of_its_offending_rows(spark: SparkSession) -> None:
    rules = TableRules(
        (
            *primary_key("id"),
            accepted_values("kind", ("a", "b")),
            condition("positive", "amount > 0", "`amount` above 0"),
        )
    )
    rows = spark.createDataFrame(
        [(1, "a", 5), (1, "b", 0), (1, "c", None), (2, None, -1), (None, "a", 3)],
        "id long, kind string, amount long",
    )
    outcomes = {outcome.name: outcome for outcome in evaluate(rows, rules)}
    # id 1 three times (two beyond the first); null ids are the not-null rule's business.
    assert outcomes["primary_key_unique"].offending == 2
    assert outcomes["primary_key_unique"].sample == [{"id": 1, "count": 3}]
    assert outcomes["primary_key_not_null"].sample == [{"id": None, "kind": "a", "amount": 3}]
    assert outcomes["accepted_kind"].sample == [{"id": 1, "kind": "c", "amount": None}]
    positive = outcomes["positive"]  # a null amount meets the condition (SQL CHECK semantics)
    assert positive.offending == 2 and not positive.passed
    assert sorted(row["amount"] for row in positive.sample) == [-1, 0]


def test_scd2_rules_ask_one_current_version_per_key(spark: SparkSession) -> None:
    source = SourceDeclaration(
        name="customers", topic="t", format="debezium-json", mode="cdc-scd2", keys=("id",)
    )
    rules = source_rules(source)
    rows = spark.createDataFrame(
        [(1, 10, True), (1, 5, True), (1, 1, False), (2, 3, True), (2, 3, False)],
        "id long, valid_from long, is_current boolean",
    )
    # (2, 3) twice: one row beyond the first; id 1 current twice: one beyond the first.
    assert count_offending(rows, rules) == {
        "primary_key_unique": 1,
        "primary_key_not_null": 0,
        "one_current_version": 1,
    }
