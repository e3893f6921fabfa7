"""What a parsed step counts of its batch, and what its merge commit must record of its rows
(``refinement.accounting``)."""

from __future__ import annotations

from datetime import date

from pyspark.sql import SparkSession

from lakehouse_assets.checks.rules import (
    PRIMARY_KEY_NOT_NULL,
    PRIMARY_KEY_UNIQUE,
    TableRules,
    accepted_values,
    primary_key,
)
from lakehouse_assets.refinement.accounting import MergedBatch, batch_counts


def test_a_merge_into_a_table_records_every_source_row_deletes_included() -> None:
    batch = MergedBatch(days=["2025-01-01"], rows=5, deletes=2, table_before=3)
    assert batch.expected_written == 5  # numSourceRows: the deletes are source rows too


def test_a_merge_that_creates_the_table_appends_only_the_rows_kept() -> None:
    assert MergedBatch(days=None, rows=5, deletes=2, table_before=None).expected_written == 3
    # A first batch of deletes only (of keys never seen) writes an empty table: 0 rows.
    assert MergedBatch(days=None, rows=4, deletes=4, table_before=None).expected_written == 0
    assert MergedBatch(days=[], rows=0, deletes=0, table_before=None).expected_written == 0


def test_the_batch_and_the_rows_to_merge_are_counted_together(spark: SparkSession) -> None:
    parsed = spark.createDataFrame(
        [(1, None), (2, "no user_id"), (3, None), (4, "bad timestamp")], "id int, reason string"
    )
    rows = spark.createDataFrame(
        [(1, date(2025, 1, 2), False), (3, date(2025, 1, 1), True), (5, date(2025, 1, 2), False)],
        "id int, date date, deleted boolean",
    )
    read, rejected, batch = batch_counts(parsed, rows, True, True, 7)
    assert (read, rejected) == (4, {"no user_id": 1, "bad timestamp": 1})
    assert batch == MergedBatch(
        days=["2025-01-01", "2025-01-02"], rows=3, deletes=1, table_before=7
    )
    # A table not laid out by days; rows without a delete flag.
    _, _, undated = batch_counts(parsed, rows.drop("deleted"), False, False, None)
    assert undated == MergedBatch(days=None, rows=3, deletes=0, table_before=None)


def test_a_batch_that_merges_nothing_is_still_counted(spark: SparkSession) -> None:
    parsed = spark.createDataFrame([(1, "no user_id")], "id int, reason string")
    assert batch_counts(parsed, None, True, False, 2) == (1, {"no user_id": 1}, None)
    empty = spark.createDataFrame([], "id int, date date")
    assert batch_counts(parsed, empty, True, False, 2) == (
        1, {"no user_id": 1}, MergedBatch(days=[], rows=0, deletes=0, table_before=2)
    )  # fmt: skip
    nothing = parsed.limit(0)
    assert batch_counts(nothing, None, True, False, None) == (0, {}, None)


def test_the_rules_are_counted_on_the_live_rows_in_the_same_query(spark: SparkSession) -> None:
    parsed = spark.createDataFrame([(1, None)], "id int, reason string")
    rows = spark.createDataFrame(
        [
            (1, "start", False),
            (1, "stop", False),  # key 1 again: one row beyond the first
            (None, "start", False),  # a null key
            (2, "jump", False),  # not an accepted action
            (2, "jump", True),  # a delete: not a row of the table, not counted
            (3, None, False),  # null is accepted
        ],
        "id int, action string, deleted boolean",
    )
    rules = TableRules((*primary_key("id"), accepted_values("action", ("start", "stop"))))
    _, _, batch = batch_counts(parsed, rows, False, True, 1, rules)
    assert batch is not None and (batch.rows, batch.deletes) == (6, 1)
    assert batch.offending == {
        PRIMARY_KEY_UNIQUE: 1,
        PRIMARY_KEY_NOT_NULL: 1,
        "accepted_action": 1,
    }
    _, _, clean = batch_counts(parsed, rows.where("id = 3"), False, True, 1, rules)
    assert clean is not None and clean.offending == dict.fromkeys(rules.check_names(), 0)
