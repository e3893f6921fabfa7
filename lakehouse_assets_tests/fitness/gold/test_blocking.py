"""A manual run (or backfill) of gold refuses to compute from a table whose blocking check
failed, as the automation does; it runs again once the table is written anew and passes."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pyarrow as pa
from pyspark.sql import SparkSession

from lakehouse_assets.constants import GOLD, SILVER, asset_key
from lakehouse_assets.definitions import all_assets
from lakehouse_assets.fitness.names import USER_BINS, WORKOUT_BPM, WORKOUT_BPM_SUMMARY
from lakehouse_assets_tests.fitness.silver.test_workout_bpm import (
    JAN_1,
    JAN_2,
    at,
    complete,
    read,
    register,
)
from resources import LakeResource

GOLD_KEY = asset_key(GOLD, WORKOUT_BPM_SUMMARY)


def run(instance: dg.DagsterInstance, env: dict[str, Any], key: dg.AssetKey, **kwargs: Any) -> Any:
    return dg.materialize(
        all_assets, selection=[key], instance=instance, resources=env, raise_on_error=False,
        **kwargs,
    )  # fmt: skip


def test_a_gold_day_waits_for_its_upstream_checks(env: dict[str, Any], spark: SparkSession) -> None:
    lake: LakeResource = env["lake"]
    register(lake, 1001, at(JAN_1, "08:00"))
    complete(lake, 1, at(JAN_1, "23:00"), at(JAN_2, "01:00"))
    read(lake, [(1001, at(JAN_1, "23:30"), 90.0), (1001, at(JAN_1, "23:40"), 300.0)])
    bins = {"user_id": [1], "age": ["25-35"], "gender": ["F"], "city": ["X"], "state": ["Y"]}
    lake.replace(SILVER, USER_BINS, spark.createDataFrame(pa.table(bins).to_pandas()), {})
    with dg.instance_for_test() as instance:
        silver = run(instance, env, asset_key(SILVER, WORKOUT_BPM))
        [plausible] = [e for e in silver.get_asset_check_evaluations()
                       if e.check_name == "heartrate_plausible"]  # fmt: skip
        assert not plausible.passed  # 300 bpm

        refused = run(instance, env, GOLD_KEY, partition_key="2026-01-01")
        assert not refused.success
        [failure] = refused.get_step_failure_events()
        described = failure.step_failure_data.user_failure_data.description
        assert "silver/workout_bpm:heartrate_plausible" in described
        assert not lake.exists(GOLD, WORKOUT_BPM_SUMMARY)  # nothing was computed

        # The reading corrected, workout_bpm rebuilt: its checks pass, and gold runs.
        read(lake, [(1001, at(JAN_1, "23:40"), 100.0)])
        config = {"ops": {"silver__workout_bpm": {"config": {"full_refresh": True}}}}
        assert run(instance, env, asset_key(SILVER, WORKOUT_BPM), run_config=config).success
        assert run(instance, env, GOLD_KEY, partition_key="2026-01-01").success
        [row] = lake.read(spark, GOLD, WORKOUT_BPM_SUMMARY).collect()
        assert (row.min_bpm, row.avg_bpm, row.max_bpm) == (90.0, 95.0, 100.0)
