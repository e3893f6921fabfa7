"""Nightly profiles: each table's profile recorded as an observation of its asset (the same
metadata as a profile after a write) and appended to its profiles table.

Which tables, by ``LAKEHOUSE_PROFILE``: ``schedule`` (the default) takes every table here and none
after writes; ``materialization`` profiles silver and gold after each write, so the schedule
takes bronze, which its streams write every few seconds; ``off``, none.
"""

from collections.abc import Mapping, Sequence

import dagster as dg

from lakehouse_assets.constants import BRONZE, GOLD, SILVER, asset_key
from lakehouse_assets.profiling.report import profile_metadata
from lakehouse_assets.profiling.store import take_profile
from resources import LakeResource, SparkResource
from resources.settings import profile_mode

SCHEDULED_LAYERS = {"materialization": (BRONZE,), "schedule": (BRONZE, SILVER, GOLD), "off": ()}


def profile_job(tables: Mapping[str, Sequence[str]]) -> dg.JobDefinition:
    """The job profiling every existing table of ``tables`` (layer -> tables) that the
    profile mode leaves to the schedule."""

    @dg.op(name="profile_each_table")
    def profile_tables(
        context: dg.OpExecutionContext, spark: SparkResource, lake: LakeResource
    ) -> None:
        session = spark.get_session()
        for layer in SCHEDULED_LAYERS[profile_mode()]:
            for table in tables.get(layer, ()):
                if not lake.exists(layer, table):
                    continue
                taken = take_profile(lake, session, layer, table)
                metadata = profile_metadata(taken)
                context.log_event(dg.AssetObservation(asset_key(layer, table), metadata=metadata))

    @dg.job(name="profile_tables", tags={"lakehouse/profiles": "scheduled"})
    def _job() -> None:
        profile_tables()

    return _job


def profile_schedule(job: dg.JobDefinition) -> dg.ScheduleDefinition:
    """Every night at 03:30 UTC, after the maintenance of the three layers; on by default."""
    return dg.ScheduleDefinition(
        job=job,
        cron_schedule="30 3 * * *",
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
