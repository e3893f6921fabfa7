"""The profile of a small hand-built table: every statistic against a value computed by hand."""

from __future__ import annotations

import math
import statistics
from datetime import date

import pytest
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.profiling.model import ProfileOptions, TableProfile
from lakehouse_assets.profiling.transforms import profile

D1, D2, D3 = date(2026, 11, 1), date(2026, 11, 2), date(2026, 11, 3)
AMOUNTS = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0, 100.0, None]
CODES = ["007", "42", "42", "", "N/A", None, "ab-1", "AB-2", "42", "007"]
DAYS = [D1, D1, D2, D2, D3, D3, D1, D2, D3, None]
SCHEMA = "id long, group long, seq long, twice long, amount double, code string, day date"
OPTIONS = ProfileOptions(top_n=4, sentinels=("N/A",))


def table(spark: SparkSession) -> DataFrame:
    """Ten rows: ``id`` and ``twice`` (= 2 id) unique, ``(group, seq)`` unique together only."""
    rows = [
        (i, 1 if i <= 5 else 2, (i - 1) % 5 + 1, 2 * i, AMOUNTS[i - 1], CODES[i - 1], DAYS[i - 1])
        for i in range(1, 11)
    ]
    return spark.createDataFrame(rows, SCHEMA)


@pytest.fixture(scope="module")
def profiled(spark: SparkSession) -> TableProfile:
    return profile(table(spark), OPTIONS)


def test_numeric_column(profiled: TableProfile) -> None:
    amount = profiled.columns[4]
    present = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0, 100.0]
    assert (amount.name, amount.data_type, amount.count, amount.missing) == (
        "amount",
        "double",
        9,
        1,
    )
    assert amount.density == pytest.approx((10 - 1) / 10)
    assert (amount.minimum, amount.maximum) == (2.0, 100.0)
    assert amount.mean == pytest.approx(140 / 9)
    assert amount.stddev == pytest.approx(statistics.stdev(present))
    assert (amount.distinct, amount.distinct_exact) == (6, True)  # 2, 4, 5, 7, 9, 100
    # The 3rd, 5th and 7th of the 9 sorted values (the smallest with 25/50/75% at or below).
    assert (amount.q1, amount.median, amount.q3) == (4.0, 5.0, 7.0)
    assert amount.outliers == 1  # fences 4 - 1.5 * 3 and 7 + 1.5 * 3: only 100 is outside
    # Most frequent first, ties by the value ascending, cut at top_n = 4.
    assert amount.top_values == [("4.0", 3), ("5.0", 2), ("2.0", 1), ("7.0", 1)]
    width = (100 - 2) / 10
    assert [n for _, _, n in amount.histogram] == [8, 0, 0, 0, 0, 0, 0, 0, 0, 1]
    assert amount.histogram[0][:2] == pytest.approx((2.0, 2 + width))
    assert amount.histogram[9][:2] == pytest.approx((2 + 9 * width, 100.0))
    assert amount.patterns == [] and amount.min_length is None


def test_string_column_with_empty_strings_sentinels_and_numeric_looking_values(
    profiled: TableProfile,
) -> None:
    code = profiled.columns[5]
    assert (code.count, code.missing) == (9, 3)  # a null, '' and the sentinel 'N/A'
    assert code.density == pytest.approx((10 - 3) / 10)
    assert (code.minimum, code.maximum) == ("", "ab-1")  # by code point: '' < '007' < ... < 'a'
    assert (code.min_length, code.max_length) == (0, 4)
    assert code.avg_length == pytest.approx((3 + 2 + 2 + 0 + 3 + 4 + 4 + 2 + 3) / 9)
    assert code.distinct == 6  # '007', '42', '', 'N/A', 'ab-1', 'AB-2'
    assert code.top_values == [("42", 3), ("007", 2), ("", 1), ("AB-2", 1)]
    assert code.patterns == [("99", 3), ("999", 2), ("AA-9", 2), ("", 1)]
    assert code.mean is None and code.histogram == [] and code.outliers is None


def test_date_column_and_exact_ties(profiled: TableProfile) -> None:
    day = profiled.columns[6]
    assert (day.count, day.missing, day.minimum, day.maximum, day.distinct) == (9, 1, D1, D3, 3)
    assert day.top_values == [("2026-11-01", 3), ("2026-11-02", 3), ("2026-11-03", 3)]


def test_correlations_and_candidate_keys(profiled: TableProfile) -> None:
    assert profiled.rows == 10
    assert profiled.correlations[("id", "twice")] == pytest.approx(1.0)
    # id against group (five 1s then five 2s): sums of products and squares around the means.
    assert profiled.correlations[("id", "group")] == pytest.approx(12.5 / math.sqrt(82.5 * 2.5))
    assert set(profiled.correlations) == {
        ("id", "group"), ("id", "seq"), ("id", "twice"), ("id", "amount"), ("group", "seq"),
        ("group", "twice"), ("group", "amount"), ("seq", "twice"), ("seq", "amount"),
        ("twice", "amount"),
    }  # fmt: skip
    assert profiled.candidate_keys == [("id",), ("twice",), ("group", "seq")]


def test_approximate_distinct_counts_above_the_configured_size(spark: SparkSession) -> None:
    taken = profile(table(spark), ProfileOptions(exact_distinct_below=5))
    ids = taken.columns[0]
    assert ids.distinct_exact is False and taken.keys_exact is False
    assert ids.distinct is not None and abs(ids.distinct - 10) <= 1


def test_a_constant_column_has_no_correlation(spark: SparkSession) -> None:
    constant = spark.createDataFrame([(1, 5), (2, 5), (3, 5)], "x long, y long")
    assert profile(constant).correlations == {("x", "y"): None}


def test_an_empty_table(spark: SparkSession) -> None:
    taken = profile(spark.createDataFrame([], SCHEMA), OPTIONS)
    assert taken.rows == 0 and taken.candidate_keys == []
    assert all(c.count == 0 and c.density is None and c.top_values == [] for c in taken.columns)


def test_frequencies_and_patterns_beyond_the_tracked_values(spark: SparkSession) -> None:
    # 6 distinct codes, more than the 5 tracked: the patterns come from a sketch of the
    # patterns, not from the values, and the frequencies are flagged as estimates (here still
    # exact: the 5 patterns fit the sketch).
    options = ProfileOptions(top_n=4, sentinels=("N/A",), exact_frequencies_below=5)
    code = profile(table(spark), options).columns[5]
    assert code.frequencies_exact is False
    assert code.patterns == [("99", 3), ("999", 2), ("AA-9", 2), ("", 1)]
    assert code.top_values[:2] == [("42", 3), ("007", 2)]
