"""The data-quality rules of the fitness pipeline's gold tables: expectations that fail on
violation (``checks.rules``)."""

from __future__ import annotations

from lakehouse_assets.checks.rules import TableRules, accepted_values, condition, primary_key
from lakehouse_assets.fitness.gold.transforms import GYM_KEYS
from lakehouse_assets.fitness.names import GYM_SUMMARY, WORKOUT_BPM_SUMMARY
from lakehouse_assets.fitness.silver.rules import AGE_LABELS
from lakehouse_assets.fitness.silver.transforms import WORKOUT_KEYS

RULES: dict[str, TableRules] = {
    WORKOUT_BPM_SUMMARY: TableRules(
        (
            *primary_key(*WORKOUT_KEYS),
            accepted_values("age", AGE_LABELS),
            condition(
                "bpm_ordered",
                "min_bpm <= avg_bpm AND avg_bpm <= max_bpm",
                "`min_bpm <= avg_bpm <= max_bpm`",
            ),
            condition("recordings_positive", "num_recordings > 0", "`num_recordings` above 0"),
        ),
        key_fixes_day=True,  # dated by start_time, as workout_bpm
    ),
    GYM_SUMMARY: TableRules(
        (
            *primary_key(*GYM_KEYS),
            condition(
                "minutes_non_negative",
                "minutes_in_gym >= 0 AND minutes_exercising >= 0",
                "`minutes_in_gym` and `minutes_exercising` not negative",
            ),
        ),
        key_fixes_day=True,  # the day is in the key
    ),
}
