"""The landing-zone bronze assets: every file's lines exactly once, byte for byte, with file name
and load time."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE, LANDING_DIR, asset_key
from lakehouse_assets.fitness.names import LANDING_GYM_LOGINS
from lakehouse_assets.fitness.pipeline import bronze_landing_assets

GYM_ASSET = next(a for a in bronze_landing_assets if a.key == asset_key(BRONZE, LANDING_GYM_LOGINS))


def drop_file(lake_root: Path, name: str, content: bytes) -> None:
    """Write a landing file the way producers should: under a hidden name, then rename."""
    folder = lake_root / LANDING_DIR / LANDING_GYM_LOGINS
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f".{name}").write_bytes(content)
    os.replace(folder / f".{name}", folder / name)


def gym_lines(spark: SparkSession, resources: dict[str, Any]) -> list[tuple[bytes, str]]:
    table = resources["lake"].read(spark, BRONZE, LANDING_GYM_LOGINS)
    rows = table.select("line", "source_file").collect()
    return sorted((bytes(r.line), Path(r.source_file).name) for r in rows)


def test_each_file_lands_once_with_its_name(
    resources: dict[str, Any], lake_root: Path, spark: SparkSession
) -> None:
    dg.materialize([GYM_ASSET], resources=resources)  # empty folder: empty table
    assert gym_lines(spark, resources) == []

    header = b"mac_address,gym,login,logout"
    drop_file(lake_root, "a.csv", header + b"\nm1,5,100,200\nm2,5,\xff100,not-a-number\n")
    dg.materialize([GYM_ASSET], resources=resources)
    drop_file(lake_root, "b.csv", header + b"\r\nm1,5,100,260\r\n")
    (lake_root / LANDING_DIR / LANDING_GYM_LOGINS / ".c.csv").write_bytes(header + b"\nm9,1,1,2")
    dg.materialize([GYM_ASSET], resources=resources)
    dg.materialize([GYM_ASSET], resources=resources)  # nothing new: nothing added

    assert gym_lines(spark, resources) == sorted(  # every line as written, without its break
        [
            (header, "a.csv"),
            (b"m1,5,100,200", "a.csv"),
            (b"m2,5,\xff100,not-a-number", "a.csv"),  # kept as it came; silver quarantines it
            (header, "b.csv"),
            (b"m1,5,100,260", "b.csv"),
        ]
    )
    table = resources["lake"].read(spark, BRONZE, LANDING_GYM_LOGINS)
    assert table.where("ingested_at IS NULL").count() == 0
