"""The lake: Spark writes the files, delta-rs commits them with statistics and transaction ids;
snapshot reads, partition replacement, merges and the change feed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

from resources import LakeResource
from resources.delta_files import write_files
from resources.maintenance import vacuum

Rows = Callable[[list[int], list[date]], DataFrame]


@pytest.fixture
def rows(spark: SparkSession) -> Rows:
    """Rows ``(id, name = "n<id>", day)`` as a Spark DataFrame."""

    def make(ids: list[int], days: list[date]) -> DataFrame:
        data = [(i, f"n{i}", day) for i, day in zip(ids, days, strict=True)]
        return spark.createDataFrame(data, "id long, name string, day date")

    return make


def test_table_location_follows_layer_and_table(tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path))
    assert lake.table_uri("silver", "users") == f"{tmp_path}/silver/users"
    assert (
        LakeResource(root="s3://bucket/lake/").table_uri("gold", "x") == "s3://bucket/lake/gold/x"
    )


def test_commits_carry_transaction_versions(tmp_path: Path, rows: Rows) -> None:
    lake = LakeResource(root=str(tmp_path))
    assert lake.committed_version("bronze", "t", "app") is None
    lake.append("bronze", "t", rows([1], [date(2026, 1, 1)]), markers={"app": 4})
    assert lake.committed_version("bronze", "t", "app") == 4
    assert lake.committed_version("bronze", "t", "other") is None
    assert lake.version("bronze", "t") == 0
    assert lake.row_count("bronze", "t") == 1


def test_files_are_committed_with_their_statistics(tmp_path: Path, rows: Rows) -> None:
    lake = LakeResource(root=str(tmp_path))
    days = [date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 2)]
    lake.append("silver", "t", rows([5, 7, 6], days).coalesce(1), partition_by=["day"])
    actions = pa.table(lake.table("silver", "t").get_add_actions(flatten=True)).to_pylist()
    by_day = {action["partition.day"]: action for action in actions}
    assert set(by_day) == {date(2026, 1, 1), date(2026, 1, 2)}
    second = by_day[date(2026, 1, 2)]
    assert (second["num_records"], second["min.id"], second["max.id"]) == (2, 6, 7)
    assert (second["min.name"], second["max.name"], second["null_count.id"]) == ("n6", "n7", 0)
    assert all(a["path"].startswith("day=2026-01-0") for a in actions)
    assert lake.row_count("silver", "t") == 3
    table_folder = tmp_path / "silver" / "t"
    assert not [p for p in table_folder.iterdir() if p.name.startswith("staging-")]


def test_snapshot_read_brings_back_partition_values_and_ignores_stray_files(
    tmp_path: Path, spark: SparkSession, rows: Rows
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


def test_files_written_but_never_committed_are_not_in_the_table_and_vacuum_removes_them(
    tmp_path: Path, spark: SparkSession, rows: Rows
) -> None:
    lake = LakeResource(root=str(tmp_path))
    lake.append("bronze", "t", rows([1], [date(2026, 1, 1)]), partition_by=["day"])
    orphans = write_files(rows([2], [date(2026, 1, 1)]), lake.table_uri("bronze", "t"), ["day"])
    assert [r.id for r in lake.read(spark, "bronze", "t").collect()] == [1]
    assert lake.version("bronze", "t") == 0
    removed = vacuum(spark, lake, "bronze", "t", retention_hours=0, force=True)
    assert removed["files_removed"] == len(orphans) == 1
    assert [r.id for r in lake.read(spark, "bronze", "t").collect()] == [1]


def test_replace_partitions_replaces_only_the_matching_days(
    tmp_path: Path, spark: SparkSession, rows: Rows
) -> None:
    lake = LakeResource(root=str(tmp_path))
    days = [date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 3)]
    lake.append("gold", "t", rows([1, 2, 3], days), partition_by=["day"])
    only_jan_2 = [("day", ">=", "2026-01-02"), ("day", "<=", "2026-01-02")]
    lake.replace_partitions("gold", "t", rows([9], [days[1]]), only_jan_2, ["day"])
    assert sorted(r.id for r in lake.read(spark, "gold", "t").collect()) == [1, 3, 9]
    jan_2_and_3 = [("day", ">=", "2026-01-02"), ("day", "<=", "2026-01-03")]
    assert sorted(r.id for r in lake.read(spark, "gold", "t", jan_2_and_3).collect()) == [3, 9]


def test_replace_swaps_the_whole_table(tmp_path: Path, spark: SparkSession, rows: Rows) -> None:
    lake = LakeResource(root=str(tmp_path))
    lake.append("silver", "t", rows([1, 2], [date(2026, 1, 1)] * 2))
    lake.replace("silver", "t", rows([3], [date(2026, 1, 2)]), markers={"bins@2026-01-02": 7})
    assert [r.id for r in lake.read(spark, "silver", "t").collect()] == [3]
    assert lake.holds("silver", "t", {"bins@2026-01-02": 7})


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


def test_changes_since_returns_only_later_rows(
    tmp_path: Path, spark: SparkSession, rows: Rows
) -> None:
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


def test_changes_of_a_merge_come_from_its_change_data_files(
    tmp_path: Path, spark: SparkSession
) -> None:
    lake = LakeResource(root=str(tmp_path))
    v0 = lake.merge("silver", "p", pa.table({"id": [1, 2], "ts": [10, 10]}), ["id"])
    lake.merge("silver", "p", pa.table({"id": [2, 3], "ts": [20, 20]}), ["id"])
    later, version = lake.changes_since(spark, "silver", "p", v0)
    # The new row of the update of 2 and the insert of 3; the untouched 1 is no change.
    assert sorted((r.id, r.ts) for r in later.collect()) == [(2, 20), (3, 20)] and version == 1


def _merge_metrics(lake: LakeResource, table: str) -> dict[str, int]:
    return lake.history("silver", table, limit=1)[0]["operationMetrics"]


def test_a_merge_into_a_partitioned_table_reads_only_its_sources_partitions(
    tmp_path: Path, spark: SparkSession
) -> None:
    lake = LakeResource(root=str(tmp_path))
    days = [date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 3)]
    first = pa.table({"id": [1, 2, 3], "v": [10, 20, 30], "day": days})
    lake.merge("silver", "p", first, ["id"], partition_by=["day"])  # one file per day
    lake.merge(
        "silver", "p", pa.table({"id": [2, 4], "v": [21, 40], "day": [days[1]] * 2}), ["id"],
        partition_by=["day"],
    )  # fmt: skip
    metrics = _merge_metrics(lake, "p")
    assert (metrics["num_target_files_scanned"], metrics["num_target_rows_updated"]) == (1, 1)
    rows = sorted((r.id, r.v, r.day) for r in lake.read(spark, "silver", "p").collect())
    assert rows == [(1, 10, days[0]), (2, 21, days[1]), (3, 30, days[2]), (4, 40, days[1])]


def test_a_merge_that_changes_nothing_adds_nothing_to_the_change_feed(
    tmp_path: Path, spark: SparkSession
) -> None:
    lake = LakeResource(root=str(tmp_path))
    v0 = lake.merge("silver", "p", pa.table({"id": [1, 2], "v": [10, None]}), ["id"])
    # The same rows again (a null equal to a null), and an empty batch: only the markers commit.
    same = pa.table({"id": [1, 2], "v": [10, None]})
    v1 = lake.merge("silver", "p", same, ["id"], markers={"app": 4})
    v2 = lake.merge(
        "silver", "p", pa.table({"id": pa.array([], pa.int64()), "v": pa.array([], pa.int64())}),
        ["id"], markers={"app": 5},
    )  # fmt: skip
    assert (v0, v1, v2) == (0, 1, 2) and lake.holds("silver", "p", {"app": 5})
    nothing, version = lake.changes_since(spark, "silver", "p", v0)
    assert nothing.count() == 0 and version == 2


def test_new_values_leave_out_rows_updated_to_the_same_values(
    tmp_path: Path, spark: SparkSession
) -> None:
    lake = LakeResource(root=str(tmp_path))
    v0 = lake.merge("silver", "u", pa.table({"id": [1, 2], "dev": [10, 20], "ts": [1, 1]}), ["id"])
    # id 1 registers again with the same device; id 2 takes another device; id 3 is new.
    later = pa.table({"id": [1, 2, 3], "dev": [10, 21, 30], "ts": [2, 2, 2]})
    lake.merge("silver", "u", later, ["id"])
    values, version = lake.new_values(spark, "silver", "u", v0, ["id", "dev"])
    assert sorted(tuple(r) for r in values.collect()) == [(2, 21), (3, 30)] and version == 1
    everything, _ = lake.new_values(spark, "silver", "u", None, ["id", "dev"])
    assert sorted(tuple(r) for r in everything.collect()) == [(1, 10), (2, 21), (3, 30)]


def test_a_table_laid_out_by_an_older_version_is_refused_with_how_to_rebuild_it(
    tmp_path: Path,
) -> None:
    lake = LakeResource(root=str(tmp_path))
    lake.merge("silver", "p", pa.table({"id": [1], "day": [date(2026, 1, 1)]}), ["id"])
    with pytest.raises(
        ValueError, match=r"partitioned by nothing.*by \['day'\].*delete its folder"
    ):
        lake.merge(
            "silver", "p", pa.table({"id": [2], "day": [date(2026, 1, 1)]}), ["id"],
            partition_by=["day"],
        )  # fmt: skip
    assert lake.row_count("silver", "p") == 1
