"""Tables' rules as Dagster asset checks: the specs an asset declares, and the results it yields
after writing its table. Every rule blocks: a failure stops the assets downstream (in the same
run, and in the automation through ``all_deps_blocking_checks_passed``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.checks.outcome import Outcome
from lakehouse_assets.checks.rules import QUARANTINE_RATE, TableRules
from lakehouse_assets.checks.transforms import count_offending, evaluate
from lakehouse_assets.constants import asset_key
from resources import LakeResource, delta
from resources.delta import PartitionFilters
from resources.settings import quarantine_warn_rate


def check_specs(key: dg.AssetKey, rules: TableRules | None) -> list[dg.AssetCheckSpec]:
    """The blocking asset checks of the table of asset ``key``."""
    if rules is None:
        return []
    return [
        dg.AssetCheckSpec(e.name, asset=key, blocking=True, description=e.describe())
        for e in rules.expectations
    ]


def markdown(sample: list[dict[str, Any]]) -> str:
    columns = list(sample[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for row in sample]
    return "\n".join(lines)


def _result(
    key: dg.AssetKey, outcome: Outcome, scope: dict[str, Any] | None = None
) -> dg.AssetCheckResult:
    metadata: dict[str, Any] = {"offending_rows": outcome.offending, **(scope or {})}
    if outcome.sample:
        metadata["sample"] = dg.MetadataValue.md(markdown(outcome.sample))
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=outcome.name,
        passed=outcome.passed,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata=metadata,
    )


def check_results(
    lake: LakeResource,
    spark: SparkSession,
    layer: str,
    table: str,
    rules: TableRules | None,
    written: PartitionFilters | None = None,
    batch: DataFrame | None = None,
    batch_offending: Mapping[str, int] | None = None,
) -> list[dg.AssetCheckResult]:
    """The checks of ``<layer>.<table>`` evaluated on its current snapshot; none when it has no
    ``rules``.

    With ``batch`` (``written_rows``: rows the run wrote that stand for the table) the rules are
    counted on it, and when none fails on it none fails on the table: the table is read only to
    count and show a failure. With ``written`` (the day partitions a run wrote: ``checked_days``)
    and rules whose key fixes the day, only those partitions are read, so a check's cost follows
    the run's data. ``batch_offending``: the rules' counts on ``batch``, when the caller counted
    them with its own query (``checks.transforms.offending_counts``)."""
    if rules is None or not rules.check_names():
        return []
    key = asset_key(layer, table)
    if not lake.exists(layer, table):  # nothing written yet: nothing can break a rule
        return [dg.AssetCheckResult(asset_key=key, check_name=n, passed=True)
                for n in rules.check_names()]  # fmt: skip
    if batch is not None and batch_offending is None:
        batch_offending = count_offending(batch, rules)
    if batch is not None and not any((batch_offending or {}).values()):
        scope = {"evaluated_on": "the rows this run wrote"}
        return [_result(key, Outcome(name, 0, []), scope) for name in rules.check_names()]
    partitions = written if rules.key_fixes_day else None
    rows = lake.read(spark, layer, table, partitions=partitions)
    metadata = {"partitions": delta.predicate(partitions)} if partitions else {}
    return [_result(key, outcome, metadata) for outcome in evaluate(rows, rules)]


def written_rows(
    context: dg.AssetExecutionContext, key: dg.AssetKey, rows: DataFrame | None, created: bool
) -> DataFrame | None:
    """``rows``, what a run's write took (checkpointed), when they stand for the table in its
    checks: when the rules held on the table before the write and hold on ``rows``, they hold
    on the table after it. So it is for rows merged by the rules' key (a batch unique by the
    key keeps the table so; rows not taken, deleted or replaced left rows that held) or
    replacing the days they are of, where the key fixes the day. The rules held before when
    the write ``created`` the table, or no blocking check failed at its latest write; else
    (a table never written by an asset, or failing) None: the checks read the table."""
    if rows is None or not (created or _failed_at_latest(context.instance, key) == []):
        return None
    return rows


def checked_days(
    context: dg.AssetExecutionContext, key: dg.AssetKey, written: PartitionFilters | None
) -> PartitionFilters | None:
    """The partitions the checks of a write of ``key`` are evaluated on: those it ``written``,
    unless a blocking check of the table failed on its latest write (then None: the whole table,
    so that a table mended by this write unblocks what reads it, and one still broken anywhere
    stays blocked)."""
    if written is None or failed_upstream_checks(context.instance, [key]):
        return None
    return written


def quarantine_rate_spec(key: dg.AssetKey) -> dg.AssetCheckSpec:
    """The warning check of a quarantine table: the share of a run's records it took."""
    return dg.AssetCheckSpec(
        QUARANTINE_RATE,
        asset=key,
        description="Warns when more than LAKEHOUSE_QUARANTINE_WARN_RATE of the records a run "
        "read were rejected to this table.",
    )


