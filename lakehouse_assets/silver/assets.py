"""Silver assets: each run reads only the upstream changes since its last run, exactly once.

A silver table records, in the same Delta commit as its data, the upstream version it consumed
(a transaction marker ``{"silver.<table><-<layer>.<upstream>": version}``). The next run reads
the upstream change data feed after that version; a re-run after a crash reads the same changes
again and the markers keep every table from taking them twice.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pydantic import Field
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.checks.reconciliation import (
    READINGS_IN_WORKOUT_BPM,
    RECONCILED_WITH_BRONZE,
    bronze_reconciliation,
    workout_bpm_reconciliation,
)
from lakehouse_assets.checks.results import (
    check_results,
    quarantine_rate_result,
    quarantine_rate_spec,
    reconciliation_result,
    reconciliation_spec,
    table_check_specs,
)
from lakehouse_assets.checks.transforms import Outcome
from lakehouse_assets.constants import (
    BRONZE,
    COMPLETED_WORKOUTS,
    GYM_LOGS,
    HEART_RATE,
    LANDING_GYM_LOGINS,
    LANDING_REGISTERED_USERS,
    QUARANTINE_SUFFIX,
    SILVER,
    TOPIC_BPM,
    TOPIC_USER_INFO,
    TOPIC_WORKOUT,
    USER_BINS,
    USER_PROFILE,
    USERS,
    WORKOUT_BPM,
    WORKOUTS,
    asset_key,
    consumer_app_id,
)
from lakehouse_assets.migrations import require_current
from lakehouse_assets.partitions import silver_automation
from lakehouse_assets.profiling.store import profile_after_write
from lakehouse_assets.silver import transforms
from lakehouse_assets.silver.layout import dated, days_of, layout, read_days
from lakehouse_assets.silver.validation import csv_quarantine, kafka_quarantine, valid
from resources import CalendarResource, LakeResource, SparkResource
from resources.lake import Markers

Transform = Callable[[DataFrame], DataFrame]
SILVER_KINDS = {"spark", "delta"}
SILVER_ASSET: dict[str, Any] = {
    "group_name": SILVER,
    "kinds": SILVER_KINDS,
    "automation_condition": silver_automation,
}


class SilverConfig(dg.Config):
    """Options of one run of a silver asset."""

    full_refresh: bool = Field(
        default=False,
        description="Rebuild the table from all of its upstream, replacing it in one commit "
        "(readers see the old table until then).",
    )


def read_changes(
    lake: LakeResource,
    spark: SparkSession,
    table: str,
    upstream: tuple[str, str],
    everything: bool = False,
) -> tuple[DataFrame, Markers, bool]:
    """The changes of ``upstream`` that ``silver.<table>`` has not consumed yet (all its rows
    when ``everything``), the marker to commit with them, and whether there are any (False: the
    table is up to date)."""
    app_id = consumer_app_id(table, upstream)
    consumed = lake.committed_version(SILVER, table, app_id)
    changes, version = lake.changes_since(spark, *upstream, None if everything else consumed)
    return changes, {app_id: version}, version != consumed or everything


@dataclass(frozen=True)
class ParsedTable:
    """A silver table parsed from one bronze source, with a quarantine table for rejects."""

    table: str
    source: str
    parse: Transform
    quarantine: Transform
    shape: Transform
    keys: tuple[str, ...]
    update_when: str | None = None
    # Recompute each changed key from all its valid source records (newest-wins with deletes).
    from_history: bool = False

    @property
    def quarantine_table(self) -> str:
        return f"{self.source}{QUARANTINE_SUFFIX}"


def _write_quarantine(
    lake: LakeResource, spec: ParsedTable, parsed: DataFrame, markers: Markers
) -> int:
    if lake.holds(SILVER, spec.quarantine_table, markers):
        return 0
    require_current(lake, SILVER, spec.quarantine_table)
    rejected = spec.quarantine(parsed).cache()
    count = rejected.count()
    if count or not lake.exists(SILVER, spec.quarantine_table):
        lake.append(SILVER, spec.quarantine_table, rejected, markers=markers)
    rejected.unpersist()
    return count


def _rows_to_merge(
    lake: LakeResource, spark: SparkSession, spec: ParsedTable, parsed: DataFrame
) -> DataFrame:
    accepted = valid(parsed)
    if spec.from_history:
        changed = accepted.select(*spec.keys).distinct()
        history = valid(spec.parse(lake.read(spark, BRONZE, spec.source)))
        accepted = history.join(changed, list(spec.keys), "left_semi")
    return dated(spec.table, spec.shape(accepted))


def _rebuild(lake: LakeResource, spec: ParsedTable, parsed: DataFrame, markers: Markers) -> int:
    """Replace both tables with what all of bronze (``parsed``) makes of them, a commit each;
    returns the rejects."""
    rejected = spec.quarantine(parsed).cache()
    lake.replace(SILVER, spec.quarantine_table, rejected, markers)
    count = rejected.count()
    rejected.unpersist()
    rows = dated(spec.table, spec.shape(valid(parsed)))
    if spec.from_history:  # the newest event of a deleted key is its delete: no row
        rows = rows.where(~F.col("deleted")).drop("deleted")
    lake.replace(SILVER, spec.table, rows, markers, layout(spec.table))
    return count


def _reconcile(
    lake: LakeResource, spark: SparkSession, spec: ParsedTable, parsed: DataFrame
) -> Outcome:
    """Whether each of the run's bronze records (``parsed``) is now in silver or quarantine."""
    accepted = _rows_to_merge(lake, spark, spec, parsed)
    if spec.from_history:  # a key whose newest event is its delete has no row
        accepted = accepted.where(~F.col("deleted"))
    return bronze_reconciliation(
        spec.table, accepted, lake.read(spark, SILVER, spec.table), spec.keys,
        spec.quarantine(parsed), spec.quarantine_table,
        lake.read(spark, SILVER, spec.quarantine_table),
    )  # fmt: skip


