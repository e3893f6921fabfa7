"""Helpers for the bronze tests: run the bpm stream, read back what bronze holds."""

from __future__ import annotations

import json
from typing import Any

import dagster as dg
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE, SILVER, asset_key
from lakehouse_assets.fitness.names import HEART_RATE, TOPIC_BPM
from lakehouse_assets.fitness.pipeline import bronze_kafka_assets
from lakehouse_assets.fitness.silver.assets import silver_assets

BPM_ASSET = next(a for a in bronze_kafka_assets if a.key == asset_key(BRONZE, TOPIC_BPM))
HEART_RATE_ASSET = next(a for a in silver_assets if asset_key(SILVER, HEART_RATE) in a.keys)


def heart_rates(first: int, count: int) -> list[dict[str, Any]]:
    """``count`` readings numbered ``seq = first, first + 1, ...`` (the number identifies each)."""
    return [
        {"device_id": seq % 13, "time": 1_700_000_000 + seq, "heartrate": 70.5, "seq": seq}
        for seq in range(first, first + count)
    ]


def materialize_bpm(
    resources: dict[str, Any], raise_on_error: bool = True
) -> dg.ExecuteInProcessResult:
    return dg.materialize([BPM_ASSET], resources=resources, raise_on_error=raise_on_error)


def bronze_sequence_numbers(spark: SparkSession, resources: dict[str, Any]) -> list[int]:
    """The ``seq`` of every row in bronze.bpm, sorted, duplicates kept."""
    rows = resources["lake"].read(spark, BRONZE, TOPIC_BPM).select("value").collect()
    return sorted(json.loads(row.value)["seq"] for row in rows)


def delta_rs_sequence_numbers(table: DeltaTable) -> list[int]:
    """The ``seq`` of every row of a bronze.bpm snapshot read by delta-rs, sorted, duplicates
    kept: a reader independent of the Spark that wrote it."""
    values = table.to_pyarrow_table(columns=["value"]).column("value").to_pylist()
    return sorted(json.loads(value)["seq"] for value in values)
