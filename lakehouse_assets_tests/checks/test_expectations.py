"""Declared expectations on small hand-built frames: which records a drop marks and with which
reason, what a run counts, and the table-wide kinds; every count is hand-counted."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.checks.expectations import (
    Expectation,
    ExpectationError,
    mark_dropped,
    require_conditions,
    row_count_holds,
    run_outcomes,
    table_outcome,
)

RECORDS = "id long, kwh long, site string, reason string"
POSITIVE = Expectation("positive", "drop", check="kwh > 0")
SMALL = Expectation("small", "drop", check="kwh < 100")
NAMED = Expectation("named", "warn", check="site <> ''")


def test_the_first_drop_broken_gives_the_reason_and_a_record_with_one_keeps_it(
    spark: SparkSession,
) -> None:
    records = spark.createDataFrame(
        [
            (1, 5, "a", None),
            (2, -1, "a", None),  # breaks positive
            (3, 500, "a", None),  # breaks small
            (4, None, "a", None),  # null: meets both
            (5, -1, "a", "missing site"),  # already rejected: its reason stays
        ],
        RECORDS,
    )
    marked = mark_dropped(records, [NAMED, POSITIVE, SMALL], "reason", F.col("reason").isNull())
    got = {row["id"]: row["reason"] for row in marked.collect()}
    assert got == {
        1: None, 2: "expectation positive", 3: "expectation small", 4: None, 5: "missing site",
    }  # fmt: skip


def test_a_run_counts_its_drops_and_the_kept_records_that_break_a_warning(
    spark: SparkSession,
) -> None:
    records = spark.createDataFrame(
        [
            (1, 5, "", None),  # '' breaks named
            (2, 7, None, None),  # NULL meets it
            (3, -1, "", "expectation positive"),  # dropped: not counted by named
            (4, 2, "", "missing id"),  # rejected: not counted either
        ],
        RECORDS,
    )
    kept = F.col("reason").isNull()
    got = run_outcomes(records, [POSITIVE, NAMED], "reason", kept, ["id", "site"])
    assert {name: outcome.offending for name, outcome in got.items()} == {"positive": 1, "named": 1}
    assert got["named"].sample == [{"id": 1, "site": ""}]
    assert got["positive"].sample == [{"id": 3, "site": ""}]


def test_an_empty_batch_counts_nothing(spark: SparkSession) -> None:
    records = spark.createDataFrame([], RECORDS)
    got = run_outcomes(records, [POSITIVE, NAMED], "reason", F.col("reason").isNull())
    assert [(o.name, o.offending, o.sample) for o in got.values()] == [
        ("positive", 0, []), ("named", 0, []),
    ]  # fmt: skip


def test_unique_counts_the_rows_beyond_the_first_of_each_repeated_value(
    spark: SparkSession,
) -> None:
    table = spark.createDataFrame(
        [(1, "q1"), (1, "q1"), (1, "q1"), (1, "q2"), (2, "q1"), (2, "q1"), (None, "q1"),
         (None, "q1")],
        "meter long, quarter string",
    )  # fmt: skip
    outcome = table_outcome(table, Expectation("u", "warn", unique=("meter", "quarter")), None)
    # (1, q1) twice beyond its first, (2, q1) once; a row with a NULL is unique, as in SQL.
    assert outcome.offending == 3
    assert outcome.sample[0] == {"meter": 1, "quarter": "q1", "count": 3}


def test_a_reference_counts_rows_whose_values_the_other_table_lacks(spark: SparkSession) -> None:
    table = spark.createDataFrame([(1,), (2,), (2,), (None,), (3,)], "meter long")
    meters = spark.createDataFrame([(1,), (3,), (3,)], "meter long")
    references = Expectation("r", "warn", references=("silver.meters", ("meter",)))
    outcome = table_outcome(table, references, meters)
    assert (outcome.offending, outcome.sample) == (2, [{"meter": 2}])  # a NULL refers to nothing
    assert table_outcome(table, references, None).offending == 4  # before the table exists


def test_row_count_bounds_include_their_ends() -> None:
    at_least_one = Expectation("n", "warn", row_count=(1, None))
    assert not row_count_holds(at_least_one, 0)
    assert row_count_holds(at_least_one, 1)
    two_to_three = Expectation("n", "fail", row_count=(2, 3))
    assert [row_count_holds(two_to_three, n) for n in (1, 2, 3, 4)] == [False, True, True, False]
    assert row_count_holds(Expectation("n", "warn", row_count=(None, 0)), 0)


def test_a_check_that_is_no_condition_of_the_records_is_refused_before_any_write(
    spark: SparkSession,
) -> None:
    records = spark.createDataFrame([(1, 5, "a", None)], RECORDS)
    require_conditions(records, [POSITIVE, NAMED, Expectation("u", "warn", unique=("id",))])
    with pytest.raises(ExpectationError, match="'total' is a bigint, not a condition"):
        require_conditions(records, [Expectation("total", "warn", check="coalesce(kwh, 0)")])
    with pytest.raises(ExpectationError, match="'odd' cannot be evaluated on the records"):
        require_conditions(records, [Expectation("odd", "drop", check="no_such_function(kwh)")])
