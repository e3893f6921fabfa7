"""The fitness pipeline's five silver tables parsed from bronze, each with its rules, columns and
lineage, on the platform's parsed tables (``refinement.parsed``)."""

from typing import Any

from lakehouse_assets.constants import SILVER
from lakehouse_assets.fitness.names import (
    DATED_BY,
    FITNESS_OWNERS,
    GYM_LOGS,
    HEART_RATE,
    LANDING_GYM_LOGINS,
    LANDING_REGISTERED_USERS,
    TOPIC_BPM,
    TOPIC_USER_INFO,
    TOPIC_WORKOUT,
    USER_PROFILE,
    USERS,
    WORKOUTS,
)
from lakehouse_assets.fitness.silver import transforms
from lakehouse_assets.fitness.silver.columns import DESCRIPTIONS, LINEAGE
from lakehouse_assets.fitness.silver.rules import RULES
from lakehouse_assets.fitness.upgrades import upgrade_of
from lakehouse_assets.refinement.parsed_table import ParsedTable, Transform
from lakehouse_assets.refinement.step import quarantine_table
from lakehouse_assets.validation import csv_quarantine, kafka_quarantine
from resources.delta_merge import later


def _parsed(
    table: str,
    source: str,
    parse: Transform,
    quarantine: Transform,
    shape: Transform,
    keys: tuple[str, ...],
    **options: Any,
) -> ParsedTable:
    """``silver.<table>`` parsed from ``bronze.<source>``, with the fitness pipeline's rules,
    columns, lineage, owners and layout."""
    return ParsedTable(
        table, source, parse, quarantine, shape, keys, rules=RULES[table],
        descriptions=DESCRIPTIONS[table], lineage=LINEAGE.get(table),
        quarantine_lineage=LINEAGE.get(quarantine_table(source)), owners=FITNESS_OWNERS,
        dated_by=DATED_BY.get(table),
        quarantine_upgrade=upgrade_of(SILVER, quarantine_table(source)), **options,
    )  # fmt: skip


PARSED_TABLES = (
    _parsed(USERS, LANDING_REGISTERED_USERS, transforms.parse_registered_users, csv_quarantine,
            transforms.users, ("user_id", "registration_timestamp")),
    _parsed(GYM_LOGS, LANDING_GYM_LOGINS, transforms.parse_gym_logins, csv_quarantine,
            transforms.gym_logs, ("mac_address", "gym", "login"), update_when=later("logout")),
    _parsed(USER_PROFILE, TOPIC_USER_INFO, transforms.parse_user_info, kafka_quarantine,
            transforms.latest_profiles, ("user_id",), from_history=True),
    _parsed(HEART_RATE, TOPIC_BPM, transforms.parse_bpm, kafka_quarantine,
            transforms.heart_rate, ("device_id", "time"), insert_only=True),
    _parsed(WORKOUTS, TOPIC_WORKOUT, transforms.parse_workout, kafka_quarantine,
            transforms.workouts, ("user_id", "workout_id", "session_id", "action")),
)  # fmt: skip