def parsed_table_asset(spec: ParsedTable) -> dg.AssetsDefinition:
    """The multi-asset writing ``silver.<table>`` and ``silver.<source>_quarantine``."""
    table_key = asset_key(SILVER, spec.table)
    quarantine_key = asset_key(SILVER, spec.quarantine_table)
    upstream = asset_key(BRONZE, spec.source)

    @dg.multi_asset(
        name=f"silver_{spec.table}",
        specs=[
            dg.AssetSpec(
                table_key,
                deps=[upstream],
                group_name=SILVER,
                kinds=SILVER_KINDS,
                automation_condition=silver_automation,
                description=spec.shape.__doc__,
            ),
            dg.AssetSpec(
                quarantine_key,
                deps=[upstream],
                group_name=SILVER,
                kinds=SILVER_KINDS,
                automation_condition=silver_automation,
                description=f"Rejected `{spec.source}` records: original bytes (`raw`) and their "
                "readable text (`raw_text`), reason, coordinates.",
            ),
        ],
        check_specs=[
            *table_check_specs(SILVER, spec.table),
            reconciliation_spec(table_key, RECONCILED_WITH_BRONZE),
            quarantine_rate_spec(quarantine_key),
        ],
    )
    def _asset(
        config: SilverConfig, spark: SparkResource, lake: LakeResource
    ) -> Iterator[dg.MaterializeResult]:
        session = spark.get_session()
        changes, markers, fresh = read_changes(
            lake, session, spec.table, (BRONZE, spec.source), config.full_refresh
        )
        parsed = spec.parse(changes).cache()
        read = parsed.count()
        if config.full_refresh:
            quarantined = _rebuild(lake, spec, parsed, markers)
        else:
            quarantined = _write_quarantine(lake, spec, parsed, markers)
        if not config.full_refresh and (fresh or not lake.exists(SILVER, spec.table)):
            rows = _rows_to_merge(lake, session, spec, parsed).toArrow()
            delete_flag = "deleted" if spec.from_history else None
            lake.merge(
                SILVER,
                spec.table,
                rows,
                spec.keys,
                markers=markers,
                update_when=spec.update_when,
                delete_flag=delete_flag,
                partition_by=layout(spec.table),
            )
        reconciled = _reconcile(lake, session, spec, parsed)
        parsed.unpersist()
        yield dg.MaterializeResult(
            asset_key=table_key,
            metadata={
                **lake.table_metadata(SILVER, spec.table),
                "upstream_version": _of(markers),
                **profile_after_write(lake, session, SILVER, spec.table),
            },
            check_results=[
                *check_results(lake, session, SILVER, spec.table),
                reconciliation_result(table_key, reconciled),
            ],
        )
        yield dg.MaterializeResult(
            asset_key=quarantine_key,
            metadata={
                **lake.table_metadata(SILVER, spec.quarantine_table),
                "new_rejects": quarantined,
                **profile_after_write(lake, session, SILVER, spec.quarantine_table),
            },
            check_results=[quarantine_rate_result(quarantine_key, quarantined, read)],
        )

    return _asset


def _of(markers: Markers) -> int:
    return next(iter(markers.values()))


