"""A backfill of a range of gold days in one run gives the same tables as one run per day."""

from __future__ import annotations

import shutil
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets import sample_data
from lakehouse_assets.constants import BRONZE, GOLD, GYM_SUMMARY, SILVER, WORKOUT_BPM_SUMMARY
from lakehouse_assets.definitions import all_assets
from lakehouse_assets.devtools.broker import EmbeddedBroker
from resources import CalendarResource

FIRST = date(2026, 11, 1)
DAYS = [FIRST + timedelta(days=n) for n in range(3)]


def gold_rows(spark: SparkSession, resources: dict[str, Any]) -> dict[str, list[tuple]]:
    return {
        table: sorted(tuple(row) for row in resources["lake"].read(spark, GOLD, table).collect())
        for table in (WORKOUT_BPM_SUMMARY, GYM_SUMMARY)
    }


def test_range_backfill_equals_day_by_day(
    broker: EmbeddedBroker, resources: dict[str, Any], lake_root: Path, spark: SparkSession
) -> None:
    resources["calendar"] = CalendarResource(as_of_date="2026-11-21")
    sample = sample_data.generate(users=3, days=len(DAYS), first_day=FIRST, seed=21)
    sample_data.write_landing(lake_root, sample.files)
    sample_data.produce(broker.bootstrap_servers, sample.messages)
    run = dg.materialize
    run(all_assets, resources=resources, selection=dg.AssetSelection.groups(BRONZE, SILVER))
    gold = dg.AssetSelection.groups(GOLD)

    tags = {"dagster/asset_partition_range_start": DAYS[0].isoformat(),
            "dagster/asset_partition_range_end": DAYS[-1].isoformat()}  # fmt: skip
    run(all_assets, resources=resources, selection=gold, tags=tags)
    in_one_run = gold_rows(spark, resources)

    shutil.rmtree(lake_root / GOLD)  # rebuild gold from nothing, one day per run
    for day in DAYS:
        run(all_assets, resources=resources, selection=gold, partition_key=day.isoformat())
    assert gold_rows(spark, resources) == in_one_run
    assert all(len(rows) > 0 for rows in in_one_run.values())
    days = {row[1] for row in in_one_run[WORKOUT_BPM_SUMMARY]}
    assert days <= set(DAYS) and len(days) >= 2
