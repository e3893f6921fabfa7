"""The nightly maintenance jobs: every existing table of the layer, observed before and after."""

from __future__ import annotations

from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE, SILVER
from lakehouse_assets.definitions import defs
from lakehouse_assets.fitness.names import TOPIC_BPM, TOPIC_WORKOUT


def test_bronze_maintenance_compacts_each_table_and_records_it(
    env: dict[str, Any], spark: SparkSession
) -> None:
    lake = env["lake"]
    for batch in range(4):  # bpm: 4 small files; workout: none (not created yet)
        rows = spark.createDataFrame([(batch,)], "n long")
        rows.write.format("delta").mode("append").save(lake.spark_path(BRONZE, TOPIC_BPM))
    result = defs.get_job_def("maintain_bronze").execute_in_process(resources=env)
    observations = [
        event.asset_observation_data.asset_observation
        for event in result.all_events
        if event.event_type == dg.DagsterEventType.ASSET_OBSERVATION
    ]
    assert [o.asset_key for o in observations] == [dg.AssetKey([BRONZE, TOPIC_BPM])]
    metadata = observations[0].metadata
    assert (metadata["files_before"].value, metadata["files_after"].value) == (4, 1)
    assert metadata["files_vacuumed"].value == 0  # the 4 files are younger than 7 days
    assert not lake.exists(BRONZE, TOPIC_WORKOUT)
    rows = spark.read.format("delta").load(lake.spark_path(BRONZE, TOPIC_BPM)).collect()
    assert sorted(row.n for row in rows) == [0, 1, 2, 3]


def test_silver_maintenance_compacts_a_quarantines_replay_log_with_it(
    env: dict[str, Any], spark: SparkSession
) -> None:
    lake = env["lake"]
    quarantine = f"{TOPIC_BPM}_quarantine"
    for table, files in ((quarantine, 2), (f"{quarantine}_replays", 3)):
        for n in range(files):
            rows = spark.createDataFrame([(n,)], "n long")
            rows.write.format("delta").mode("append").save(lake.spark_path(SILVER, table))
    result = defs.get_job_def("maintain_silver").execute_in_process(resources=env)
    observed = [
        (event.asset_key, event.asset_observation_data.asset_observation.metadata)
        for event in result.all_events
        if event.event_type == dg.DagsterEventType.ASSET_OBSERVATION
    ]
    assert [
        (key, m["table"].value, m["files_before"].value, m["files_after"].value)
        for key, m in observed
    ] == [
        (dg.AssetKey([SILVER, quarantine]), f"silver.{quarantine}", 2, 1),
        (dg.AssetKey([SILVER, quarantine]), f"silver.{quarantine}_replays", 3, 1),
    ]


def test_every_maintenance_schedule_names_its_timezone() -> None:
    schedules = [s for s in defs.schedules or [] if isinstance(s, dg.ScheduleDefinition)]
    assert {s.job_name for s in schedules} == {
        "maintain_bronze",
        "maintain_silver",
        "maintain_gold",
        "profile_tables",
    }
    assert all(s.execution_timezone == "UTC" for s in schedules)
