"""What each column of the gold tables holds, and the silver columns it is computed from (the
tables' column schema and column lineage in the Dagster UI)."""

from lakehouse_assets.constants import SILVER
from lakehouse_assets.fitness.names import (
    COMPLETED_WORKOUTS,
    GYM_LOGS,
    GYM_SUMMARY,
    USER_BINS,
    USERS,
    WORKOUT_BPM,
    WORKOUT_BPM_SUMMARY,
)

DESCRIPTIONS: dict[str, dict[str, str]] = {
    WORKOUT_BPM_SUMMARY: {
        "user_id": "The user's id.",
        "date": "The UTC date the workout started; the table is partitioned by it.",
        "workout_id": "The workout's id (per user).",
        "session_id": "The session's id (per workout).",
        "age": "The user's age bin at the as-of date (null without a profile).",
        "gender": "The user's gender (null without a profile).",
        "city": "The user's city (null without a profile).",
        "state": "The user's state (null without a profile).",
        "min_bpm": "The lowest valid heart rate during the workout, in beats per minute.",
        "avg_bpm": "The mean valid heart rate during the workout, in beats per minute.",
        "max_bpm": "The highest valid heart rate during the workout, in beats per minute.",
        "num_recordings": "How many valid readings the workout has (at least 1).",
    },
    GYM_SUMMARY: {
        "gym": "The gym.",
        "mac_address": "The mac address of the visitor's phone.",
        "date": "The UTC date of the visits' logins; the table is partitioned by it.",
        "minutes_in_gym": "Minutes between login and logout, summed over the day's visits (2 "
        "decimals).",
        "minutes_exercising": "Minutes of the user's completed workouts that start during one of "
        "those visits, each workout once (2 decimals; 0 when none).",
    },
}

WORKOUT = ("user_id", "workout_id", "session_id")
LINEAGE: dict[str, dict[str, tuple[tuple[str, str, str], ...]]] = {
    WORKOUT_BPM_SUMMARY: {
        **{c: ((SILVER, WORKOUT_BPM, c),) for c in WORKOUT},
        "date": ((SILVER, WORKOUT_BPM, "start_time"),),
        **{c: ((SILVER, USER_BINS, c),) for c in ("age", "gender", "city", "state")},
        **{c: ((SILVER, WORKOUT_BPM, "heartrate"),) for c in ("min_bpm", "avg_bpm", "max_bpm")},
        "num_recordings": ((SILVER, WORKOUT_BPM, "heartrate"),),
    },
    GYM_SUMMARY: {
        "gym": ((SILVER, GYM_LOGS, "gym"),),
        "mac_address": ((SILVER, GYM_LOGS, "mac_address"),),
        "date": ((SILVER, GYM_LOGS, "login"),),
        "minutes_in_gym": ((SILVER, GYM_LOGS, "login"), (SILVER, GYM_LOGS, "logout")),
        "minutes_exercising": (
            (SILVER, COMPLETED_WORKOUTS, "start_time"),
            (SILVER, COMPLETED_WORKOUTS, "end_time"),
            (SILVER, GYM_LOGS, "login"),
            (SILVER, GYM_LOGS, "logout"),
            (SILVER, USERS, "mac_address"),
            (SILVER, USERS, "registration_timestamp"),
        ),
    },
}