PARSED_TABLES = (
    ParsedTable(USERS, LANDING_REGISTERED_USERS, transforms.parse_registered_users, csv_quarantine,
                transforms.users, ("user_id",),
                update_when="source.registration_timestamp >= target.registration_timestamp"),
    ParsedTable(GYM_LOGS, LANDING_GYM_LOGINS, transforms.parse_gym_logins, csv_quarantine,
                transforms.gym_logs, ("mac_address", "gym", "login"),
                update_when="source.logout > target.logout"),
    ParsedTable(USER_PROFILE, TOPIC_USER_INFO, transforms.parse_user_info, kafka_quarantine,
                transforms.latest_profiles, ("user_id",), from_history=True),
    ParsedTable(HEART_RATE, TOPIC_BPM, transforms.parse_bpm, kafka_quarantine,
                transforms.heart_rate, ("device_id", "time")),
    ParsedTable(WORKOUTS, TOPIC_WORKOUT, transforms.parse_workout, kafka_quarantine,
                transforms.workouts, ("user_id", "workout_id", "session_id", "action")),
)  # fmt: skip


@dg.asset(
    key=asset_key(SILVER, COMPLETED_WORKOUTS),
    deps=[asset_key(SILVER, WORKOUTS)],
    check_specs=table_check_specs(SILVER, COMPLETED_WORKOUTS),
    **SILVER_ASSET,
)
def completed_workouts(
    config: SilverConfig, spark: SparkResource, lake: LakeResource
) -> dg.MaterializeResult:
    """Each start paired with its stop within 3 hours; a start waits for its stop."""
    session = spark.get_session()
    changes, markers, fresh = read_changes(lake, session, COMPLETED_WORKOUTS, (SILVER, WORKOUTS))
    if config.full_refresh:
        paired = transforms.completed_workouts(lake.read(session, SILVER, WORKOUTS))
        lake.replace(
            SILVER, COMPLETED_WORKOUTS, dated(COMPLETED_WORKOUTS, paired), markers,
            layout(COMPLETED_WORKOUTS),
        )  # fmt: skip
    elif fresh or not lake.exists(SILVER, COMPLETED_WORKOUTS):
        # A start and its stop are at most 3 hours apart: on the same day or on adjacent days.
        actions = read_days(lake, session, WORKOUTS, days_of(changes, before=1, after=1))
        changed = changes.select(*transforms.WORKOUT_KEYS).distinct()
        paired = transforms.completed_workouts(
            actions.join(changed, transforms.WORKOUT_KEYS, "left_semi")
        )
        rows = dated(COMPLETED_WORKOUTS, paired).toArrow()
        lake.merge(
            SILVER, COMPLETED_WORKOUTS, rows, transforms.WORKOUT_KEYS, markers=markers,
            partition_by=layout(COMPLETED_WORKOUTS),
        )  # fmt: skip
    return dg.MaterializeResult(
        metadata={
            **lake.table_metadata(SILVER, COMPLETED_WORKOUTS),
            **profile_after_write(lake, session, SILVER, COMPLETED_WORKOUTS),
        },
        check_results=check_results(lake, session, SILVER, COMPLETED_WORKOUTS),
    )


