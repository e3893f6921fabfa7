"""The fitness pipeline's names: its topics, landing folders, tables and owners, and how its
tables are laid out (the day each row belongs to, the columns OPTIMIZE Z-orders them by)."""

from typing import Final

from lakehouse_assets.constants import QUARANTINE_SUFFIX, REPLAYS_SUFFIX

# Kafka topics; each lands in a bronze table of the same name.
TOPIC_USER_INFO: Final = "user_info"
TOPIC_WORKOUT: Final = "workout"
TOPIC_BPM: Final = "bpm"
KAFKA_TOPICS: Final = (TOPIC_USER_INFO, TOPIC_WORKOUT, TOPIC_BPM)

# Landing folders (<root>/landing/<source>/*.csv), each with its files' columns in file order.
LANDING_REGISTERED_USERS: Final = "registered_users"
LANDING_GYM_LOGINS: Final = "gym_logins"
LANDING_COLUMNS: Final = {
    LANDING_REGISTERED_USERS: ("user_id", "device_id", "mac_address", "registration_timestamp"),
    LANDING_GYM_LOGINS: ("mac_address", "gym", "login", "logout"),
}

# Silver tables.
USERS: Final = "users"
GYM_LOGS: Final = "gym_logs"
USER_PROFILE: Final = "user_profile"
HEART_RATE: Final = "heart_rate"
WORKOUTS: Final = "workouts"
COMPLETED_WORKOUTS: Final = "completed_workouts"
WORKOUT_BPM: Final = "workout_bpm"
USER_BINS: Final = "user_bins"

# Gold reports.
WORKOUT_BPM_SUMMARY: Final = "workout_bpm_summary"
GYM_SUMMARY: Final = "gym_summary"

# Every table of each layer, for maintenance.
BRONZE_TABLES: Final = (*KAFKA_TOPICS, *LANDING_COLUMNS)
SILVER_TABLES: Final = (
    USERS, GYM_LOGS, USER_PROFILE, HEART_RATE, WORKOUTS, COMPLETED_WORKOUTS, WORKOUT_BPM, USER_BINS,
    *(f"{source}{QUARANTINE_SUFFIX}" for source in (*KAFKA_TOPICS, *LANDING_COLUMNS)),
)  # fmt: skip
GOLD_TABLES: Final = (WORKOUT_BPM_SUMMARY, GYM_SUMMARY)
# Every table as ``<layer>.<table>``: names a declared source may not take, and may reference.
TABLES: Final = (
    *(f"bronze.{table}" for table in BRONZE_TABLES),
    *(f"silver.{table}" for table in SILVER_TABLES),
    *(f"gold.{table}" for table in GOLD_TABLES),
    *(f"silver.{t}{REPLAYS_SUFFIX}" for t in SILVER_TABLES if t.endswith(QUARANTINE_SUFFIX)),
)

# The silver tables that grow with time, each partitioned by the UTC date of this column.
DATED_BY: Final = {
    HEART_RATE: "time", WORKOUTS: "time", GYM_LOGS: "login", COMPLETED_WORKOUTS: "start_time",
    WORKOUT_BPM: "start_time",
}  # fmt: skip
# Columns OPTIMIZE Z-orders a table by (the columns its readers filter on); others are bin-packed.
Z_ORDER: Final = {HEART_RATE: ("device_id", "time"), WORKOUT_BPM: ("user_id", "start_time")}

# Who answers for the pipeline's tables (declared sources name their own owners).
FITNESS_OWNERS: Final = ["team:fitness-data"]
FITNESS: Final = "fitness"  # the source tag of the pipeline's derived tables
