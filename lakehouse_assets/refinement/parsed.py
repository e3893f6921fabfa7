"""Silver tables parsed by fixed rules from one bronze table each, with the source's quarantine
table for the records that break them (``validation``): the multi-asset of one a pipeline
declares (``parsed_table.ParsedTable``), on the silver step (``step``).

A run parses the bronze changes it has not consumed, quarantines the rejects, merges the rest
by the table's keys (or, for a table kept from its history, recomputes each changed key from all
of its bronze records), and checks that every record it read is in one of the two tables.
"""

import dagster as dg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.checks.expectation_results import expectation_results, expectation_specs
from lakehouse_assets.checks.expectations import run_outcomes
from lakehouse_assets.checks.outcome import Outcome
from lakehouse_assets.checks.reconciliation import (
    BRONZE_RECONCILIATION,
    RECONCILED_WITH_BRONZE,
    bronze_reconciliation,
)
from lakehouse_assets.checks.results import (
    check_results,
    check_specs,
    checked_days,
    reconciliation_result,
    reconciliation_spec,
    written_rows,
)
from lakehouse_assets.constants import DATE, SILVER, asset_key, asset_tags
from lakehouse_assets.refinement.accounting import accounted_by_the_writes, batch_counts
from lakehouse_assets.refinement.changes import SILVER_ASSET
from lakehouse_assets.refinement.column_types import follow_declared_types
from lakehouse_assets.refinement.layout import days_of, layout, read_days
from lakehouse_assets.refinement.parsed_table import ParsedTable, all_rows, rows_to_merge
from lakehouse_assets.refinement.replay_log import log_replayed, read_again, replay_metadata
from lakehouse_assets.refinement.step import (
    Refinement,
    refined_check_specs,
    refined_specs,
    write_quarantine,
)
from lakehouse_assets.refinement.step_asset import SilverStep, StepRun, silver_step_asset
from lakehouse_assets.table_metadata import code_references, table_metadata
from lakehouse_assets.validation import QUARANTINE_AND_REPLAYS, REASON
from resources import LakeResource


def _reconcile(
    lake: LakeResource,
    spark: SparkSession,
    spec: ParsedTable,
    parsed: DataFrame,
    read: int,
    merged: DataFrame | None,
    days: list[str] | None,
) -> Outcome:
    """Whether each of the run's bronze records (``parsed``, ``read`` of them) is now in silver
    or quarantine, looked up in both tables; ``merged``: the rows the run merged
    (``_rows_to_merge``), None when it merged none. A run that read no record has none to
    account for: no query. In a table laid out by days, a row is looked for on its own day only
    (where the merge put it: ``lake.merge`` looks for a key in the partitions of the batch's
    rows), so the check reads the run's days (``days``: those of ``merged``, when known), not
    the table's history."""
    if not read:
        return Outcome(RECONCILED_WITH_BRONZE, 0, [])
    accepted = merged if merged is not None else rows_to_merge(lake, spark, spec, parsed)
    if spec.from_history:  # a key whose newest event is its delete has no row
        accepted = accepted.where(~F.col("deleted"))
    if spec.dated_by:
        silver = read_days(lake, spark, spec.table, days if days is not None else days_of(accepted))
    else:
        silver = lake.read(spark, SILVER, spec.table)
    return bronze_reconciliation(
        spec.table, accepted, silver, spec.keys, spec.quarantine(parsed), spec.quarantine_table,
        lake.read(spark, SILVER, spec.quarantine_table),
    )  # fmt: skip


class ParsedStep(SilverStep):
    """The silver step of a table parsed by fixed rules (``spec``)."""

    def __init__(self, spec: ParsedTable) -> None:
        self.spec = spec
        self.table, self.source = spec.table, spec.source
        self.expectations = spec.expectations
        self.quarantine_upgrade = spec.quarantine_upgrade

    def specs(self) -> list[dg.AssetSpec]:
        spec = self.spec
        return refined_specs(
            spec.table,
            spec.source,
            spec.description or spec.shape.__doc__,
            owners=list(spec.owners) or None,
            tags={**asset_tags(SILVER, spec.source), **(spec.tags or {})},
            metadata=code_references(parse=spec.parse, shape=spec.shape),
            **SILVER_ASSET,
        )

    def check_specs(self) -> list[dg.AssetCheckSpec]:
        spec, table_key = self.spec, asset_key(SILVER, self.spec.table)
        return refined_check_specs(
            spec.table,
            spec.source,
            [
                *check_specs(table_key, spec.rules),
                *expectation_specs(table_key, spec.expectations),
                reconciliation_spec(table_key, RECONCILED_WITH_BRONZE, BRONZE_RECONCILIATION),
            ],
        )

    def refine(self, run: StepRun) -> Refinement:
        return _refine(run, self.spec)


def parsed_table_asset(spec: ParsedTable) -> dg.AssetsDefinition:
    """The multi-asset writing ``silver.<table>`` and ``silver.<source>_quarantine``."""
    return silver_step_asset(ParsedStep(spec))


