"""The nightly profiles: bronze when the others are profiled after each write, every table in
``schedule`` mode, none when off; each recorded as an observation of its asset."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE, SILVER
from lakehouse_assets.definitions import defs
from lakehouse_assets.schedules.profiles import profile_job
from lakehouse_assets_tests.conftest import observations
from lakehouse_assets_tests.profiling.test_transforms import table
from resources import LakeResource
from resources.settings import ENV_PROFILE

TABLES = {BRONZE: ["events", "missing"], SILVER: ["facts"]}


def profiled(env: dict[str, Any], mode: str) -> dict[dg.AssetKey, dg.AssetObservation]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_PROFILE, mode)
        result = profile_job(TABLES).execute_in_process(
            resources={"spark": env["spark"], "lake": env["lake"]}
        )
    return observations(result)


def test_the_schedule_profiles_what_the_writes_do_not(
    env: dict[str, Any], spark: SparkSession
) -> None:
    lake: LakeResource = env["lake"]
    lake.append(BRONZE, "events", table(spark))
    lake.append(SILVER, "facts", table(spark))
    events, facts = dg.AssetKey([BRONZE, "events"]), dg.AssetKey([SILVER, "facts"])

    observed = profiled(env, "materialization")  # silver is profiled after its writes
    assert list(observed) == [events]  # bronze's missing table is skipped
    summary = observed[events].metadata["profile_summary"].value
    assert "10 rows, 7 columns." in summary
    assert lake.read(spark, "profiles", "bronze__events").count() == 7  # a row per column

    assert list(profiled(env, "schedule")) == [events, facts]
    assert profiled(env, "off") == {}


def test_the_profile_schedule_runs_nightly_by_default() -> None:
    schedules = [s for s in defs.schedules or [] if isinstance(s, dg.ScheduleDefinition)]
    [schedule] = [s for s in schedules if s.job_name == "profile_tables"]
    assert (schedule.cron_schedule, schedule.execution_timezone) == ("30 3 * * *", "UTC")
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
