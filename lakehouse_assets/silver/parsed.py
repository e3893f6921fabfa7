"""Silver tables parsed from one bronze source each, with a quarantine table for the records
that break its rules (``validation``): the multi-asset writing both, and the five of the
fitness pipeline."""

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import dagster as dg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.automation import silver_automation
from lakehouse_assets.checks.reconciliation import (
    RECONCILED_WITH_BRONZE,
    bronze_reconciliation,
)
from lakehouse_assets.checks.results import (
    checked_days,
    not_empty_result,
    not_empty_spec,
    quarantine_rate_result,
    quarantine_rate_spec,
    reconciliation_result,
    reconciliation_spec,
    written_rows,
)
from lakehouse_assets.checks.transforms import Outcome
from lakehouse_assets.constants import (
    BRONZE,
    DATE,
    FITNESS_OWNERS,
    GYM_LOGS,
    HEART_RATE,
    LANDING_GYM_LOGINS,
    LANDING_REGISTERED_USERS,
    QUARANTINE_SUFFIX,
    SILVER,
    TOPIC_BPM,
    TOPIC_USER_INFO,
    TOPIC_WORKOUT,
    USER_PROFILE,
    USERS,
    WORKOUTS,
    asset_key,
    asset_tags,
    writer_pool,
)
from lakehouse_assets.migrations import require_current
from lakehouse_assets.profiling.store import profile_after_write
from lakehouse_assets.silver import transforms
from lakehouse_assets.silver.accounting import accounted_by_the_writes, batch_counts
from lakehouse_assets.silver.incremental import (
    SILVER_KINDS,
    SilverConfig,
    read_changes,
)
from lakehouse_assets.silver.layout import dated, days_of, layout, read_days
from lakehouse_assets.silver.tables import silver_check_results, silver_check_specs, silver_metadata
from lakehouse_assets.table_metadata import code_references
from lakehouse_assets.validation import csv_quarantine, kafka_quarantine, valid
from resources import LakeResource, SparkResource
from resources.delta_merge import Condition, later
from resources.lake import Markers

Transform = Callable[[DataFrame], DataFrame]


@dataclass(frozen=True)
class ParsedTable:
    """A silver table parsed from one bronze source, with a quarantine table for rejects."""

    table: str
    source: str
    parse: Transform
    quarantine: Transform
    shape: Transform
    keys: tuple[str, ...]
    update_when: Condition | None = None
    # Recompute each changed key from all its valid source records (newest-wins with deletes).
    from_history: bool = False

    @property
    def quarantine_table(self) -> str:
        return f"{self.source}{QUARANTINE_SUFFIX}"


def _write_quarantine(
    lake: LakeResource, spec: ParsedTable, parsed: DataFrame, markers: Markers, rejected: int
) -> int:
    """Append the ``rejected`` records of ``parsed`` (checkpointed) to the quarantine table."""
    if lake.holds(SILVER, spec.quarantine_table, markers):
        return 0
    require_current(lake, SILVER, spec.quarantine_table)
    if rejected or not lake.exists(SILVER, spec.quarantine_table):
        lake.append(SILVER, spec.quarantine_table, spec.quarantine(parsed), markers=markers)
    return rejected


def _rows_to_merge(
    lake: LakeResource, spark: SparkSession, spec: ParsedTable, parsed: DataFrame
) -> DataFrame:
    accepted = valid(parsed)
    if spec.from_history:
        changed = accepted.select(*spec.keys).distinct()
        history = valid(spec.parse(lake.read(spark, BRONZE, spec.source)))
        accepted = history.join(changed, list(spec.keys), "left_semi")
    return dated(spec.table, spec.shape(accepted))


def _rebuild(lake: LakeResource, spec: ParsedTable, parsed: DataFrame, markers: Markers) -> None:
    """Replace both tables with what all of bronze (``parsed``) makes of them, a commit each."""
    lake.replace(SILVER, spec.quarantine_table, spec.quarantine(parsed), markers)
    lake.replace(SILVER, spec.table, all_rows(spec, parsed), markers, layout(spec.table))


def all_rows(spec: ParsedTable, parsed: DataFrame) -> DataFrame:
    """The table's rows from all of bronze (``parsed``)."""
    rows = dated(spec.table, spec.shape(valid(parsed)))
    if spec.from_history:  # the newest event of a deleted key is its delete: no row
        rows = rows.where(~F.col("deleted")).drop("deleted")
    return rows


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
    accepted = merged if merged is not None else _rows_to_merge(lake, spark, spec, parsed)
    if spec.from_history:  # a key whose newest event is its delete has no row
        accepted = accepted.where(~F.col("deleted"))
    if layout(spec.table):
        silver = read_days(lake, spark, spec.table, days if days is not None else days_of(accepted))
    else:
        silver = lake.read(spark, SILVER, spec.table)
    return bronze_reconciliation(
        spec.table, accepted, silver, spec.keys, spec.quarantine(parsed), spec.quarantine_table,
        lake.read(spark, SILVER, spec.quarantine_table),
    )  # fmt: skip


