"""Gold assets: daily reports. Materializing a day (or a range, in one run) recomputes exactly
those days from silver and replaces their partitions, so a re-run changes nothing."""

import warnings
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.automation import gold_automation
from lakehouse_assets.checks.results import (
    check_results,
    check_specs,
    checked_days,
    not_empty_result,
    not_empty_spec,
    require_upstream_checks_passed,
    written_rows,
)
from lakehouse_assets.constants import DATE, GOLD, SILVER, asset_key, asset_tags, writer_pool
from lakehouse_assets.fitness.gold import transforms
from lakehouse_assets.fitness.gold.columns import DESCRIPTIONS, LINEAGE
from lakehouse_assets.fitness.gold.rules import RULES
from lakehouse_assets.fitness.gold.transforms import GOLD_PARTITION
from lakehouse_assets.fitness.names import (
    COMPLETED_WORKOUTS,
    FITNESS,
    FITNESS_OWNERS,
    GYM_LOGS,
    GYM_SUMMARY,
    USER_BINS,
    USERS,
    WORKOUT_BPM,
    WORKOUT_BPM_SUMMARY,
)
from lakehouse_assets.partitions import daily_partitions
from lakehouse_assets.profiling.store import profile_after_write
from lakehouse_assets.table_metadata import code_references, table_metadata
from resources import LakeResource, SparkResource
from resources.codegen import fit_code_generation
from resources.spark import cached

GOLD_KINDS = {"spark", "delta"}
# A single-run backfill policy is how Dagster runs a range of days as one run; the parameter is
# marked beta and warned about at every definition in every process that loads the code (24
# times in `dagster dev`'s console). Known and chosen: not repeated.
warnings.filterwarnings(
    "ignore", message="Parameter `backfill_policy` of function `asset`", category=dg.BetaWarning
)


def _days(context: dg.AssetExecutionContext) -> tuple[date, date]:
    """The first and last day of the partitions this run materializes."""
    window = context.partition_time_window
    return window.start.date(), window.end.date() - timedelta(days=1)


def _silver_days(
    lake: LakeResource, spark: SparkSession, table: str, first: date, last: date
) -> DataFrame:
    """The rows of ``silver.<table>`` dated ``first..last``, read from those partitions only."""
    days = [(DATE, ">=", first.isoformat()), (DATE, "<=", last.isoformat())]
    return lake.read(spark, SILVER, table, partitions=days)


def _fit_to_days(
    lake: LakeResource, spark: SparkSession, table: str, first: date, last: date
) -> None:
    """Fit the session's code generation to the rows of ``silver.<table>`` dated
    ``first..last`` (from the log), the bulk of what the step reads."""
    per_day = lake.partition_row_counts(SILVER, table, DATE)
    rows = sum(n for day, n in per_day.items() if first.isoformat() <= day <= last.isoformat())
    fit_code_generation(spark, rows)


def _replace_days(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    spark: SparkSession,
    table: str,
    rows: DataFrame,
    first: date,
    last: date,
) -> dg.MaterializeResult:
    """Replace the partitions ``first..last`` of ``gold.<table>`` with ``rows``, and check it.

    Each day's materialization carries that day's row count."""
    days = [(GOLD_PARTITION, ">=", first.isoformat()), (GOLD_PARTITION, "<=", last.isoformat())]
    key = asset_key(GOLD, table)
    rows = rows.localCheckpoint()  # written, counted and checked without reading silver again
    created = not lake.exists(GOLD, table)
    lake.replace_partitions(GOLD, table, rows, days, partition_by=[GOLD_PARTITION])
    per_day = lake.partition_row_counts(GOLD, table, GOLD_PARTITION)
    for day in context.partition_keys:
        context.add_asset_metadata(
            {"dagster/partition_row_count": per_day.get(day, 0)}, partition_key=day
        )
    # The rows of the days replaced, where the key fixes the day (``checks.rules``).
    batch = written_rows(context, key, rows, created)
    return dg.MaterializeResult(
        metadata={
            **table_metadata(lake, GOLD, table, DESCRIPTIONS[table], lineage=LINEAGE[table]),
            "days": f"{first.isoformat()}..{last.isoformat()}",
            **profile_after_write(lake, spark, GOLD, table),
        },
        check_results=[
            *check_results(
                lake,
                spark,
                GOLD,
                table,
                RULES[table],
                written=checked_days(context, key, days),
                batch=batch,
            ),
            not_empty_result(lake, key, context.assets_def.asset_deps[key]),
        ],
    )


def _gold_asset(table: str, transform: Callable[..., DataFrame]) -> dict[str, Any]:
    """What both gold assets declare: daily partitions run as ranges, checks, owners, tags."""
    key = asset_key(GOLD, table)
    return {
        "key": key,
        "pool": writer_pool(GOLD, table),
        "partitions_def": daily_partitions,
        "backfill_policy": dg.BackfillPolicy.single_run(),
        "group_name": GOLD,
        "kinds": GOLD_KINDS,
        "automation_condition": gold_automation,
        "check_specs": [*check_specs(key, RULES[table]), not_empty_spec(key)],
        "owners": FITNESS_OWNERS,
        "tags": asset_tags(GOLD, FITNESS),
        "metadata": code_references(transform=transform),
    }


@dg.asset(
    deps=[asset_key(SILVER, WORKOUT_BPM), asset_key(SILVER, USER_BINS)],
    **_gold_asset(WORKOUT_BPM_SUMMARY, transforms.workout_bpm_summary),
)
def workout_bpm_summary(
    context: dg.AssetExecutionContext, spark: SparkResource, lake: LakeResource
) -> dg.MaterializeResult:
    """Per completed workout with a valid reading: user, day, bpm min/avg/max, profile bins."""
    require_upstream_checks_passed(context)
    session = spark.get_session()
    first, last = _days(context)
    _fit_to_days(lake, session, WORKOUT_BPM, first, last)
    readings = _silver_days(lake, session, WORKOUT_BPM, first, last)
    bins = lake.read(session, SILVER, USER_BINS)
    rows = transforms.workout_bpm_summary(readings, bins)
    return _replace_days(context, lake, session, WORKOUT_BPM_SUMMARY, rows, first, last)


@dg.asset(
    deps=[asset_key(SILVER, t) for t in (GYM_LOGS, COMPLETED_WORKOUTS, USERS)],
    **_gold_asset(GYM_SUMMARY, transforms.gym_summary),
)
def gym_summary(
    context: dg.AssetExecutionContext, spark: SparkResource, lake: LakeResource
) -> dg.MaterializeResult:
    """Per gym, mac address and day: minutes in the gym and minutes exercising there."""
    require_upstream_checks_passed(context)
    session = spark.get_session()
    first, last = _days(context)
    _fit_to_days(lake, session, GYM_LOGS, first, last)
    with cached(_silver_days(lake, session, GYM_LOGS, first, last)) as visits:
        # Workouts count on the day of the visit they start in, which may end on a later day.
        last_logout = visits.select(F.max(F.to_date("logout"))).first()
        until = max(last, last_logout[0] if last_logout and last_logout[0] else last)
        completed = _silver_days(lake, session, COMPLETED_WORKOUTS, first, until)
        users = lake.read(session, SILVER, USERS)
        rows = transforms.gym_summary(visits, completed, users)
        return _replace_days(context, lake, session, GYM_SUMMARY, rows, first, last)


gold_assets = [workout_bpm_summary, gym_summary]
