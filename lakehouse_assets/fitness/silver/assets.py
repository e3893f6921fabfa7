"""Silver assets: the tables parsed from bronze (``parsed``) and the tables derived from other
silver tables, each run reading only the upstream changes since its last
(``refinement.changes``)."""

import dagster as dg
from pyspark.sql import functions as F

from lakehouse_assets.checks.results import require_upstream_checks_passed, written_rows
from lakehouse_assets.constants import SILVER, asset_key, consumer_app_id
from lakehouse_assets.fitness.names import (
    COMPLETED_WORKOUTS,
    DATED_BY,
    USER_BINS,
    USER_PROFILE,
    WORKOUTS,
)
from lakehouse_assets.fitness.silver import transforms
from lakehouse_assets.fitness.silver.parsed import PARSED_TABLES
from lakehouse_assets.fitness.silver.tables import derived_asset, derived_result
from lakehouse_assets.fitness.silver.workout_bpm import workout_bpm
from lakehouse_assets.refinement.changes import SilverConfig, read_changes
from lakehouse_assets.refinement.layout import dated, days_of, layout, read_days
from lakehouse_assets.refinement.parsed import parsed_table_asset
from resources import CalendarResource, LakeResource, SparkResource
from resources.codegen import fit_code_generation


@dg.asset(**derived_asset(COMPLETED_WORKOUTS, [WORKOUTS], transforms.completed_workouts))
def completed_workouts(
    context: dg.AssetExecutionContext,
    config: SilverConfig,
    spark: SparkResource,
    lake: LakeResource,
) -> dg.MaterializeResult:
    """Each start paired with its stop within 3 hours; a start waits for its stop."""
    require_upstream_checks_passed(context)
    session = spark.get_session()
    new = read_changes(lake, session, COMPLETED_WORKOUTS, (SILVER, WORKOUTS))
    changes, markers = new.rows, new.markers
    key, batch = asset_key(SILVER, COMPLETED_WORKOUTS), None
    if config.full_refresh:
        paired = transforms.completed_workouts(lake.read(session, SILVER, WORKOUTS))
        lake.replace(
            SILVER, COMPLETED_WORKOUTS, dated(paired, DATED_BY[COMPLETED_WORKOUTS]), markers,
            layout(DATED_BY[COMPLETED_WORKOUTS]),
        )  # fmt: skip
    elif new.fresh or not lake.exists(SILVER, COMPLETED_WORKOUTS):
        # A start and its stop are at most 3 hours apart: on the same day or on adjacent days.
        actions = read_days(lake, session, WORKOUTS, days_of(changes, before=1, after=1))
        changed = changes.select(*transforms.WORKOUT_KEYS).distinct()
        paired = transforms.completed_workouts(
            actions.join(changed, transforms.WORKOUT_KEYS, "left_semi")
        )
        rows = dated(paired, DATED_BY[COMPLETED_WORKOUTS]).localCheckpoint()
        created = not lake.exists(SILVER, COMPLETED_WORKOUTS)
        lake.merge(
            SILVER, COMPLETED_WORKOUTS, rows, transforms.WORKOUT_KEYS, markers=markers,
            partition_by=layout(DATED_BY[COMPLETED_WORKOUTS]),
        )  # fmt: skip
        batch = written_rows(context, key, rows, created)  # merged by the rules' key
    return derived_result(lake, session, COMPLETED_WORKOUTS, [WORKOUTS], batch)


@dg.asset(**derived_asset(USER_BINS, [USER_PROFILE], transforms.user_bins))
def user_bins(
    context: dg.AssetExecutionContext,
    config: SilverConfig,
    spark: SparkResource,
    lake: LakeResource,
    calendar: CalendarResource,
) -> dg.MaterializeResult:
    """Age bin (at the as-of date), gender, city and state per user; recomputed whole, since the
    bins move with the as-of date even when no profile changes."""
    require_upstream_checks_passed(context)
    session = spark.get_session()
    as_of = calendar.today()
    app_id = f"{consumer_app_id(USER_BINS, (SILVER, USER_PROFILE))}@{as_of.isoformat()}"
    markers = {app_id: lake.version(SILVER, USER_PROFILE) or 0}
    batch = None
    if config.full_refresh or not lake.holds(SILVER, USER_BINS, markers):
        fit_code_generation(session, lake.row_count(SILVER, USER_PROFILE))
        profiles = lake.read(session, SILVER, USER_PROFILE)
        rows = transforms.user_bins(profiles, F.lit(as_of)).localCheckpoint()
        lake.replace(SILVER, USER_BINS, rows, markers)
        batch = rows  # the whole table
    return derived_result(
        lake, session, USER_BINS, [USER_PROFILE], batch, as_of_date=as_of.isoformat()
    )


silver_assets = [
    *[parsed_table_asset(spec) for spec in PARSED_TABLES],
    completed_workouts,
    workout_bpm,
    user_bins,
]
