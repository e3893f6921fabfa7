"""The data-quality rules of the fitness pipeline's silver tables: expectations that fail on
violation (``checks.rules``)."""

from __future__ import annotations

from lakehouse_assets.checks.expectations import Expectation
from lakehouse_assets.checks.rules import TableRules, accepted_values, condition, primary_key
from lakehouse_assets.fitness.names import (
    COMPLETED_WORKOUTS,
    GYM_LOGS,
    HEART_RATE,
    USER_BINS,
    USER_PROFILE,
    USERS,
    WORKOUT_BPM,
    WORKOUTS,
)
from lakehouse_assets.fitness.silver.transforms import AGE_BINS, MAX_WORKOUT, WORKOUT_KEYS

# A heart rate a wearable can really measure, in beats per minute (the sample data: 40 to 200).
PLAUSIBLE_BPM = (25, 250)
AGE_LABELS = (*(label for _, label in AGE_BINS), "95+", "invalid age")


def bpm_plausible(column: str, only_valid: bool = False) -> Expectation:
    """``heartrate_plausible``: ``column`` holds a heart rate a wearable can measure (where
    ``valid``, if ``only_valid``)."""
    low, high = PLAUSIBLE_BPM
    holds = f"{column} BETWEEN {low} AND {high}"
    return condition(
        "heartrate_plausible",
        f"NOT valid OR {holds}" if only_valid else holds,
        f"`{column}` is a plausible heart rate ({low} to {high} bpm)"
        + (" where the reading is valid" if only_valid else ""),
    )


RULES: dict[str, TableRules] = {
    USERS: TableRules(primary_key("user_id", "registration_timestamp")),
    GYM_LOGS: TableRules(
        (
            *primary_key("mac_address", "gym", "login"),
            condition("logout_after_login", "logout > login", "`logout` after `login`"),
        ),
        key_fixes_day=True,  # dated by login
    ),
    USER_PROFILE: TableRules(primary_key("user_id")),
    HEART_RATE: TableRules(
        (*primary_key("device_id", "time"), bpm_plausible("heartrate", only_valid=True)),
        key_fixes_day=True,  # dated by time
    ),
    WORKOUTS: TableRules(
        (*primary_key(*WORKOUT_KEYS, "action"), accepted_values("action", ("start", "stop")))
    ),
    COMPLETED_WORKOUTS: TableRules(
        (
            *primary_key(*WORKOUT_KEYS),
            condition(
                "workout_duration",
                f"start_time < end_time AND end_time <= start_time + {MAX_WORKOUT}",
                "`end_time` after `start_time`, at most 3 hours later",
            ),
        )
    ),
    WORKOUT_BPM: TableRules(
        (
            *primary_key(*WORKOUT_KEYS, "time"),
            bpm_plausible("heartrate"),
            condition(
                "reading_inside_workout",
                "start_time < time AND time <= end_time",
                "`time` within the workout",
            ),
        ),
        # dated by start_time, one per workout: completed_workouts' key, checked on its whole
        # table (and blocking this one while it fails)
        key_fixes_day=True,
    ),
    USER_BINS: TableRules((*primary_key("user_id"), accepted_values("age", AGE_LABELS))),
}
