"""What each column of the silver tables holds, and the upstream columns it is computed from
(the tables' column schema and column lineage in the Dagster UI). The rules behind them are in
``docs/fitness_pipeline.md``."""

from lakehouse_assets.constants import BRONZE, QUARANTINE_SUFFIX, SILVER
from lakehouse_assets.fitness.names import (
    COMPLETED_WORKOUTS,
    GYM_LOGS,
    HEART_RATE,
    KAFKA_TOPICS,
    LANDING_COLUMNS,
    LANDING_GYM_LOGINS,
    LANDING_REGISTERED_USERS,
    TOPIC_BPM,
    TOPIC_USER_INFO,
    TOPIC_WORKOUT,
    USER_BINS,
    USER_PROFILE,
    USERS,
    WORKOUT_BPM,
    WORKOUTS,
)
from lakehouse_assets.validation import QUARANTINE

DATE = "The UTC date of {}; the table is partitioned by it."
USER_ID = "The user's id."
WORKOUT_IDS = {
    "user_id": USER_ID,
    "workout_id": "The workout's id (per user).",
    "session_id": "The session's id (per workout).",
}
PROFILE = {
    "gender": "The user's gender, as last given.",
    "city": "The user's city (address), as last given.",
    "state": "The user's state (address), as last given.",
}

DESCRIPTIONS: dict[str, dict[str, str]] = {
    USERS: {
        "user_id": USER_ID,
        "device_id": "The id of the wearable device registered.",
        "mac_address": "The mac address of the phone registered, seen by the gyms' door readers.",
        "registration_timestamp": "When the user registered them; in force until the user's next "
        "registration, or the device's or phone's next registration by anyone.",
    },
    GYM_LOGS: {
        "mac_address": "The mac address of the visitor's phone.",
        "gym": "The gym visited.",
        "login": "When the visitor entered the gym.",
        "logout": "When the visitor left (the latest logout seen for the visit).",
        "date": DATE.format("`login`"),
    },
    USER_PROFILE: {
        "user_id": USER_ID,
        "dob": "Date of birth.",
        "sex": "Sex, as last given.",
        "gender": PROFILE["gender"],
        "first_name": "First name.",
        "last_name": "Last name.",
        "street_address": "Street address.",
        "city": PROFILE["city"],
        "state": PROFILE["state"],
        "zip": "Zip code.",
        "updated": "The timestamp of the profile event this row is (the newest wins).",
    },
    HEART_RATE: {
        "device_id": "The id of the wearable that measured the reading.",
        "time": "When the reading was taken.",
        "heartrate": "Beats per minute (null when the device sent none).",
        "valid": "Whether the heart rate is present and positive.",
        "date": DATE.format("`time`"),
    },
    WORKOUTS: {
        **WORKOUT_IDS,
        "action": "`start` or `stop`.",
        "time": "When the action happened.",
        "date": DATE.format("`time`"),
    },
    COMPLETED_WORKOUTS: {
        **WORKOUT_IDS,
        "start_time": "When the workout started.",
        "end_time": "When it stopped (at most 3 hours after the start).",
        "date": DATE.format("`start_time`"),
    },
    WORKOUT_BPM: {
        **WORKOUT_IDS,
        "start_time": "When the workout started.",
        "end_time": "When it stopped.",
        "time": "When the reading was taken (within the workout).",
        "heartrate": "Beats per minute (valid readings only).",
        "date": DATE.format("`start_time`"),
    },
    USER_BINS: {
        "user_id": USER_ID,
        "age": "The age bin at the as-of date (`under 18`, `18-25`, ..., `95+`; `invalid age` "
        "without a date of birth).",
        **PROFILE,
    },
    **{f"{source}{QUARANTINE_SUFFIX}": QUARANTINE for source in (*KAFKA_TOPICS, *LANDING_COLUMNS)},
}

WORKOUT_COLUMNS = ("user_id", "workout_id", "session_id")
# The tables parsed from one bronze table, and the bronze column holding the records they parse.
PARSED_FROM = {
    USERS: (LANDING_REGISTERED_USERS, "line"),
    GYM_LOGS: (LANDING_GYM_LOGINS, "line"),
    USER_PROFILE: (TOPIC_USER_INFO, "value"),
    HEART_RATE: (TOPIC_BPM, "value"),
    WORKOUTS: (TOPIC_WORKOUT, "value"),
}


def _quarantine_lineage(source: str, raw: str) -> dict[str, tuple[tuple[str, str, str], ...]]:
    """A quarantine table's columns from its bronze table's (``raw``: the record's column)."""
    coordinates = ("topic", "partition", "offset") if raw == "value" else ("source_file",)
    return {
        "source": ((BRONZE, source, coordinates[0]),),
        **{c: ((BRONZE, source, c),) for c in coordinates[1:]},
        "raw": ((BRONZE, source, raw),),
        "raw_text": ((BRONZE, source, raw),),
        "reason": ((BRONZE, source, raw),),
        "ingested_at": ((BRONZE, source, "ingested_at"),),
    }


# Per table: its columns computed from upstream columns, as (layer, table, column).
LINEAGE: dict[str, dict[str, tuple[tuple[str, str, str], ...]]] = {
    **{
        table: {column: ((BRONZE, *PARSED_FROM[table]),) for column in DESCRIPTIONS[table]}
        for table in PARSED_FROM
    },
    COMPLETED_WORKOUTS: {
        **{c: ((SILVER, WORKOUTS, c),) for c in WORKOUT_COLUMNS},
        "start_time": ((SILVER, WORKOUTS, "time"), (SILVER, WORKOUTS, "action")),
        "end_time": ((SILVER, WORKOUTS, "time"), (SILVER, WORKOUTS, "action")),
        "date": ((SILVER, WORKOUTS, "time"),),
    },
    WORKOUT_BPM: {
        **{c: ((SILVER, COMPLETED_WORKOUTS, c),) for c in WORKOUT_COLUMNS},
        "start_time": ((SILVER, COMPLETED_WORKOUTS, "start_time"),),
        "end_time": ((SILVER, COMPLETED_WORKOUTS, "end_time"),),
        "time": ((SILVER, HEART_RATE, "time"), (SILVER, USERS, "device_id")),
        "heartrate": ((SILVER, HEART_RATE, "heartrate"), (SILVER, HEART_RATE, "valid")),
        "date": ((SILVER, COMPLETED_WORKOUTS, "start_time"),),
    },
    USER_BINS: {
        "user_id": ((SILVER, USER_PROFILE, "user_id"),),
        "age": ((SILVER, USER_PROFILE, "dob"),),
        **{c: ((SILVER, USER_PROFILE, c),) for c in ("gender", "city", "state")},
    },
    **{
        f"{topic}{QUARANTINE_SUFFIX}": _quarantine_lineage(topic, "value") for topic in KAFKA_TOPICS
    },
    **{
        f"{source}{QUARANTINE_SUFFIX}": _quarantine_lineage(source, "line")
        for source in LANDING_COLUMNS
    },
}
