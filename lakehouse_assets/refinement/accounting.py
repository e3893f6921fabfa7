"""What a parsed silver step's writes took, told from the step's own counts and the operation
metrics Delta recorded in its commits: ``reconciled_with_bronze`` passes on these without a query
(``refinement.parsed``); only when they disagree are the records looked up in the tables."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.constants import DATE, SILVER
from lakehouse_assets.validation import REASON
from resources import LakeResource


@dataclass(frozen=True)
class MergedBatch:
    """What a run merged: its rows' days (None for a table not laid out by days), how many rows,
    how many of them deletes (``from_history``), and the table's version before the run's writes
    (None: the merge created it)."""

    days: list[str] | None
    rows: int
    deletes: int
    table_before: int | None

    @property
    def expected_written(self) -> int:
        """The rows the merge's commit records: its source rows (``numSourceRows``), or the
        rows it inserted when it created the table (an append: the deletes are not written)."""
        return self.rows if self.table_before is not None else self.rows - self.deletes


def batch_counts(
    parsed: DataFrame,
    rows: DataFrame | None,
    by_day: bool,
    from_history: bool,
    table_before: int | None,
) -> tuple[int, int, MergedBatch | None]:
    """The records of ``parsed`` (a run's bronze records, read) and those rejected (with a
    ``reason``), and what ``rows`` (the run's rows to merge, with a ``deleted`` flag when
    ``from_history``; None when it merges none) hold: one query for both. ``by_day``: whether
    the table is laid out by days (its rows' days are told); ``table_before``: the table's
    version before the run."""
    records = parsed.agg(F.count(F.lit(1)).alias("rows"), F.count(REASON).alias("rejected")).select(
        F.lit(True).alias("_parsed"), "*"
    )
    if rows is not None:
        deleted = F.col("deleted") if from_history else F.lit(False)
        merged = rows.groupBy(*([DATE] if by_day else [])).agg(
            F.count(F.lit(1)).alias("rows"), F.count_if(deleted).alias("deletes")
        )
        records = records.unionByName(
            merged.select(F.lit(False).alias("_parsed"), "*"), allowMissingColumns=True
        )
    summary = records.collect()
    (counted,) = [r for r in summary if r["_parsed"]]
    if rows is None:
        return counted["rows"], counted["rejected"], None
    groups = [r for r in summary if not r["_parsed"]]
    days = sorted(r[DATE].isoformat() for r in groups if r[DATE]) if by_day else None
    batch = MergedBatch(
        days=days,
        rows=sum(r["rows"] for r in groups),
        deletes=sum(r["deletes"] for r in groups),
        table_before=table_before,
    )
    return counted["rows"], counted["rejected"], batch


def accounted_by_the_writes(
    lake: LakeResource,
    table: str,
    quarantine_table: str,
    merged: MergedBatch,
    rejected: int,
    quarantine_before: int | None,
) -> bool:
    """Whether the run's own commits took every row it handed them, by their operation metrics
    (no query): the merge into ``silver.<table>`` every row of ``merged``, the append to
    ``silver.<quarantine_table>`` each of the ``rejected``. (Every record read is either valid
    or rejected: ``validation``.)"""
    if lake.rows_written(SILVER, table, merged.table_before) != merged.expected_written:
        return False
    return (
        not rejected or lake.rows_written(SILVER, quarantine_table, quarantine_before) == rejected
    )