def parsed_table_asset(spec: ParsedTable) -> dg.AssetsDefinition:
    """The multi-asset writing ``silver.<table>`` and ``silver.<source>_quarantine``."""
    table_key = asset_key(SILVER, spec.table)
    quarantine_key = asset_key(SILVER, spec.quarantine_table)
    upstream = asset_key(BRONZE, spec.source)

    common = {
        "deps": [upstream],
        "group_name": SILVER,
        "kinds": SILVER_KINDS,
        "automation_condition": silver_automation,
        "owners": FITNESS_OWNERS,
        "tags": asset_tags(SILVER, spec.source),
        "metadata": code_references(parse=spec.parse, shape=spec.shape),
    }

    @dg.multi_asset(
        name=f"silver_{spec.table}",
        pool=writer_pool(SILVER, spec.table),
        specs=[
            dg.AssetSpec(
                table_key,
                description=spec.shape.__doc__,
                **common,
            ),
            dg.AssetSpec(
                quarantine_key,
                **common,
                description=f"Rejected `{spec.source}` records: original bytes (`raw`) and their "
                "readable text (`raw_text`), reason, coordinates.",
            ),
        ],
        check_specs=[
            *silver_check_specs(spec.table),
            reconciliation_spec(table_key, RECONCILED_WITH_BRONZE),
            not_empty_spec(table_key),
            quarantine_rate_spec(quarantine_key),
        ],
    )
    def _asset(
        context: dg.AssetExecutionContext,
        config: SilverConfig,
        spark: SparkResource,
        lake: LakeResource,
    ) -> Iterator[dg.MaterializeResult]:
        session = spark.get_session()
        changes, markers, fresh = read_changes(
            lake, session, spec.table, (BRONZE, spec.source), config.full_refresh
        )
        # Materialized once: the writes and checks below each read it without reading bronze.
        parsed = spec.parse(changes).localCheckpoint(eager=True)
        rows = None
        if not config.full_refresh and (fresh or not lake.exists(SILVER, spec.table)):
            # Computed before the merge: it may read the rows the merge replaces.
            rows = _rows_to_merge(lake, session, spec, parsed).localCheckpoint()
        read, rejected, merged = batch_counts(
            parsed, rows, spec.table, spec.from_history, lake.version(SILVER, spec.table)
        )
        quarantine_before = lake.version(SILVER, spec.quarantine_table)
        if config.full_refresh:
            _rebuild(lake, spec, parsed, markers)
            quarantined = rejected
        else:
            quarantined = _write_quarantine(lake, spec, parsed, markers, rejected)
        if rows is not None:
            lake.merge(
                SILVER, spec.table, rows, spec.keys, markers=markers, update_when=spec.update_when,
                delete_flag="deleted" if spec.from_history else None,
                partition_by=layout(spec.table),
            )  # fmt: skip
        # The days the merge wrote (its rows' own: a key's day is its row's); None: every day.
        days = merged.days if merged is not None else None
        accounted = (
            read > 0
            and merged is not None
            and accounted_by_the_writes(
                lake, spec.table, spec.quarantine_table, merged, quarantined, quarantine_before
            )
        )
        # Else looked up in the tables: which records are missing, and where.
        reconciled = (
            Outcome(RECONCILED_WITH_BRONZE, 0, [])
            if accounted
            else _reconcile(lake, session, spec, parsed, read, rows, days)
        )
        days_written = [(DATE, "in", days)] if days is not None else None
        written = checked_days(context, table_key, days_written)
        batch = None
        if rows is not None and merged is not None:  # merged by the rules' key (PARSED_TABLES)
            live = rows.where(~F.col("deleted")) if spec.from_history else rows
            batch = written_rows(context, table_key, live, created=merged.table_before is None)
        yield dg.MaterializeResult(
            asset_key=table_key,
            metadata={
                **silver_metadata(lake, spec.table),
                "upstream_version": dg.MetadataValue.text(str(_of(markers))),
                **profile_after_write(lake, session, SILVER, spec.table),
            },
            check_results=[
                *silver_check_results(lake, session, spec.table, written, batch),
                reconciliation_result(table_key, reconciled),
                not_empty_result(lake, table_key, [upstream]),
            ],
        )
        yield dg.MaterializeResult(
            asset_key=quarantine_key,
            metadata={
                **silver_metadata(lake, spec.quarantine_table),
                "new_rejects": quarantined,
                **profile_after_write(lake, session, SILVER, spec.quarantine_table),
            },
            check_results=[quarantine_rate_result(quarantine_key, quarantined, read)],
        )

    return _asset


def _of(markers: Markers) -> int:
    return next(iter(markers.values()))


PARSED_TABLES = (
    ParsedTable(USERS, LANDING_REGISTERED_USERS, transforms.parse_registered_users, csv_quarantine,
                transforms.users, ("user_id", "registration_timestamp")),
    ParsedTable(GYM_LOGS, LANDING_GYM_LOGINS, transforms.parse_gym_logins, csv_quarantine,
                transforms.gym_logs, ("mac_address", "gym", "login"),
                update_when=later("logout")),
    ParsedTable(USER_PROFILE, TOPIC_USER_INFO, transforms.parse_user_info, kafka_quarantine,
                transforms.latest_profiles, ("user_id",), from_history=True),
    ParsedTable(HEART_RATE, TOPIC_BPM, transforms.parse_bpm, kafka_quarantine,
                transforms.heart_rate, ("device_id", "time")),
    ParsedTable(WORKOUTS, TOPIC_WORKOUT, transforms.parse_workout, kafka_quarantine,
                transforms.workouts, ("user_id", "workout_id", "session_id", "action")),
)  # fmt: skip
