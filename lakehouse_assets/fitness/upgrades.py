"""The fitness pipeline's tables that earlier versions wrote in another layout, each with its
upgrade (``migrations``; ``lakehouse migrate`` runs them): its Kafka and landing bronze tables
and their quarantines."""

from lakehouse_assets.fitness.names import (
    GYM_LOGS,
    KAFKA_TOPICS,
    LANDING_COLUMNS,
    LANDING_GYM_LOGINS,
    LANDING_REGISTERED_USERS,
    USERS,
)
from lakehouse_assets.migrations import (
    Upgrade,
    kafka_bronze_upgrade,
    landing_bronze_upgrade,
    quarantine_upgrade,
)

# The silver table parsed from each landing source (``silver.parsed.PARSED_TABLES``).
LANDING_SILVER = {LANDING_REGISTERED_USERS: USERS, LANDING_GYM_LOGINS: GYM_LOGS}

UPGRADES = (
    *(kafka_bronze_upgrade(topic) for topic in KAFKA_TOPICS),
    *(
        landing_bronze_upgrade(source, columns, LANDING_SILVER[source])
        for source, columns in LANDING_COLUMNS.items()
    ),
    *(quarantine_upgrade(source) for source in (*KAFKA_TOPICS, *LANDING_COLUMNS)),
)


def upgrade_of(layer: str, table: str) -> Upgrade | None:
    """The upgrade of ``layer.table`` (None: no earlier version wrote it in another layout)."""
    return next((u for u in UPGRADES if (u.layer, u.table) == (layer, table)), None)
