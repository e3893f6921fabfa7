"""The lake resource: delta-rs commits with transaction ids, and snapshot reads in Spark."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from resources import LakeResource


def rows(ids: list[int], days: list[date]) -> pa.Table:
    return pa.table({"id": ids, "name": [f"n{i}" for i in ids], "day": days})


def test_table_location_follows_layer_and_table(tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path))
    assert lake.table_uri("silver", "users") == f"{tmp_path}/silver/users"
    assert (
        LakeResource(root="s3://bucket/lake/").table_uri("gold", "x") == "s3://bucket/lake/gold/x"
    )


def test_commits_carry_transaction_versions(tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path))
    assert lake.committed_version("bronze", "t", "app") is None
    lake.append("bronze", "t", rows([1], [date(2026, 1, 1)]), markers={"app": 4})
    assert lake.committed_version("bronze", "t", "app") == 4
    assert lake.committed_version("bronze", "t", "other") is None
    assert lake.version("bronze", "t") == 0
    assert lake.row_count("bronze", "t") == 1


def test_snapshot_read_brings_back_partition_values_and_ignores_stray_files(
    tmp_path: Path, spark: SparkSession
) -> None:
    lake = LakeResource(root=str(tmp_path))
    days = [date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 2)]
    lake.append("silver", "t", rows([1, 2, 3], days), partition_by=["day"])
    stray = tmp_path / "silver" / "t" / "day=2026-01-03"
    stray.mkdir()
    (stray / "leftover.parquet").write_bytes(b"not part of the snapshot")
    frame = lake.read(spark, "silver", "t")
    assert frame.columns == ["id", "name", "day"]
    assert sorted((r.id, r.day) for r in frame.collect()) == list(zip([1, 2, 3], days, strict=True))


def test_merge_upserts_and_delete_removes(tmp_path: Path, spark: SparkSession) -> None:
    lake = LakeResource(root=str(tmp_path))
    lake.merge("silver", "t", rows([1, 2], [date(2026, 1, 1)] * 2), keys=["id"])
    changed = pa.table({"id": [2, 3], "name": ["two", "three"], "day": [date(2026, 1, 5)] * 2})
    lake.merge("silver", "t", changed, keys=["id"])
    lake.delete("silver", "t", "id = 1")
    result = sorted((r.id, r.name) for r in lake.read(spark, "silver", "t").collect())
    assert result == [(2, "two"), (3, "three")]


def test_overwrite_where_replaces_only_matching_rows(tmp_path: Path, spark: SparkSession) -> None:
    lake = LakeResource(root=str(tmp_path))
    lake.append("gold", "t", rows([1, 2], [date(2026, 1, 1), date(2026, 1, 2)]), ["day"])
    lake.overwrite_where("gold", "t", rows([9], [date(2026, 1, 2)]), "day = '2026-01-02'")
    assert sorted(r.id for r in lake.read(spark, "gold", "t").collect()) == [1, 9]


def test_reading_a_missing_table_names_it(tmp_path: Path, spark: SparkSession) -> None:
    with pytest.raises(FileNotFoundError, match=r"silver\.nothing"):
        LakeResource(root=str(tmp_path)).read(spark, "silver", "nothing")


def test_spark_paths_use_hadoop_schemes() -> None:
    lake = LakeResource(root="s3://bucket/lake")
    assert lake.spark_path("_checkpoints", "s") == "s3a://bucket/lake/_checkpoints/s"
    assert LakeResource(root="/data/lake").spark_path("x") == "/data/lake/x"


def test_merge_keeps_the_newest_and_applies_deletes(tmp_path: Path, spark: SparkSession) -> None:
    lake = LakeResource(root=str(tmp_path))
    first = pa.table({"id": [1, 2, 3], "ts": [10, 10, 10], "gone": [False, False, True]})
    lake.merge(
        "silver", "p", first, ["id"], update_when="source.ts > target.ts", delete_flag="gone"
    )
    later = pa.table({"id": [1, 2, 4], "ts": [5, 20, 1], "gone": [False, True, False]})
    lake.merge(
        "silver", "p", later, ["id"], update_when="source.ts > target.ts", delete_flag="gone"
    )
    # id 1: the older ts 5 loses to 10; id 2: deleted; id 3: never inserted; id 4: inserted.
    rows = sorted((r.id, r.ts) for r in lake.read(spark, "silver", "p").collect())
    assert rows == [(1, 10), (4, 1)]
    assert lake.read(spark, "silver", "p").columns == ["id", "ts"]


def test_changes_since_returns_only_later_rows(tmp_path: Path, spark: SparkSession) -> None:
    lake = LakeResource(root=str(tmp_path))
    v0 = lake.append("bronze", "t", rows([1, 2], [date(2026, 1, 1)] * 2))
    lake.append("bronze", "t", rows([3], [date(2026, 1, 2)]))
    everything, version = lake.changes_since(spark, "bronze", "t", None)
    assert sorted(r.id for r in everything.collect()) == [1, 2, 3] and version == 1
    later, version = lake.changes_since(spark, "bronze", "t", v0)
    assert [r.id for r in later.collect()] == [3] and version == 1
    nothing, version = lake.changes_since(spark, "bronze", "t", 1)
    assert nothing.count() == 0 and version == 1
    assert lake.holds("bronze", "t", {"app": 0}) is False
    lake.append("bronze", "t", rows([4], [date(2026, 1, 2)]), markers={"app": 3, "other": 1})
    assert lake.holds("bronze", "t", {"app": 3, "other": 0}) is True
    assert lake.holds("bronze", "t", {"app": 3, "other": 2}) is False
