"""The data-quality rules of the fitness pipeline's silver tables (``checks.rules``' types)."""

from __future__ import annotations

from lakehouse_assets.checks.rules import Condition, TableRules
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


def bpm_plausible(column: str, only_valid: bool = False) -> Condition:
    """``column`` holds a heart rate a wearable can measure (where ``valid``, if ``only_valid``)."""
    low, high = PLAUSIBLE_BPM
    holds = f"{column} BETWEEN {low} AND {high}"
    return Condition(
        f"NOT valid OR {holds}" if only_valid else holds,
        f"`{column}` is a plausible heart rate ({low} to {high} bpm)"
        + (" where the reading is valid" if only_valid else ""),
    )


RULES: dict[str, TableRules] = {
    USERS: TableRules(keys=("user_id", "registration_timestamp")),
    GYM_LOGS: TableRules(
        keys=("mac_address", "gym", "login"),
        key_fixes_day=True,  # dated by login
        conditions={"logout_after_login": Condition("logout > login", "`logout` after `login`")},
    ),
    USER_PROFILE: TableRules(keys=("user_id",)),
    HEART_RATE: TableRules(
        keys=("device_id", "time"),
        key_fixes_day=True,  # dated by time
        conditions={"heartrate_plausible": bpm_plausible("heartrate", only_valid=True)},
    ),
    WORKOUTS: TableRules(keys=(*WORKOUT_KEYS, "action"), accepted={"action": ("start", "stop")}),
    COMPLETED_WORKOUTS: TableRules(
        keys=tuple(WORKOUT_KEYS),
        conditions={
            "workout_duration": Condition(
                f"start_time < end_time AND end_time <= start_time + {MAX_WORKOUT}",
                "`end_time` after `start_time`, at most 3 hours later",
            )
        },
    ),
    WORKOUT_BPM: TableRules(
        keys=(*WORKOUT_KEYS, "time"),
        # dated by start_time, one per workout: completed_workouts' key, checked on its whole
        # table (and blocking this one while it fails)
        key_fixes_day=True,
        conditions={
            "heartrate_plausible": bpm_plausible("heartrate"),
            "reading_inside_workout": Condition(
                "start_time < time AND time <= end_time", "`time` within the workout"
            ),
        },
    ),
    USER_BINS: TableRules(keys=("user_id",), accepted={"age": AGE_LABELS}),
}
