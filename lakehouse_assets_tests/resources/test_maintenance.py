"""OPTIMIZE and VACUUM beside a writer: no row lost or duplicated, fewer files."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from resources import LakeResource
from resources.maintenance import SAFE_RETENTION_HOURS, optimize, vacuum


def ids(spark: SparkSession, lake: LakeResource) -> list[int]:
    rows = spark.read.format("delta").load(lake.spark_path("bronze", "t")).collect()
    return sorted(row.id for row in rows)


def append_batches(spark: SparkSession, lake: LakeResource, first: int, last: int) -> None:
    """Small commits of 10 ids each, as a stream makes them."""
    for batch in range(first, last):
        rows = spark.range(batch * 10, batch * 10 + 10, numPartitions=1)
        rows.write.format("delta").mode("append").save(lake.spark_path("bronze", "t"))


def test_optimize_while_appends_commit_keeps_every_row_once(
    tmp_path: Path, spark: SparkSession
) -> None:
    lake = LakeResource(root=str(tmp_path))
    append_batches(spark, lake, 0, 8)
    writer = threading.Thread(target=append_batches, args=(spark, lake, 8, 16))
    writer.start()
    results = []
    while writer.is_alive():  # compact again and again while the writer commits
        results.append(optimize(spark, lake, "bronze", "t"))
    writer.join()
    assert ids(spark, lake) == list(range(160))  # 16 batches of 10 ids, none lost, none doubled

    # The first compaction ran beside the writer and dropped the 8+ files to fewer.
    assert results and results[0]["after"]["files"] < 8 <= results[0]["before"]["files"]
    assert optimize(spark, lake, "bronze", "t")["after"]["files"] == 1


def test_z_order_and_vacuum(tmp_path: Path, spark: SparkSession) -> None:
    lake = LakeResource(root=str(tmp_path))
    append_batches(spark, lake, 0, 5)
    result = optimize(spark, lake, "bronze", "t", z_order=["id"])
    assert (result["before"]["files"], result["after"]["files"]) == (5, 1)
    assert result["metrics"]["zOrderStats"] is not None
    with pytest.raises(ValueError, match="safe minimum"):
        vacuum(spark, lake, "bronze", "t", retention_hours=SAFE_RETENTION_HOURS - 1)
    assert vacuum(spark, lake, "bronze", "t", retention_hours=0, force=True)["files_removed"] == 5
    assert ids(spark, lake) == list(range(50))
    # The session's own setting is back: a later VACUUM below the minimum is refused by Delta.
    assert spark.conf.get("spark.databricks.delta.retentionDurationCheck.enabled", None) is None
