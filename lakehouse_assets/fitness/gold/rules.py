"""The data-quality rules of the fitness pipeline's gold tables (``checks.rules``' types)."""

from __future__ import annotations

from lakehouse_assets.checks.rules import Condition, TableRules
from lakehouse_assets.fitness.gold.transforms import GYM_KEYS
from lakehouse_assets.fitness.names import GYM_SUMMARY, WORKOUT_BPM_SUMMARY
from lakehouse_assets.fitness.silver.rules import AGE_LABELS
from lakehouse_assets.fitness.silver.transforms import WORKOUT_KEYS

RULES: dict[str, TableRules] = {
    WORKOUT_BPM_SUMMARY: TableRules(
        keys=tuple(WORKOUT_KEYS),
        key_fixes_day=True,  # dated by start_time, as workout_bpm
        accepted={"age": AGE_LABELS},
        conditions={
            "bpm_ordered": Condition(
                "min_bpm <= avg_bpm AND avg_bpm <= max_bpm", "`min_bpm <= avg_bpm <= max_bpm`"
            ),
            "recordings_positive": Condition("num_recordings > 0", "`num_recordings` above 0"),
        },
    ),
    GYM_SUMMARY: TableRules(
        keys=tuple(GYM_KEYS),
        key_fixes_day=True,  # the day is in the key
        conditions={
            "minutes_non_negative": Condition(
                "minutes_in_gym >= 0 AND minutes_exercising >= 0",
                "`minutes_in_gym` and `minutes_exercising` not negative",
            )
        },
    ),
}
