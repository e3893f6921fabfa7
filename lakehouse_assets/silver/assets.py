"""Silver assets: the tables parsed from bronze (``parsed``) and the tables derived from other
silver tables, each run reading only the upstream changes since its last (``incremental``)."""

import dagster as dg
from pyspark.sql import functions as F

from lakehouse_assets.checks.reconciliation import (
    READINGS_IN_WORKOUT_BPM,
    workout_bpm_reconciliation,
)
from lakehouse_assets.checks.results import (
    check_results,
    not_empty_result,
    not_empty_spec,
    reconciliation_result,
    reconciliation_spec,
    table_check_specs,
)
from lakehouse_assets.constants import (
    COMPLETED_WORKOUTS,
    HEART_RATE,
    SILVER,
    USER_BINS,
    USER_PROFILE,
    USERS,
    WORKOUT_BPM,
    WORKOUTS,
    asset_key,
    consumer_app_id,
)
from lakehouse_assets.profiling.store import profile_after_write
from lakehouse_assets.silver import transforms
from lakehouse_assets.silver.incremental import SILVER_ASSET, SilverConfig, read_changes
from lakehouse_assets.silver.layout import dated, days_of, layout, read_days
from lakehouse_assets.silver.parsed import PARSED_TABLES, parsed_table_asset
from lakehouse_assets.table_metadata import code_references, table_metadata
from resources import CalendarResource, LakeResource, SparkResource

WORKOUT_BPM_UPSTREAM = [asset_key(SILVER, t) for t in (COMPLETED_WORKOUTS, HEART_RATE, USERS)]


@dg.asset(
    key=asset_key(SILVER, COMPLETED_WORKOUTS),
    deps=[asset_key(SILVER, WORKOUTS)],
    check_specs=[
        *table_check_specs(SILVER, COMPLETED_WORKOUTS),
        not_empty_spec(asset_key(SILVER, COMPLETED_WORKOUTS)),
    ],
    metadata=code_references(transform=transforms.completed_workouts),
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
        rows = dated(COMPLETED_WORKOUTS, paired).localCheckpoint()
        lake.merge(
            SILVER, COMPLETED_WORKOUTS, rows, transforms.WORKOUT_KEYS, markers=markers,
            partition_by=layout(COMPLETED_WORKOUTS),
        )  # fmt: skip
    return dg.MaterializeResult(
        metadata={
            **table_metadata(lake, SILVER, COMPLETED_WORKOUTS),
            **profile_after_write(lake, session, SILVER, COMPLETED_WORKOUTS),
        },
        check_results=[
            *check_results(lake, session, SILVER, COMPLETED_WORKOUTS),
            not_empty_result(
                lake, asset_key(SILVER, COMPLETED_WORKOUTS), [asset_key(SILVER, WORKOUTS)]
            ),
        ],
    )


@dg.asset(
    key=asset_key(SILVER, WORKOUT_BPM),
    deps=WORKOUT_BPM_UPSTREAM,
    check_specs=[
        *table_check_specs(SILVER, WORKOUT_BPM),
        reconciliation_spec(asset_key(SILVER, WORKOUT_BPM), READINGS_IN_WORKOUT_BPM),
        not_empty_spec(asset_key(SILVER, WORKOUT_BPM)),
    ],
    metadata=code_references(transform=transforms.workout_bpm),
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
            SILVER, WORKOUT_BPM, dated(WORKOUT_BPM, rows).localCheckpoint(), keys, markers=markers,
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
            **table_metadata(lake, SILVER, WORKOUT_BPM),
            **profile_after_write(lake, session, SILVER, WORKOUT_BPM),
        },
        check_results=[
            *check_results(lake, session, SILVER, WORKOUT_BPM),
            reconciliation_result(asset_key(SILVER, WORKOUT_BPM), reconciled),
            not_empty_result(lake, asset_key(SILVER, WORKOUT_BPM), WORKOUT_BPM_UPSTREAM),
        ],
    )


@dg.asset(
    key=asset_key(SILVER, USER_BINS),
    deps=[asset_key(SILVER, USER_PROFILE)],
    check_specs=[
        *table_check_specs(SILVER, USER_BINS),
        not_empty_spec(asset_key(SILVER, USER_BINS)),
    ],
    metadata=code_references(transform=transforms.user_bins),
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
            **table_metadata(lake, SILVER, USER_BINS),
            "as_of_date": as_of.isoformat(),
            **profile_after_write(lake, session, SILVER, USER_BINS),
        },
        check_results=[
            *check_results(lake, session, SILVER, USER_BINS),
            not_empty_result(lake, asset_key(SILVER, USER_BINS), [asset_key(SILVER, USER_PROFILE)]),
        ],
    )


silver_assets = [
    *[parsed_table_asset(spec) for spec in PARSED_TABLES],
    completed_workouts,
    workout_bpm,
    user_bins,
]
