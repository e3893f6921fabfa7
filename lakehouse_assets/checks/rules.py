"""The data-quality rules of each table, in one place: its primary key (unique, not null), the
values a column accepts, and the conditions every row must meet. Each rule becomes a Dagster asset
check of the table's asset (``checks/results.py``); the rules themselves are plain data.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from lakehouse_assets.constants import (
    COMPLETED_WORKOUTS,
    GOLD,
    GYM_LOGS,
    GYM_SUMMARY,
    HEART_RATE,
    SILVER,
    USER_BINS,
    USER_PROFILE,
    USERS,
    WORKOUT_BPM,
    WORKOUT_BPM_SUMMARY,
    WORKOUTS,
)
from lakehouse_assets.gold.transforms import GYM_KEYS
from lakehouse_assets.silver.transforms import AGE_BINS, MAX_WORKOUT, WORKOUT_KEYS
from lakehouse_assets.sources.cdc import IS_CURRENT, VALID_FROM
from lakehouse_assets.sources.declarations import SourceDeclaration

ENV_QUARANTINE_WARN_RATE = "LAKEHOUSE_QUARANTINE_WARN_RATE"
QUARANTINE_RATE = "quarantine_rate"
PRIMARY_KEY_UNIQUE = "primary_key_unique"
PRIMARY_KEY_NOT_NULL = "primary_key_not_null"
# A heart rate a wearable can really measure, in beats per minute (the sample data: 40 to 200).
PLAUSIBLE_BPM = (25, 250)
AGE_LABELS = (*(label for _, label in AGE_BINS), "95+", "invalid age")


@dataclass(frozen=True)
class Condition:
    """A condition every row must meet: ``holds`` is a Spark SQL expression; a row for which it
    is false is offending (null counts as met, as in SQL's CHECK constraints)."""

    holds: str
    description: str


@dataclass(frozen=True)
class TableRules:
    """The checks of one table. ``keys``: its primary key (checked unique and not null);
    ``accepted``: column -> the values it may hold (nulls aside); ``conditions``: check name ->
    a condition of every row. All of them block the tables downstream when they fail."""

    keys: tuple[str, ...] = ()
    accepted: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    # Check name -> (columns, condition): the columns are unique among the rows meeting it.
    unique_where: Mapping[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    # The key fixes the day partition a row is in, so a run's rows can clash only with rows of
    # the days it wrote: the rules are evaluated on those days (``results.check_results``).
    key_fixes_day: bool = False

    def check_names(self) -> list[str]:
        """The names of the asset checks these rules make, in a stable order."""
        names = [PRIMARY_KEY_UNIQUE, PRIMARY_KEY_NOT_NULL] if self.keys else []
        accepted = [f"accepted_{column}" for column in self.accepted]
        return [*names, *accepted, *self.conditions, *self.unique_where]


def _bpm_plausible(column: str, only_valid: bool = False) -> Condition:
    low, high = PLAUSIBLE_BPM
    holds = f"{column} BETWEEN {low} AND {high}"
    return Condition(
        f"NOT valid OR {holds}" if only_valid else holds,
        f"`{column}` is a plausible heart rate ({low} to {high} bpm)"
        + (" where the reading is valid" if only_valid else ""),
    )


RULES: dict[tuple[str, str], TableRules] = {
    (SILVER, USERS): TableRules(keys=("user_id", "registration_timestamp")),
    (SILVER, GYM_LOGS): TableRules(
        keys=("mac_address", "gym", "login"),
        key_fixes_day=True,  # dated by login
        conditions={"logout_after_login": Condition("logout > login", "`logout` after `login`")},
    ),
    (SILVER, USER_PROFILE): TableRules(keys=("user_id",)),
    (SILVER, HEART_RATE): TableRules(
        keys=("device_id", "time"),
        key_fixes_day=True,  # dated by time
        conditions={"heartrate_plausible": _bpm_plausible("heartrate", only_valid=True)},
    ),
    (SILVER, WORKOUTS): TableRules(
        keys=(*WORKOUT_KEYS, "action"), accepted={"action": ("start", "stop")}
    ),
    (SILVER, COMPLETED_WORKOUTS): TableRules(
        keys=tuple(WORKOUT_KEYS),
        conditions={
            "workout_duration": Condition(
                f"start_time < end_time AND end_time <= start_time + {MAX_WORKOUT}",
                "`end_time` after `start_time`, at most 3 hours later",
            )
        },
    ),
    (SILVER, WORKOUT_BPM): TableRules(
        keys=(*WORKOUT_KEYS, "time"),
        # dated by start_time, one per workout: completed_workouts' key, checked on its whole
        # table (and blocking this one while it fails)
        key_fixes_day=True,
        conditions={
            "heartrate_plausible": _bpm_plausible("heartrate"),
            "reading_inside_workout": Condition(
                "start_time < time AND time <= end_time", "`time` within the workout"
            ),
        },
    ),
    (SILVER, USER_BINS): TableRules(keys=("user_id",), accepted={"age": AGE_LABELS}),
    (GOLD, WORKOUT_BPM_SUMMARY): TableRules(
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
    (GOLD, GYM_SUMMARY): TableRules(
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


def source_rules(source: SourceDeclaration) -> TableRules:
    """The rules of a declared source's silver table, from its declaration: the key of its mode
    (``keys`` for SCD1; ``keys`` and ``valid_from`` for SCD2, with one current version per key;
    the Kafka key for a latest-per-key mirror; the record's Kafka coordinates for append)."""
    if source.mode == "cdc-scd1":
        return TableRules(keys=source.keys)
    if source.mode == "cdc-scd2":
        current = {"one_current_version": (source.keys, IS_CURRENT)}
        return TableRules(keys=(*source.keys, VALID_FROM), unique_where=current)
    if source.mode == "latest-per-key":
        return TableRules(keys=("_kafka_key",))
    return TableRules(keys=("_kafka_topic", "_kafka_partition", "_kafka_offset"))


def quarantine_warn_rate(environ: Mapping[str, str] | None = None) -> float:
    """The share of a run's records sent to quarantine above which its check warns
    (``LAKEHOUSE_QUARANTINE_WARN_RATE``, default 0.05)."""
    value = (os.environ if environ is None else environ).get(ENV_QUARANTINE_WARN_RATE) or "0.05"
    try:
        rate = float(value)
    except ValueError:
        rate = -1.0
    if not 0 <= rate <= 1:
        raise ValueError(f"{ENV_QUARANTINE_WARN_RATE} must be a number from 0 to 1, got {value!r}")
    return rate
