"""A declared source's read batch into its silver table (read with the source's schema:
``decoding.reading``, inferred, persisted, evolved): rejects to the quarantine table, the rest
kept as the mode says.

Each write carries the transaction marker of the bronze version read, so a re-run after a crash
neither loses nor repeats a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.checks.expectations import mark_dropped, require_conditions, run_outcomes
from lakehouse_assets.checks.outcome import Outcome
from lakehouse_assets.constants import SILVER
from lakehouse_assets.refinement.replay_log import log_replayed, read_again
from lakehouse_assets.refinement.step import write_quarantine
from lakehouse_assets.refinement.step_asset import StepRun
from lakehouse_assets.sources.declaration.expectations import require_columns
from lakehouse_assets.sources.declaration.model import CDC_MODES, SourceDeclaration
from lakehouse_assets.sources.decoding import debezium
from lakehouse_assets.sources.decoding import schema as types
from lakehouse_assets.sources.decoding.reader import (
    DELETED,
    OP,
    ORDER_KIND,
    SEQUENCE,
    SKIPPED,
    UNAVAILABLE,
)
from lakehouse_assets.sources.decoding.reading import Read
from lakehouse_assets.sources.writing import cdc, transforms, writes
from lakehouse_assets.validation import REASON, kafka_quarantine


@dataclass
class Refined:
    """What one run did to a declared source's silver tables."""

    read: int = 0
    rows: int = 0
    rejected: int = 0
    schema_inferred: bool = False
    added: list[str] = field(default_factory=list)
    widened: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)  # held Debezium's placeholder somewhere
    truncates: int = 0  # Debezium truncates applied
    skipped: int = 0  # records that change no row: tombstones, heartbeats, transaction markers
    waiting: bool = False  # no valid record yet: the batch is read again with the next (``_waits``)
    merged: DataFrame | None = None  # the rows a merge took (``writes.keep``)
    expected: dict[str, Outcome] = field(default_factory=dict)  # the run's ``check``s
    replayed: int | None = None  # a replay's records that passed (``rejected``: the others)

    def metadata(self) -> dict[str, Any]:
        return {
            "records_read": self.read,
            "waiting_for_keys": self.waiting,
            "rows_written": self.rows,
            "schema_inferred": self.schema_inferred,
            "columns_added": ", ".join(self.added) or "-",
            "columns_widened": ", ".join(self.widened) or "-",
            "columns_unavailable": ", ".join(self.unavailable) or "-",
            "truncates_applied": self.truncates,
            "records_skipped": self.skipped,
        }


def _waits(source: SourceDeclaration, columns: Sequence[str]) -> bool:
    """Whether the batch waits, written nowhere, to be read again with the next one: a CDC
    source's batch before any valid record has shown its schema the key columns (the batch
    then holds no valid row: no record, only rejects). Its rejects reach the quarantine with
    the first batch that has the keys, once. (A ``cdc-scd2`` source's batch without a valid
    record before its table exists waits too: ``writes.validity``.)"""
    return source.mode in CDC_MODES and not set(source.keys) <= set(columns)


