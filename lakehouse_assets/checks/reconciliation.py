"""Reconciliation between layers: rows that must reach a table from the tables it is made of,
and did not. Pure Spark; ``results.reconciliation_result`` makes a Dagster check of it.

- ``reconciled_with_bronze`` (each parsed silver table): every record a run reads from bronze is,
  after the run's writes, in the silver table (its key: newest wins, so the row may hold a newer
  record of the key; a key whose newest event is a delete is expected absent) or in the source's
  quarantine (its coordinates and bytes). Every bronze record is read by exactly one run (the
  runs' markers), so over the runs every bronze record is accounted for. A run's own commits
  answer it first, by their operation metrics (``refinement.parsed``); the lookup here counts and
  shows the missing records when they do not.
- a derived table's (``table_reconciliation``): every row the table's upstream gives it,
  computed afresh, is in the table (which is maintained incrementally); the pipeline names the
  check and says what it covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.checks.outcome import SAMPLE_ROWS, Outcome

RECONCILED_WITH_BRONZE = "reconciled_with_bronze"
QUARANTINE_IDENTITY = ("source", "partition", "offset", "raw")  # offsets are null for files
BRONZE_RECONCILIATION = (
    "Every record a run reads from bronze is, after its writes, in this table (by key; a key "
    "whose newest event is a delete excepted) or in the source's quarantine (by coordinates and "
    "bytes). Evaluated from the operation metrics of the run's commits; the records are looked "
    "up in both tables when those disagree."
)


def missing(expected: DataFrame, actual: DataFrame, columns: Sequence[str]) -> DataFrame:
    """The rows of ``expected`` with no row of ``actual`` equal on ``columns`` (nulls equal).
    (An anti join only asks whether a match exists: ``actual`` is not made distinct first, which
    would cost an aggregation of the whole table.)"""
    present = actual.select(*[F.col(c).alias(f"_present_{c}") for c in columns])
    matches = [F.col(c).eqNullSafe(F.col(f"_present_{c}")) for c in columns]
    return expected.select(*columns).join(present, reduce(lambda a, b: a & b, matches), "left_anti")


def _outcome(name: str, absent: dict[str, DataFrame]) -> Outcome:
    """``absent``: table it is missing from -> the missing rows. Counted in one query; a sample
    (each row as JSON, with where it is missing) in one more when any is missing."""
    tagged = [
        rows.select(F.lit(table).alias("missing_from"), F.to_json(F.struct("*")).alias("row"))
        for table, rows in absent.items()
    ]
    union = reduce(DataFrame.unionByName, tagged)
    counts = union.groupBy("missing_from").count().collect()
    offending = sum(int(row["count"]) for row in counts)
    sample = [r.asDict() for r in union.limit(SAMPLE_ROWS).collect()] if offending else []
    return Outcome(name, offending, sample)


def bronze_reconciliation(
    silver_table: str,
    accepted: DataFrame,
    silver: DataFrame,
    keys: Sequence[str],
    rejected: DataFrame,
    quarantine_table: str,
    quarantine: DataFrame,
) -> Outcome:
    """``accepted``: the keys the run's valid records leave in silver; ``rejected``: the run's
    rejects in the quarantine's shape."""
    absent = {
        silver_table: missing(accepted, silver, keys),
        quarantine_table: missing(rejected, quarantine, QUARANTINE_IDENTITY),
    }
    return _outcome(RECONCILED_WITH_BRONZE, absent)


def table_reconciliation(
    name: str, table: str, expected: DataFrame, held: DataFrame, keys: Sequence[str]
) -> Outcome:
    """The check ``name``: the rows of ``expected`` (``table``'s rows computed afresh from its
    upstream) missing from ``held`` (the table's rows of the same scope, or more), by ``keys``."""
    return _outcome(name, {table: missing(expected, held, keys)})
