"""The landing-zone bronze assets: every file's rows exactly once, with file name and load time."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.bronze.assets import bronze_landing_assets
from lakehouse_assets.constants import BRONZE, LANDING_DIR, LANDING_GYM_LOGINS, asset_key

GYM_ASSET = next(a for a in bronze_landing_assets if a.key == asset_key(BRONZE, LANDING_GYM_LOGINS))


def drop_file(lake_root: Path, name: str, text: str) -> None:
    """Write a landing file the way producers should: under a hidden name, then rename."""
    folder = lake_root / LANDING_DIR / LANDING_GYM_LOGINS
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f".{name}").write_text(text)
    os.replace(folder / f".{name}", folder / name)


def gym_rows(spark: SparkSession, resources: dict[str, Any]) -> list[tuple[str, ...]]:
    table = resources["lake"].read(spark, BRONZE, LANDING_GYM_LOGINS)
    rows = table.select("mac_address", "gym", "login", "logout", "source_file").collect()
    return sorted((r[0], r[1], r[2], r[3], Path(r[4]).name) for r in rows)


def test_each_file_lands_once_with_its_name(
    resources: dict[str, Any], lake_root: Path, spark: SparkSession
) -> None:
    dg.materialize([GYM_ASSET], resources=resources)  # empty folder: empty table
    assert gym_rows(spark, resources) == []

    header = "mac_address,gym,login,logout\n"
    drop_file(lake_root, "a.csv", header + "m1,5,100,200\nm2,5,100,not-a-number\n")
    dg.materialize([GYM_ASSET], resources=resources)
    drop_file(lake_root, "b.csv", header + "m1,5,100,260\n")
    (lake_root / LANDING_DIR / LANDING_GYM_LOGINS / ".c.csv").write_text(header + "m9,1,1,2\n")
    dg.materialize([GYM_ASSET], resources=resources)
    dg.materialize([GYM_ASSET], resources=resources)  # nothing new: nothing added

    assert gym_rows(spark, resources) == [
        ("m1", "5", "100", "200", "a.csv"),
        ("m1", "5", "100", "260", "b.csv"),
        ("m2", "5", "100", "not-a-number", "a.csv"),  # kept as text; silver quarantines it
    ]
    table = resources["lake"].read(spark, BRONZE, LANDING_GYM_LOGINS)
    assert table.where("ingested_at IS NULL").count() == 0