def refine(run: StepRun, source: SourceDeclaration, read: Read) -> Refined:
    """Bring ``silver.<source>`` and its quarantine (and deletes) tables up to date with the
    run's changes, ``read`` (``reading.read_growing``); with ``run.rebuild``, the changes are all
    of bronze and each table is replaced in one commit (readers see the old table until then);
    ``run.replayed``: the quarantined records a replay reads, logged in the quarantine's replay
    log after the table's writes."""
    lake, spark, markers, rebuild, replayed = (
        run.lake, run.spark, run.markers, run.rebuild, run.replayed
    )  # fmt: skip
    done = Refined()
    schema, typed = read.schema, read.records
    done.schema_inferred, done.added, done.widened = read.inferred, read.added, read.widened
    done.read, fill, done.truncates, done.skipped = _batch_facts(typed, source)
    if done.widened and not rebuild and lake.exists(SILVER, source.name):
        writes.widen_table(lake, spark, source, schema)
    columns = [column for column, _, _ in types.leaves(schema, source.flatten, source.separator)]
    waits = _waits(source, columns)
    validity = None
    if source.mode == "cdc-scd2" and not waits:
        validity = writes.validity(run, source, typed)
        waits = validity is None  # no order value yet to type valid_from by
    if waits and replayed is not None:
        raise dg.Failure(
            f"silver.{source.name} cannot take the replayed records yet: no valid record has "
            "shown its key columns or order values. The records stay in the quarantine."
        )
    if waits:
        done.waiting = True
        return done
    if validity is not None:
        typed = _order_of_another_kind(typed, source.order_by, validity)
    typed, done.expected = _expected(source, typed, columns)
    if replayed is None:
        done.rejected = write_quarantine(
            lake, source.name, kafka_quarantine(typed), markers, rebuild
        )
    valid = typed.where(F.col(REASON).isNull() & ~F.col(SKIPPED))
    fill = done.unavailable = [column for column in fill if column in columns]
    keep = [DELETED, *([OP, SEQUENCE] if source.mode in CDC_MODES else [])]
    # The placeholders' column, kept while some column needs filling (else the plans of the
    # writes are those of a batch without placeholders).
    keep += [UNAVAILABLE] if fill else []
    rows = transforms.refined(valid, columns, source.partition_columns, keep)
    deleting = rows
    if source.truncate == "apply":
        rows, deleting = writes.apply_truncates(run, source, rows, done.truncates > 0)
    if rebuild:
        done.rows = writes.replace(lake, source, rows, markers, validity, fill)
    elif replayed is not None or not lake.holds(SILVER, source.name, markers):
        conformed = writes.conform(lake, source, rows)
        done.rows, done.merged = writes.keep(run, source, conformed, validity, fill)
    if source.mode in CDC_MODES:
        writes.record_deletes(run, source, deleting)
    if replayed is not None:  # after the tables' writes: a record is logged once it is there
        parsed = kafka_quarantine(read_again(typed))
        done.replayed, done.rejected = log_replayed(lake, replayed, parsed)
    return done


def _expected(
    source: SourceDeclaration, typed: DataFrame, columns: Sequence[str]
) -> tuple[DataFrame, dict[str, Outcome]]:
    """``typed`` with the records its ``drop`` expectations remove given their reason
    (checkpointed: the quarantine and the table see one verdict), and the run's outcome of each
    ``check`` expectation (a delete, a skipped record is not judged).

    Raises:
        ExpectationError: a check names a column the records lack, or is not a condition.
    """
    expectations = [declared.expectation() for declared in source.expectations]
    if not any(expectation.per_row for expectation in expectations):
        return typed, {}
    require_columns(source.name, source.expectations, columns)
    require_conditions(typed, expectations)
    judged = F.col(REASON).isNull() & ~F.col(SKIPPED) & ~F.col(DELETED)
    marked = mark_dropped(typed, expectations, REASON, judged)
    if any(expectation.on_violation == "drop" for expectation in expectations):
        marked = marked.localCheckpoint(eager=True)
    return marked, run_outcomes(marked, expectations, REASON, judged, columns)


def _batch_facts(typed: DataFrame, source: SourceDeclaration) -> tuple[int, list[str], int, int]:
    """The records read and, for CDC, the columns some of them hold Debezium's placeholder in,
    the truncates read and the records skipped: one query (the rows are checkpointed)."""
    if source.mode not in CDC_MODES:
        return typed.count(), [], 0, 0
    listed = F.array_distinct(F.flatten(F.collect_set(UNAVAILABLE)))
    truncates = F.count(F.when(F.col(OP) == debezium.TRUNCATE, True))
    skipped = F.count(F.when(F.col(SKIPPED), True))
    facts = [F.count(F.lit(1)), listed, truncates, skipped]
    row = typed.agg(*[fact.alias(f"_{n}") for n, fact in enumerate(facts)]).first()
    assert row is not None  # an aggregate without grouping has one row
    return row[0], sorted(row[1] or []), row[2], row[3]


def _order_of_another_kind(typed: DataFrame, order_by: str, validity: str) -> DataFrame:
    """``typed`` with a reason for each record whose order value ``valid_from`` of type
    ``validity`` cannot hold (say a date-time where it holds integers)."""
    kind = F.col(ORDER_KIND)
    other = F.col(REASON).isNull() & ~F.col(SKIPPED) & ~cdc.holds(validity, kind)
    reason = F.concat(F.lit(f"{order_by} is a "), kind, F.lit(f"; valid_from holds {validity}"))
    return typed.withColumn(REASON, F.when(other, reason).otherwise(F.col(REASON)))
