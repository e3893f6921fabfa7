"""Reconciliation between layers on hand-built tables: what is missing, and where."""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakehouse_assets.checks.reconciliation import (
    RECONCILED_WITH_BRONZE,
    bronze_reconciliation,
    table_reconciliation,
)

QUARANTINE = "source string, partition int, offset long, raw binary, reason string"
KAFKA_REJECT = ("bpm", 0, 7, b"{oops", "malformed json")
FILE_REJECT = ("gym-1.csv", None, None, b"a,b", "missing login")  # files have no offsets


def test_every_record_in_silver_or_quarantine(spark: SparkSession) -> None:
    accepted = spark.createDataFrame([(1, "a"), (2, "b")], "id long, name string")
    rejected = spark.createDataFrame([KAFKA_REJECT, FILE_REJECT], QUARANTINE)
    silver = spark.createDataFrame([(1, "a"), (2, "newer b"), (3, "c")], "id long, name string")

    outcome = bronze_reconciliation(
        "t", accepted, silver, ["id"], rejected, "t_quarantine", rejected
    )
    assert (outcome.name, outcome.passed, outcome.sample) == (RECONCILED_WITH_BRONZE, True, [])

    lost_row = silver.where("id != 2")
    outcome = bronze_reconciliation("t", accepted, lost_row, ["id"], rejected, "q", rejected)
    assert (outcome.offending, outcome.sample) == (1, [{"missing_from": "t", "row": '{"id":2}'}])

    lost_reject = rejected.where("partition IS NOT NULL")  # the file's reject, matched on nulls
    outcome = bronze_reconciliation("t", accepted, silver, ["id"], rejected, "q", lost_reject)
    assert outcome.offending == 1 and outcome.sample[0]["missing_from"] == "q"
    assert '"source":"gym-1.csv"' in outcome.sample[0]["row"]


def test_workout_bpm_holds_every_expected_reading(spark: SparkSession) -> None:
    schema = "user_id long, workout_id long, session_id long, time long"
    expected = spark.createDataFrame([(1, 1, 1, 10), (1, 1, 1, 20)], schema)
    keys = ["user_id", "workout_id", "session_id", "time"]
    assert table_reconciliation("readings", "workout_bpm", expected, expected, keys).passed
    partial = expected.where("time = 10")
    outcome = table_reconciliation("readings", "workout_bpm", expected, partial, keys)
    assert (outcome.name, outcome.offending) == ("readings", 1)
    assert outcome.sample[0]["missing_from"] == "workout_bpm"