def quarantine_rate_result(key: dg.AssetKey, rejected: int, read: int) -> dg.AssetCheckResult:
    """Whether the run's ``rejected`` records of the ``read`` stay within the warning rate."""
    limit = quarantine_warn_rate()
    rate = rejected / read if read else 0.0
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=QUARANTINE_RATE,
        passed=rate <= limit,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"rejected": rejected, "read": read, "rate": rate, "warn_above": limit},
    )


def reconciliation_spec(key: dg.AssetKey, name: str, description: str) -> dg.AssetCheckSpec:
    """A blocking reconciliation check (``checks.reconciliation``) of the table of ``key``."""
    return dg.AssetCheckSpec(name, asset=key, blocking=True, description=description)


def reconciliation_result(key: dg.AssetKey, outcome: Outcome) -> dg.AssetCheckResult:
    """A reconciliation's outcome: the rows missing, and a sample of them with where."""
    return _result(key, outcome)


def failed_upstream_checks(
    instance: dg.DagsterInstance, upstream: Iterable[dg.AssetKey]
) -> list[str]:
    """The blocking checks that failed on the latest write of each ``upstream`` asset, as
    ``<asset>:<check>`` (the checks are evaluated in the run that writes the table)."""
    return sorted(failed for key in upstream for failed in _failed_at_latest(instance, key) or [])


def _failed_at_latest(instance: dg.DagsterInstance, key: dg.AssetKey) -> list[str] | None:
    """The blocking checks that failed on the latest write of ``key``; None before any."""
    latest = instance.get_latest_materialization_event(key)
    if latest is None:
        return None
    failed: list[str] = []
    events = instance.all_logs(latest.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    for entry in events:
        evaluation = entry.dagster_event.event_specific_data if entry.dagster_event else None
        if (
            isinstance(evaluation, dg.AssetCheckEvaluation)
            and evaluation.asset_key == key
            and evaluation.blocking
            and not evaluation.passed
        ):
            failed.append(f"{key.to_user_string()}:{evaluation.check_name}")
    return failed


def require_upstream_checks_passed(context: dg.AssetExecutionContext) -> None:
    """Refuse to compute an asset whose direct upstream tables failed a blocking check on their
    latest write (as the automation does with ``all_deps_blocking_checks_passed``), so that
    manual runs and backfills respect the checks too.

    Raises:
        dg.Failure: naming each failed check; its table must be written again and pass.
    """
    upstream = set(context.assets_def.dependency_keys) - set(context.assets_def.keys)
    failed = failed_upstream_checks(context.instance, sorted(upstream, key=str))
    if failed:
        raise dg.Failure(
            description=f"Blocking checks failed upstream: {', '.join(failed)}. Write those "
            "tables again once their data (or rule) is fixed: this asset runs when their "
            "checks pass.",
            metadata={"failed_checks": dg.MetadataValue.json(failed)},
        )


NOT_EMPTY = "not_empty"


def not_empty_spec(key: dg.AssetKey) -> dg.AssetCheckSpec:
    """The warning check that a table has rows once a table it reads from has rows."""
    return dg.AssetCheckSpec(
        NOT_EMPTY,
        asset=key,
        description="Warns when this table has no rows while a table it is computed from has "
        "rows: every upstream record was rejected, filtered out or is outside the days "
        "written.",
    )


def not_empty_result(
    lake: LakeResource, key: dg.AssetKey, upstream: Iterable[dg.AssetKey]
) -> dg.AssetCheckResult:
    """Whether the table of ``key`` has rows, or every ``upstream`` table is empty too (row
    counts from the Delta logs' file statistics: no data is read)."""
    rows = lake.row_count(*key.path)
    upstream_rows = {k.to_user_string(): lake.row_count(*k.path) for k in upstream}
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=NOT_EMPTY,
        passed=rows > 0 or not any(upstream_rows.values()),
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"rows": rows, "upstream_rows": dg.MetadataValue.json(upstream_rows)},
    )
