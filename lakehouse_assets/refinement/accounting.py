"""What a parsed silver step's writes took, told from the step's own counts and the operation
metrics Delta recorded in its commits: ``reconciled_with_bronze`` passes on these without a query
(``refinement.parsed``); only when they disagree are the records looked up in the tables."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.checks.rules import TableRules
from lakehouse_assets.checks.transforms import offending_counts
from lakehouse_assets.constants import DATE, SILVER
from lakehouse_assets.validation import REASON
from resources import LakeResource


@dataclass(frozen=True)
class MergedBatch:
    """What a run merged: its rows' days (None for a table not laid out by days), how many rows,
    how many of them deletes (``from_history``), the table's version before the run's writes
    (None: the merge created it), and how many of its live rows (not deletes) break each of the
    table's rules (``offending``)."""

    days: list[str] | None
    rows: int
    deletes: int
    table_before: int | None
    offending: dict[str, int] = field(default_factory=dict)

    @property
    def expected_written(self) -> int:
        """The rows the merge's commit records: its source rows (``numSourceRows``), or the
        rows it inserted when it created the table (an append: the deletes are not written)."""
        return self.rows if self.table_before is not None else self.rows - self.deletes


BRANCH = "_branch"  # which aggregation of ``batch_counts`` a row of its result is


def batch_counts(
    parsed: DataFrame,
    rows: DataFrame | None,
    by_day: bool,
    from_history: bool,
    table_before: int | None,
    rules: TableRules | None = None,
) -> tuple[int, dict[str, int], MergedBatch | None]:
    """The records of ``parsed`` (a run's bronze records, read) and those rejected, per reason
    (``reason``), what ``rows`` (the run's rows to merge, with a ``deleted`` flag when
    ``from_history``; None when it merges none) hold, and how many of their live rows break
    each of ``rules``: one query for all. ``by_day``: whether the table is laid out by days
    (its rows' days are told); ``table_before``: the table's version before the run."""
    records = parsed.agg(F.count(F.lit(1)).alias("rows"))
    rejected = (
        parsed.where(F.col(REASON).isNotNull()).groupBy(REASON).agg(F.count(F.lit(1)).alias("rows"))
    )
    branches = [
        records.select(F.lit("parsed").alias(BRANCH), "*"),
        rejected.select(F.lit("rejected").alias(BRANCH), "*"),
    ]
    counts = offending_counts(rules) if rules is not None else {}
    if rows is not None:
        deleted = F.col("deleted") if from_history else F.lit(False)
        merged = rows.groupBy(*([DATE] if by_day else [])).agg(
            F.count(F.lit(1)).alias("rows"), F.count_if(deleted).alias("deletes")
        )
        branches.append(merged.select(F.lit("merged").alias(BRANCH), "*"))
        if counts:
            live = rows.where(~deleted).agg(
                *[count.alias(f"{OFFENDING}{name}") for name, count in counts.items()]
            )
            branches.append(live.select(F.lit("offending").alias(BRANCH), "*"))
    union = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), branches)
    summary = union.collect()
    (counted,) = [r for r in summary if r[BRANCH] == "parsed"]
    reasons = {r[REASON]: r["rows"] for r in summary if r[BRANCH] == "rejected"}
    if rows is None:
        return counted["rows"], reasons, None
    groups = [r for r in summary if r[BRANCH] == "merged"]
    offending = [r for r in summary if r[BRANCH] == "offending"]
    days = sorted(r[DATE].isoformat() for r in groups if r[DATE]) if by_day else None
    batch = MergedBatch(
        days=days,
        rows=sum(r["rows"] for r in groups),
        deletes=sum(r["deletes"] for r in groups),
        table_before=table_before,
        offending={n: int(offending[0][f"{OFFENDING}{n}"] or 0) for n in counts}
        if offending
        else {},
    )
    return counted["rows"], reasons, batch


OFFENDING = "_offending_"  # the prefix of a rule's count in ``batch_counts``'s query


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
