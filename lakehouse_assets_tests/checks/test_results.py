"""The asset checks made of the rules: specs (blocking, described), the quarantine-rate warning."""

from __future__ import annotations

import dagster as dg
import pytest

from lakehouse_assets.checks.results import (
    check_specs,
    quarantine_rate_result,
)
from lakehouse_assets.constants import GOLD, SILVER, asset_key
from lakehouse_assets.definitions import defs
from lakehouse_assets.fitness.gold.rules import RULES as GOLD_RULES
from lakehouse_assets.fitness.names import (
    COMPLETED_WORKOUTS,
    GYM_SUMMARY,
    WORKOUT_BPM,
    WORKOUT_BPM_SUMMARY,
)
from lakehouse_assets.fitness.silver.parsed import PARSED_TABLES
from lakehouse_assets.fitness.silver.rules import RULES as SILVER_RULES
from lakehouse_assets.fitness.silver.transforms import WORKOUT_KEYS
from resources.settings import ENV_QUARANTINE_WARN_RATE, quarantine_warn_rate

KEY = asset_key(SILVER, "bpm_quarantine")


def test_every_silver_and_gold_table_of_the_pipeline_has_blocking_key_checks() -> None:
    graph = defs.resolve_asset_graph()
    for layer, table in [(SILVER, "users"), (SILVER, "workout_bpm"), (GOLD, "gym_summary")]:
        for name in ("primary_key_unique", "primary_key_not_null"):
            spec = graph.get_check_spec(dg.AssetCheckKey(asset_key(layer, table), name))
            assert spec.blocking and spec.description
    spec = check_specs(asset_key(GOLD, GYM_SUMMARY), GOLD_RULES[GYM_SUMMARY])[0]
    assert spec.description == "No two rows share the primary key (`gym`, `mac_address`, `date`)."


def test_quarantine_rate_warns_above_the_configured_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    at_limit = quarantine_rate_result(KEY, rejected=5, read=100)  # 0.05: not above
    assert at_limit.passed and at_limit.severity == dg.AssetCheckSeverity.WARN
    above = quarantine_rate_result(KEY, rejected=6, read=100)
    assert not above.passed and above.metadata["rate"].value == 0.06
    assert quarantine_rate_result(KEY, rejected=0, read=0).passed  # nothing read
    monkeypatch.setenv(ENV_QUARANTINE_WARN_RATE, "0.1")
    assert quarantine_rate_result(KEY, rejected=6, read=100).passed


def test_a_bad_warning_rate_is_refused_with_its_variable() -> None:
    for value in ("lots", "1.5", "-0.1"):
        with pytest.raises(ValueError, match=f"{ENV_QUARANTINE_WARN_RATE} must be a number"):
            quarantine_warn_rate({ENV_QUARANTINE_WARN_RATE: value})


def test_the_rows_a_fitness_write_takes_are_keyed_as_its_rules() -> None:
    """``written_rows``' condition: a merge by the rules' key, or days replaced where the key
    fixes the day."""
    merged_by = {spec.table: spec.keys for spec in PARSED_TABLES}
    merged_by[COMPLETED_WORKOUTS] = tuple(WORKOUT_KEYS)
    merged_by[WORKOUT_BPM] = (*WORKOUT_KEYS, "time")
    for table, keys in merged_by.items():
        assert SILVER_RULES[table].keys == keys, table
        unique = [e.name for e in SILVER_RULES[table].expectations if e.unique]
        assert unique == ["primary_key_unique"], table
    assert all(GOLD_RULES[table].key_fixes_day for table in (GYM_SUMMARY, WORKOUT_BPM_SUMMARY))


# The checks the fitness pipeline had when its rules were a type of their own, listed by hand:
# as expectations that fail on violation, each is still a blocking check of its table.
FITNESS_RULES = {
    (SILVER, "users"): set(),
    (SILVER, "gym_logs"): {"logout_after_login"},
    (SILVER, "user_profile"): set(),
    (SILVER, "heart_rate"): {"heartrate_plausible"},
    (SILVER, "workouts"): {"accepted_action"},
    (SILVER, "completed_workouts"): {"workout_duration"},
    (SILVER, "workout_bpm"): {"heartrate_plausible", "reading_inside_workout"},
    (SILVER, "user_bins"): {"accepted_age"},
    (GOLD, "workout_bpm_summary"): {"accepted_age", "bpm_ordered", "recordings_positive"},
    (GOLD, "gym_summary"): {"minutes_non_negative"},
}


def test_the_fitness_rules_are_expectations_that_block_as_before() -> None:
    graph = defs.resolve_asset_graph()
    for (layer, table), rules in FITNESS_RULES.items():
        expected = {"primary_key_unique", "primary_key_not_null", *rules}
        declared = (SILVER_RULES if layer == SILVER else GOLD_RULES)[table].expectations
        assert {e.name for e in declared} == expected, table
        assert {e.on_violation for e in declared} == {"fail"}, table
        key = asset_key(layer, table)
        blocking = {
            check.name
            for check in graph.asset_check_keys
            if check.asset_key == key and graph.get_check_spec(check).blocking
        }
        assert expected <= blocking, table
