"""A partitioned table's profile follows its writes by reading only the partitions they changed:
every figure below is computed by hand from the rows the table holds after each write."""

from __future__ import annotations

import statistics
from datetime import date
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.profiling.model import ProfileOptions, TableProfile
from lakehouse_assets.profiling.store import PROFILES, STATES_SUFFIX, take_profile
from lakehouse_assets.profiling.transforms import profile
from resources import LakeResource

D1, D2, D3 = date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3)
SCHEMA = "day date, amount double, name string"
STATES = f"silver__dated{STATES_SUFFIX}"


def _column(taken: TableProfile, name: str):
    return next(column for column in taken.columns if column.name == name)


def _amounts(taken: TableProfile) -> tuple[int, float | None, float | None, object, object]:
    amount = _column(taken, "amount")
    return amount.count, amount.mean, amount.stddev, amount.minimum, amount.maximum


def _state_groups(lake: LakeResource, spark: SparkSession) -> list[str]:
    rows = lake.read(spark, PROFILES, STATES).select("_partition").collect()
    return sorted(row[0] for row in rows)


def test_each_profile_reads_only_the_partitions_written_since_the_last(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = LakeResource(root=str(tmp_path))
    first = [(D1, 1.0, "a"), (D1, 2.0, "b"), (D2, 3.0, "a"), (None, 4.0, None)]
    lake.append("silver", "dated", spark.createDataFrame(first, SCHEMA), partition_by=["day"])
    # A table this small is profiled whole, with no states kept...
    assert take_profile(lake, spark, "silver", "dated").rows == 4
    assert lake.find(PROFILES, STATES) is None
    # ...unless states are asked for from a table's first row, as below.
    taken = take_profile(lake, spark, "silver", "dated", states_from_rows=1)
    assert taken.rows == 4
    assert _amounts(taken) == (4, 2.5, pytest.approx(statistics.stdev([1, 2, 3, 4])), 1.0, 4.0)
    name = _column(taken, "name")
    assert (name.count, name.missing, name.top_values) == (3, 1, [("a", 2), ("b", 1)])
    day = _column(taken, "day")
    assert (day.count, day.missing, day.distinct) == (3, 1, 2)
    assert _state_groups(lake, spark) == sorted(["2026-11-01", "2026-11-02", "\0null"])

    # From here on no profile may read day 2: its only data file is gone from the disk (any
    # read of it fails), yet its state still counts until a write replaces the day.
    day_two = next((tmp_path / "silver" / "dated").glob("day=2026-11-02/*.parquet"))
    day_two.unlink()

    lake.append("silver", "dated", spark.createDataFrame([(D3, 10.0, "c")], SCHEMA))
    taken = take_profile(lake, spark, "silver", "dated", states_from_rows=1)
    amounts = [1, 2, 3, 4, 10]
    assert _amounts(taken) == (5, 4.0, pytest.approx(statistics.stdev(amounts)), 1.0, 10.0)
    assert _column(taken, "name").top_values == [("a", 2), ("b", 1), ("c", 1)]
    assert len(_state_groups(lake, spark)) == 4

    # Day 1 rewritten (as a merge or a replace does) and day 2 emptied: day 1's new rows replace
    # its old state, and day 2's state goes with its files.
    day_one = spark.createDataFrame([(D1, 5.0, "b")], SCHEMA)
    lake.replace_partitions("silver", "dated", day_one, [("day", "=", "2026-11-01")], ["day"])
    empty = spark.createDataFrame([], SCHEMA)
    lake.replace_partitions("silver", "dated", empty, [("day", "=", "2026-11-02")], ["day"])
    taken = take_profile(lake, spark, "silver", "dated", states_from_rows=1)
    stddev = statistics.stdev([5, 4, 10])
    assert _amounts(taken) == (3, pytest.approx(19 / 3), pytest.approx(stddev), 4.0, 10.0)
    assert _column(taken, "name").top_values == [("b", 1), ("c", 1)]
    assert _state_groups(lake, spark) == sorted(["2026-11-01", "2026-11-03", "\0null"])

    # A new column: the states start afresh, every partition read again (day 2 has no files).
    extra = spark.createDataFrame([(D3, 7.0, "d", 1)], f"{SCHEMA}, extra long")
    lake.append("silver", "dated", extra)
    taken = take_profile(lake, spark, "silver", "dated", states_from_rows=1)
    assert taken.rows == 4 and _column(taken, "extra").count == 1
    assert _amounts(taken)[0] == 4


def test_histograms_and_outliers_beyond_the_exact_frequencies_come_from_the_quantiles(
    spark: SparkSession,
) -> None:
    # 500 distinct values 0 to 499 and one 2,500, each once; at most 10 values counted exactly.
    # Bins of width 250 from 0 to 2,500: 0-249 (250 values), 250-499 (250), then none up to the
    # last bin, which holds 2,500. Quartiles of the 501 values (the smallest with 25/50/75% of
    # them at or below): 125, 250, 375; fences -250 and 750, so one outlier.
    spread = spark.range(500).selectExpr("CAST(id AS DOUBLE) AS x")
    values = spread.union(spark.createDataFrame([(2500.0,)], "x double"))
    x = profile(values, ProfileOptions(exact_frequencies_below=10)).columns[0]
    assert x.frequencies_exact is False
    assert [n for _, _, n in x.histogram] == [250, 250, 0, 0, 0, 0, 0, 0, 0, 1]
    assert (x.q1, x.median, x.q3) == (125.0, 250.0, 375.0)
    assert x.outliers == 1