@dg.asset(
    key=asset_key(SILVER, WORKOUT_BPM),
    deps=[asset_key(SILVER, t) for t in (COMPLETED_WORKOUTS, HEART_RATE, USERS)],
    check_specs=[
        *table_check_specs(SILVER, WORKOUT_BPM),
        reconciliation_spec(asset_key(SILVER, WORKOUT_BPM), READINGS_IN_WORKOUT_BPM),
    ],
    **SILVER_ASSET,
)
def workout_bpm(
    config: SilverConfig, spark: SparkResource, lake: LakeResource
) -> dg.MaterializeResult:
    """The valid readings of each completed workout; new workouts, late readings and newly
    registered devices each bring their rows (a user's new device replaces all of the user's)."""
    session = spark.get_session()
    new_workouts, workouts_marker, workouts_fresh = read_changes(
        lake, session, WORKOUT_BPM, (SILVER, COMPLETED_WORKOUTS)
    )
    new_readings, readings_marker, readings_fresh = read_changes(
        lake, session, WORKOUT_BPM, (SILVER, HEART_RATE)
    )
    # Of the users' changes only a new device matters (re-registering the same device does not).
    devices_app = consumer_app_id(WORKOUT_BPM, (SILVER, USERS))
    consumed = lake.committed_version(SILVER, WORKOUT_BPM, devices_app)
    new_devices, users_version = lake.new_values(
        session, SILVER, USERS, consumed, ["user_id", "device_id"]
    )
    fresh = workouts_fresh or readings_fresh or users_version != consumed
    if config.full_refresh:
        users = lake.read(session, SILVER, USERS)
        completed = lake.read(session, SILVER, COMPLETED_WORKOUTS)
        rows = transforms.workout_bpm(completed, lake.read(session, SILVER, HEART_RATE), users)
        markers = {**workouts_marker, **readings_marker, devices_app: users_version}
        lake.replace(
            SILVER, WORKOUT_BPM, dated(WORKOUT_BPM, rows), markers, layout(WORKOUT_BPM)
        )  # fmt: skip
    elif fresh or not lake.exists(SILVER, WORKOUT_BPM):
        users = lake.read(session, SILVER, USERS)
        # A workout lasts at most 3 hours: its readings are on its start day or the next one.
        their_readings = read_days(lake, session, HEART_RATE, days_of(new_workouts, after=1))
        rows = transforms.workout_bpm(new_workouts, their_readings, users)
        old_workouts = read_days(lake, session, COMPLETED_WORKOUTS, days_of(new_readings, before=1))
        rows = rows.unionByName(transforms.workout_bpm(old_workouts, new_readings, users))
        # Workouts (of any day) whose user now has another device, with that device's readings.
        all_workouts = lake.read(session, SILVER, COMPLETED_WORKOUTS)
        moved = all_workouts.join(new_devices.select("user_id"), "user_id", "left_semi")
        readings = read_days(lake, session, HEART_RATE, days_of(moved, after=1))
        rows = rows.unionByName(transforms.workout_bpm(moved, readings, new_devices)).distinct()
        markers = {**workouts_marker, **readings_marker, devices_app: users_version}
        keys = [*transforms.WORKOUT_KEYS, "time"]
        # The rows of a user who moved to another device are all recomputed: the old device's
        # readings leave the table. (On the first run every user is new: nothing to replace.)
        movers = [r.user_id for r in new_devices.select("user_id").distinct().collect()]
        lake.merge(
            SILVER, WORKOUT_BPM, dated(WORKOUT_BPM, rows).toArrow(), keys, markers=markers,
            partition_by=layout(WORKOUT_BPM),
            replace=("user_id", movers) if movers and consumed is not None else None,
        )  # fmt: skip
    expected = transforms.workout_bpm(
        lake.read(session, SILVER, COMPLETED_WORKOUTS),
        lake.read(session, SILVER, HEART_RATE),
        lake.read(session, SILVER, USERS),
    )
    reconciled = workout_bpm_reconciliation(
        expected, lake.read(session, SILVER, WORKOUT_BPM), [*transforms.WORKOUT_KEYS, "time"]
    )
    return dg.MaterializeResult(
        metadata={
            **lake.table_metadata(SILVER, WORKOUT_BPM),
            **profile_after_write(lake, session, SILVER, WORKOUT_BPM),
        },
        check_results=[
            *check_results(lake, session, SILVER, WORKOUT_BPM),
            reconciliation_result(asset_key(SILVER, WORKOUT_BPM), reconciled),
        ],
    )


@dg.asset(
    key=asset_key(SILVER, USER_BINS),
    deps=[asset_key(SILVER, USER_PROFILE)],
    check_specs=table_check_specs(SILVER, USER_BINS),
    **SILVER_ASSET,
)
def user_bins(
    config: SilverConfig, spark: SparkResource, lake: LakeResource, calendar: CalendarResource
) -> dg.MaterializeResult:
    """Age bin (at the as-of date), gender, city and state per user; recomputed whole, since the
    bins move with the as-of date even when no profile changes."""
    session = spark.get_session()
    as_of = calendar.today()
    app_id = f"{consumer_app_id(USER_BINS, (SILVER, USER_PROFILE))}@{as_of.isoformat()}"
    markers = {app_id: lake.version(SILVER, USER_PROFILE) or 0}
    if config.full_refresh or not lake.holds(SILVER, USER_BINS, markers):
        profiles = lake.read(session, SILVER, USER_PROFILE)
        rows = transforms.user_bins(profiles, F.lit(as_of))
        lake.replace(SILVER, USER_BINS, rows, markers)
    return dg.MaterializeResult(
        metadata={
            **lake.table_metadata(SILVER, USER_BINS),
            "as_of_date": as_of.isoformat(),
            **profile_after_write(lake, session, SILVER, USER_BINS),
        },
        check_results=check_results(lake, session, SILVER, USER_BINS),
    )


silver_assets = [
    *[parsed_table_asset(spec) for spec in PARSED_TABLES],
    completed_workouts,
    workout_bpm,
    user_bins,
]
