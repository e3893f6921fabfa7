"""The nightly maintenance jobs: every existing table of the layer, observed before and after."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow as pa
from deltalake import write_deltalake

from lakehouse_assets.constants import BRONZE, TOPIC_BPM, TOPIC_WORKOUT
from lakehouse_assets.definitions import defs
from lakehouse_assets.schedules.maintenance import maintenance_jobs
from resources import LakeResource


def test_bronze_maintenance_compacts_each_table_and_records_it(tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path))
    for batch in range(4):  # bpm: 4 small files; workout: none (not created yet)
        write_deltalake(lake.table_uri(BRONZE, TOPIC_BPM), pa.table({"n": [batch]}), mode="append")
    result = maintenance_jobs[BRONZE].execute_in_process(resources={"lake": lake})
    observations = [
        event.asset_observation_data.asset_observation
        for event in result.all_events
        if event.event_type == dg.DagsterEventType.ASSET_OBSERVATION
    ]
    assert [o.asset_key for o in observations] == [dg.AssetKey([BRONZE, TOPIC_BPM])]
    metadata = observations[0].metadata
    assert (metadata["files_before"].value, metadata["files_after"].value) == (4, 1)
    assert not lake.exists(BRONZE, TOPIC_WORKOUT)
    assert sorted(lake.table(BRONZE, TOPIC_BPM).to_pyarrow_table()["n"].to_pylist()) == [0, 1, 2, 3]


def test_every_maintenance_schedule_names_its_timezone() -> None:
    schedules = [s for s in defs.schedules or [] if isinstance(s, dg.ScheduleDefinition)]
    assert {s.job_name for s in schedules} == {
        "maintain_bronze",
        "maintain_silver",
        "maintain_gold",
        "profile_tables",
    }
    assert all(s.execution_timezone == "UTC" for s in schedules)
