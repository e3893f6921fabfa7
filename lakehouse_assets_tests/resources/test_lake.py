"""The lake: Delta Lake for Spark writes every table (with statistics and transaction markers),
delta-rs reads the logs; snapshot reads, partition replacement, merges and the change feed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from resources import LakeResource
from resources.delta_merge import later
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


@pytest.fixture
def frame(spark: SparkSession) -> Callable[..., DataFrame]:
    """A DataFrame of ``columns`` (``{name: values}``) in the DDL ``schema``."""

    def make(schema: str, **columns: list) -> DataFrame:
        return spark.createDataFrame(list(zip(*columns.values(), strict=True)), schema)

    return make


Frame = Callable[..., DataFrame]


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


def test_a_write_again_with_the_markers_it_committed_is_skipped(
    tmp_path: Path, spark: SparkSession, rows: Rows
) -> None:
    lake = LakeResource(root=str(tmp_path))
    for _ in range(2):  # a run, then its retry after a crash that came after the commit
        lake.append("bronze", "t", rows([1], [date(2026, 1, 1)]), markers={"app": 1})
    assert [r.id for r in lake.read(spark, "bronze", "t").collect()] == [1]
    assert lake.version("bronze", "t") == 0


def test_files_written_but_never_committed_are_not_in_the_table_and_vacuum_removes_them(
    tmp_path: Path, spark: SparkSession, rows: Rows
) -> None:
    lake = LakeResource(root=str(tmp_path))
    lake.append("bronze", "t", rows([1], [date(2026, 1, 1)]), partition_by=["day"])
    # What a writer killed before its commit leaves: a data file no commit names.
    orphan = tmp_path / "bronze" / "t" / "day=2026-01-01" / "part-00000-killed.snappy.parquet"
    pq.write_table(rows([2], [date(2026, 1, 1)]).drop("day").toArrow(), orphan)
    assert [r.id for r in lake.read(spark, "bronze", "t").collect()] == [1]
    assert lake.version("bronze", "t") == 0
    removed = vacuum(spark, lake, "bronze", "t", retention_hours=0, force=True)
    assert removed["files_removed"] == 1 and not orphan.exists()
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


def test_rows_per_partition_come_from_the_log_after_each_write(tmp_path: Path, rows: Rows) -> None:
    lake = LakeResource(root=str(tmp_path))
    assert lake.partition_row_counts("gold", "t", "day") == {}
    days = [date(2026, 1, 1), date(2026, 1, 1), date(2026, 1, 2)]
    lake.append("gold", "t", rows([1, 2, 3], days), partition_by=["day"])
    lake.append("gold", "t", rows([4], [date(2026, 1, 2)]), partition_by=["day"])
    assert lake.partition_row_counts("gold", "t", "day") == {"2026-01-01": 2, "2026-01-02": 2}
    only_jan_1 = [("day", "=", "2026-01-01")]
    lake.replace_partitions("gold", "t", rows([5], [date(2026, 1, 1)]), only_jan_1, ["day"])
    assert lake.partition_row_counts("gold", "t", "day") == {"2026-01-01": 1, "2026-01-02": 2}


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


def test_merge_keeps_the_newest_and_applies_deletes(
    tmp_path: Path, spark: SparkSession, frame: Frame
) -> None:
    lake = LakeResource(root=str(tmp_path))
    schema = "id long, ts long, gone boolean"
    first = frame(schema, id=[1, 2, 3], ts=[10, 10, 10], gone=[False, False, True])
    newest = {"update_when": later("ts"), "delete_flag": "gone"}
    lake.merge("silver", "p", first, ["id"], **newest)
    second = frame(schema, id=[1, 2, 4, 5], ts=[5, 20, 1, 9], gone=[False, True, False, True])
    lake.merge("silver", "p", second, ["id"], **newest)
    # id 1: the older ts 5 loses to 10; id 2: deleted; id 3: never inserted; id 4: inserted;
    # id 5: a delete of a key never seen, nothing to do.
    rows = sorted((r.id, r.ts) for r in lake.read(spark, "silver", "p").collect())
    assert rows == [(1, 10), (4, 1)]
    assert lake.read(spark, "silver", "p").columns == ["id", "ts"]


def test_a_merge_adds_the_columns_the_table_lacks(
    tmp_path: Path, spark: SparkSession, frame: Frame
) -> None:
    lake = LakeResource(root=str(tmp_path))
    lake.merge("silver", "p", frame("id long, a string", id=[1, 2], a=["x", ""]), ["id"])
    lake.merge("silver", "p", frame("id long, b double", id=[2, 3], b=[0.5, 1.5]), ["id"])
    rows = sorted(tuple(r) for r in lake.read(spark, "silver", "p").collect())
    assert rows == [(1, "x", None), (2, "", 0.5), (3, None, 1.5)]  # '' stays beside NULL


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
    assert later.columns == ["id", "name", "day"]
    assert lake.holds("bronze", "t", {"app": 0}) is False
    lake.append("bronze", "t", rows([4], [date(2026, 1, 2)]), markers={"app": 3, "other": 1})
    assert lake.holds("bronze", "t", {"app": 3, "other": 0}) is True
    assert lake.holds("bronze", "t", {"app": 3, "other": 2}) is False


def test_a_write_with_several_markers_is_one_commit_that_records_them_all(
    tmp_path: Path, spark: SparkSession, frame: Frame
) -> None:
    lake = LakeResource(root=str(tmp_path))
    schema = "id long, v long"
    apps = ["a", "b", "c"]
    # Markers each committed alone, as an earlier version of the project did.
    lake.merge("silver", "t", frame(schema, id=[1], v=[1]), ["id"], markers={"a": 3})
    lake.merge("silver", "t", frame(schema, id=[], v=[]), ["id"], markers={"b": 7})
    assert lake.version("silver", "t") == 1
    v2 = lake.merge("silver", "t", frame(schema, id=[2], v=[2]), ["id"],
                    markers={"a": 4, "b": 7, "c": 0})  # fmt: skip
    assert v2 == 2
    assert lake.committed_versions("silver", "t", apps) == {"a": 4, "b": 7, "c": 0}
    # Again after a crash that came after the commit: skipped.
    lake.merge("silver", "t", frame(schema, id=[2], v=[9]), ["id"],
               markers={"a": 4, "b": 7, "c": 0})  # fmt: skip
    assert lake.version("silver", "t") == 2
    # Nothing to merge, one marker newer: one commit of no rows records all three.
    lake.merge("silver", "t", frame(schema, id=[], v=[]), ["id"],
               markers={"a": 4, "b": 8, "c": 0})  # fmt: skip
    assert lake.version("silver", "t") == 3
    # Commits of others come between: maintenance, and a user's own metadata.
    spark.sql(f"OPTIMIZE delta.`{tmp_path / 'silver' / 't'}`")
    spark.createDataFrame([], schema).write.format("delta").mode("append").option(
        "userMetadata", "backfilled by hand"
    ).save(str(tmp_path / "silver" / "t"))
    assert lake.committed_versions("silver", "t", apps) == {"a": 4, "b": 8, "c": 0}
    assert lake.holds("silver", "t", {"a": 4, "b": 8}) and not lake.holds("silver", "t", {"c": 1})
    appended = lake.append("silver", "t", frame(schema, id=[3], v=[3]),
                           markers={"a": 5, "b": 8, "c": 1})  # fmt: skip
    assert lake.committed_versions("silver", "t", apps) == {"a": 5, "b": 8, "c": 1}
    assert [c["operation"] for c in lake.history("silver", "t", 1)] == ["WRITE"]
    assert appended == lake.version("silver", "t")
    assert sorted((r.id, r.v) for r in lake.read(spark, "silver", "t").collect()) == [
        (1, 1),
        (2, 2),
        (3, 3),
    ]


def test_the_rows_a_change_feed_holds_are_told_from_the_log(
    tmp_path: Path, spark: SparkSession, frame: Frame
) -> None:
    lake = LakeResource(root=str(tmp_path))
    assert lake.rows_changed("silver", "t", None) == 0  # no table yet
    schema = "id long, v long"
    v0 = lake.append("silver", "t", frame(schema, id=[1, 2, 3], v=[1, 1, 1]))
    # One update (2), one insert (4), one row the same (3): 2 changed rows.
    v1 = lake.merge("silver", "t", frame(schema, id=[2, 3, 4], v=[2, 1, 1]), ["id"])
    spark.sql(f"OPTIMIZE delta.`{tmp_path / 'silver' / 't'}`")  # changes no row
    assert lake.rows_changed("silver", "t", None) == 4  # every row
    assert lake.rows_changed("silver", "t", v0) == 2
    assert lake.rows_changed("silver", "t", v1) == 0
    lake.append("silver", "t", frame(schema, id=[5], v=[1]))
    assert lake.rows_changed("silver", "t", v0) == 3


def test_changes_of_a_merge_are_its_updates_and_inserts(
    tmp_path: Path, spark: SparkSession, frame: Frame
) -> None:
    lake = LakeResource(root=str(tmp_path))
    v0 = lake.merge("silver", "p", frame("id long, ts long", id=[1, 2], ts=[10, 10]), ["id"])
    lake.merge("silver", "p", frame("id long, ts long", id=[2, 3], ts=[20, 20]), ["id"])
    later, version = lake.changes_since(spark, "silver", "p", v0)
    # The new row of the update of 2 and the insert of 3; the untouched 1 is no change.
    assert sorted((r.id, r.ts) for r in later.collect()) == [(2, 20), (3, 20)] and version == 1


def test_a_merge_into_a_partitioned_table_looks_for_keys_in_the_sources_partitions_only(
    tmp_path: Path, spark: SparkSession, frame: Frame
) -> None:
    lake = LakeResource(root=str(tmp_path))
    days = [date(2026, 1, 1), date(2026, 1, 2), date(2026, 1, 3)]
    schema = "id long, v long, day date"
    lake.merge("silver", "p", frame(schema, id=[1, 2, 3], v=[10, 20, 30], day=days), ["id"],
               partition_by=["day"])  # fmt: skip
    # Key 1 on another day than its stored row: not looked for there, so a second row.
    later = frame(schema, id=[2, 4, 1], v=[21, 40, 11], day=[days[1]] * 3)
    lake.merge("silver", "p", later, ["id"], partition_by=["day"])
    rows = sorted((r.id, r.v, r.day) for r in lake.read(spark, "silver", "p").collect())
    assert rows == [(1, 10, days[0]), (1, 11, days[1]), (2, 21, days[1]), (3, 30, days[2]),
                    (4, 40, days[1])]  # fmt: skip
    # Looked for in the whole table: key 1 is updated where it is (and moves to its new day).
    again = frame(schema, id=[3], v=[31], day=[days[0]])
    lake.merge("silver", "p", again, ["id"], partition_by=["day"], within_partitions=False)
    assert sorted(r.v for r in lake.read(spark, "silver", "p").where("id = 3").collect()) == [31]


def test_a_merge_that_changes_nothing_adds_nothing_to_the_change_feed(
    tmp_path: Path, spark: SparkSession, frame: Frame
) -> None:
    lake = LakeResource(root=str(tmp_path))
    v0 = lake.merge("silver", "p", frame("id long, v long", id=[1, 2], v=[10, None]), ["id"])
    # The same rows again (a null equal to a null), and an empty batch: the markers are kept.
    same = frame("id long, v long", id=[1, 2], v=[10, None])
    lake.merge("silver", "p", same, ["id"], markers={"app": 4})
    version = lake.merge("silver", "p", frame("id long, v long", id=[], v=[]), ["id"],
                         markers={"app": 5})  # fmt: skip
    assert lake.holds("silver", "p", {"app": 5})
    nothing, reached = lake.changes_since(spark, "silver", "p", v0)
    assert nothing.count() == 0 and reached == version


def test_replace_deletes_the_rows_of_the_replaced_values_missing_from_the_source(
    tmp_path: Path, spark: SparkSession, frame: Frame
) -> None:
    lake = LakeResource(root=str(tmp_path))
    schema = "user long, t long, v long, day string"
    first = frame(schema, user=[1, 1, 2], t=[1, 2, 1], v=[5, 5, 5], day=["a", "b", "c"])
    lake.merge("silver", "w", first, ["user", "t"], partition_by=["day"])

    def files_of(day: str) -> set[str]:
        actions = pa.table(lake.table("silver", "w").get_add_actions(flatten=True)).to_pylist()
        return {a["path"] for a in actions if a["partition.day"] == day}

    day_c = files_of("c")
    # User 1's rows are recomputed: only t=2 remains, with a new value; its row on day a goes
    # though the source has no row there; user 2 is untouched, its day's file not rewritten.
    lake.merge("silver", "w", frame(schema, user=[1], t=[2], v=[6], day=["b"]), ["user", "t"],
               partition_by=["day"], replace=F.col("user") == 1)  # fmt: skip
    rows = sorted(tuple(r) for r in lake.read(spark, "silver", "w").collect())
    assert rows == [(1, 2, 6, "b"), (2, 1, 5, "c")]
    assert files_of("c") == day_c and files_of("a") == set()
    # An empty source replacing user 2: all of its rows go.
    lake.merge("silver", "w", frame(schema, user=[], t=[], v=[], day=[]), ["user", "t"],
               partition_by=["day"], replace=F.col("user") == 2)  # fmt: skip
    assert sorted(tuple(r) for r in lake.read(spark, "silver", "w").collect()) == [(1, 2, 6, "b")]
    with pytest.raises(ValueError, match="replaces rows"):
        lake.merge("silver", "w", first, ["user", "t"], update_when=later("v"),
                   replace=F.col("user") == 1)  # fmt: skip


def test_changed_values_are_both_sides_of_a_change_and_leave_out_same_value_updates(
    tmp_path: Path, spark: SparkSession, frame: Frame
) -> None:
    lake = LakeResource(root=str(tmp_path))
    schema = "id long, dev long, ts long"
    v0 = lake.merge("silver", "u", frame(schema, id=[1, 2], dev=[10, 20], ts=[1, 1]), ["id"])
    # id 1 registers again with the same device; id 2 takes another device; id 3 is new.
    later = frame(schema, id=[1, 2, 3], dev=[10, 21, 30], ts=[2, 2, 2])
    lake.merge("silver", "u", later, ["id"])
    values, version = lake.changed_values(spark, "silver", "u", v0, ["id", "dev"])
    assert sorted(tuple(r) for r in values.collect()) == [(2, 20), (2, 21), (3, 30)]
    assert version == 1
    everything, _ = lake.changed_values(spark, "silver", "u", None, ["id", "dev"])
    assert sorted(tuple(r) for r in everything.collect()) == [(1, 10), (2, 21), (3, 30)]
    spark.sql(f"DELETE FROM delta.`{lake.spark_path('silver', 'u')}` WHERE id = 3")
    deleted, _ = lake.changed_values(spark, "silver", "u", version, ["id", "dev"])
    assert [tuple(r) for r in deleted.collect()] == [(3, 30)]


def test_a_table_laid_out_by_an_older_version_is_refused_with_how_to_rebuild_it(
    tmp_path: Path, frame: Frame
) -> None:
    lake = LakeResource(root=str(tmp_path))
    lake.merge("silver", "p", frame("id long, day date", id=[1], day=[date(2026, 1, 1)]), ["id"])
    with pytest.raises(
        ValueError, match=r"partitioned by nothing.*by \['day'\].*delete its folder"
    ):
        lake.merge("silver", "p", frame("id long, day date", id=[2], day=[date(2026, 1, 1)]),
                   ["id"], partition_by=["day"])  # fmt: skip
    assert lake.row_count("silver", "p") == 1