def _refine(run: StepRun, spec: ParsedTable) -> Refinement:
    """Bring ``silver.<table>`` and the source's quarantine up to date with the run's changes
    (with ``run.rebuild``, all of bronze: each table replaced in one commit; ``run.replayed``:
    the quarantined records a replay reads, then logged in the quarantine's replay log after
    the table's write), and check them."""
    context, lake, spark, changes = run.context, run.lake, run.spark, run.changes
    rebuild, replayed = run.rebuild, run.replayed
    table_key = asset_key(SILVER, spec.table)
    stored: dict[str, str] = {}  # columns stored wider than declared, and their types
    if spec.column_types and not rebuild:
        stored = follow_declared_types(
            lake, spark, spec.table, spec.column_types, layout(spec.dated_by)
        )
    # Materialized once: the writes and checks below each read it without reading bronze.
    parsed = spec.parse(changes.rows).localCheckpoint(eager=True)
    rows = None
    if not rebuild and (changes.fresh or not lake.exists(SILVER, spec.table)):
        # Computed before the merge: it may read the rows the merge replaces.
        rows = rows_to_merge(lake, spark, spec, parsed)
        for column, kind in stored.items():
            rows = rows.withColumn(column, F.col(column).cast(kind))
        rows = rows.localCheckpoint()
    read, reasons, merged = batch_counts(
        parsed, rows, bool(spec.dated_by), spec.from_history, lake.version(SILVER, spec.table),
        spec.rules,
    )  # fmt: skip
    rejected = sum(reasons.values())
    quarantine_before = lake.version(SILVER, spec.quarantine_table)
    quarantined = replayed_count = 0
    if replayed is None:
        quarantined = write_quarantine(
            lake,
            spec.source,
            spec.quarantine(parsed),
            changes.markers,
            rebuild,
            rejected,
            spec.quarantine_upgrade,
        )
    if rebuild:
        lake.replace(
            SILVER, spec.table, all_rows(spec, parsed), changes.markers, layout(spec.dated_by)
        )
    if rows is not None and spec.append and replayed is None:
        if not lake.holds(SILVER, spec.table, changes.markers):  # else a re-run's: written
            lake.append(SILVER, spec.table, rows, layout(spec.dated_by), changes.markers)
    elif rows is not None:
        # A replay inserts an appended table's rows by their keys: a second replay adds none.
        insert_only = spec.insert_only or spec.append
        update_when = None if insert_only else spec.update_when
        if replayed is not None and not insert_only and not spec.from_history:
            update_when = spec.replay_when or update_when
            # A table that keeps no order of its rows takes a replayed one for a new key only.
            insert_only = update_when is None
        lake.merge(
            SILVER, spec.table, rows, spec.keys, markers=changes.markers,
            update_when=update_when, delete_flag="deleted" if spec.from_history else None,
            partition_by=layout(spec.dated_by), insert_only=insert_only,
        )  # fmt: skip
    if replayed is not None:  # after the table's write: a record is logged once it is there
        replayed_count, quarantined = log_replayed(
            lake, replayed, spec.quarantine(read_again(parsed)), (read - rejected, rejected)
        )
    # The days the merge wrote (its rows' own: a key's day is its row's); None: every day.
    days = merged.days if merged is not None else None
    accounted = (
        read > 0
        and merged is not None
        and accounted_by_the_writes(
            lake,
            spec.table,
            spec.quarantine_table,
            merged,
            # A replay's rejects are the quarantine's already: it appends none.
            quarantined if replayed is None else 0,
            quarantine_before,
        )
    )
    # Else looked up in the tables: which records are missing, and where.
    reconciled = (
        Outcome(RECONCILED_WITH_BRONZE, 0, [])
        if accounted
        else _reconcile(lake, spark, spec, parsed, read, rows, days)
    )
    days_written = [(DATE, "in", days)] if days is not None else None
    written = checked_days(context, table_key, days_written)
    batch = None
    if rows is not None and merged is not None:  # merged by spec.keys, its rules' key
        live = rows.where(~F.col("deleted")) if spec.from_history else rows
        batch = written_rows(context, table_key, live, created=merged.table_before is None)
    return Refinement(
        read=read,
        rejected=quarantined,
        # How its open records changed: the rejects appended, or the replay's outcome.
        open_change=replayed.open_change(read, reasons)
        if replayed
        else (None if rebuild else reasons),
        quarantine_before=quarantine_before,
        replay=replayed is not None,
        replays_before=replayed.replays_before if replayed else None,
        metadata={
            **table_metadata(
                lake, SILVER, spec.table, spec.descriptions or {}, lineage=spec.lineage
            ),
            "upstream_version": dg.MetadataValue.text(changes.reached),
        },
        checks=[
            *check_results(
                lake,
                spark,
                SILVER,
                spec.table,
                spec.rules,
                written,
                batch,
                merged.offending if merged is not None else None,
            ),
            reconciliation_result(table_key, reconciled),
            *expectation_results(
                lake,
                spark,
                spec.table,
                spec.expectations,
                run_outcomes(parsed, spec.expectations, REASON, F.col(REASON).isNull()),
            ),
        ],
        quarantine_metadata={
            **table_metadata(
                lake,
                SILVER,
                spec.quarantine_table,
                QUARANTINE_AND_REPLAYS,
                lineage=spec.quarantine_lineage,
            ),
            **(
                replay_metadata(replayed_count, quarantined)
                if replayed is not None
                else {"new_rejects": quarantined}
            ),
        },
    )
