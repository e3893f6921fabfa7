"""Names used across the project: layers, tables, topics, asset keys, environment variables."""

from typing import Final

import dagster as dg

# Layers.
BRONZE: Final = "bronze"
SILVER: Final = "silver"
GOLD: Final = "gold"

# Kafka topics of the reference pipeline; each lands in a bronze table of the same name.
TOPIC_USER_INFO: Final = "user_info"
TOPIC_WORKOUT: Final = "workout"
TOPIC_BPM: Final = "bpm"
KAFKA_TOPICS: Final = (TOPIC_USER_INFO, TOPIC_WORKOUT, TOPIC_BPM)

# Landing zone: files dropped by upstream systems at <root>/landing/<source>/*.csv.
LANDING_DIR: Final = "landing"
LANDING_REGISTERED_USERS: Final = "registered_users"
LANDING_GYM_LOGINS: Final = "gym_logins"
LANDING_COLUMNS: Final = {
    LANDING_REGISTERED_USERS: ("user_id", "device_id", "mac_address", "registration_timestamp"),
    LANDING_GYM_LOGINS: ("mac_address", "gym", "login", "logout"),
}

# Silver tables of the fitness pipeline.
USERS: Final = "users"
GYM_LOGS: Final = "gym_logs"
USER_PROFILE: Final = "user_profile"
HEART_RATE: Final = "heart_rate"
WORKOUTS: Final = "workouts"
COMPLETED_WORKOUTS: Final = "completed_workouts"
WORKOUT_BPM: Final = "workout_bpm"
USER_BINS: Final = "user_bins"
QUARANTINE_SUFFIX: Final = "_quarantine"

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
# Silver tables that grow with time are partitioned by DATE, the UTC date of one of their columns,
# so that a run's merges and reads touch only the days its changes span.
DATE: Final = "date"
# Bronze Kafka tables are partitioned by the UTC date of the Kafka record timestamp.
KAFKA_BRONZE_PARTITION: Final = DATE
DATED_BY: Final = {
    HEART_RATE: "time", WORKOUTS: "time", GYM_LOGS: "login", COMPLETED_WORKOUTS: "start_time",
    WORKOUT_BPM: "start_time",
}  # fmt: skip
# Columns OPTIMIZE Z-orders a table by (the columns its readers filter on); others are bin-packed.
Z_ORDER: Final = {HEART_RATE: ("device_id", "time"), WORKOUT_BPM: ("user_id", "start_time")}

# Folder under the lake root holding the Spark streaming checkpoints, one per stream.
CHECKPOINTS_DIR: Final = "_checkpoints"


# Who answers for the fitness pipeline's tables (declared sources name their own owners).
FITNESS_OWNERS: Final = ["team:fitness-data"]
FITNESS: Final = "fitness"  # the source tag of the fitness pipeline's derived tables


def asset_tags(layer: str, source: str) -> dict[str, str]:
    """The tags of a table's asset: its layer and the source it comes from."""
    return {"lakehouse/layer": layer, "lakehouse/source": source}


def asset_key(layer: str, table: str) -> dg.AssetKey:
    """The asset key of a table: ``[layer, table]``."""
    return dg.AssetKey([layer, table])


def stream_name(layer: str, table: str) -> str:
    """The name of the stream feeding a table; also its Delta app id and Kafka consumer group."""
    return f"lakehouse-{layer}-{table}"


def writer_pool(layer: str, table: str) -> str:
    """The Dagster pool of the step that writes a table: pools hold one step at a time
    (``default_limit: 1`` in dagster.yaml), so two runs that both select a table (two streams'
    runs meeting downstream) write it one after the other. A bronze table's pool is its stream's
    name, which also keeps one run at a time on its checkpoint."""
    return stream_name(layer, table)


def consumer_app_id(table: str, upstream: tuple[str, str]) -> str:
    """The transaction app id under which ``silver.<table>`` records the version of ``upstream``
    (layer, table) it has consumed."""
    return f"{SILVER}.{table}<-{'.'.join(upstream)}"
