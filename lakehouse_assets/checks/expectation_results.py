"""Declared expectations as Dagster asset checks of their table: a ``fail`` one blocks (ERROR),
``warn`` and ``drop`` ones warn. Each result carries its counts as metadata (plotted run after
run in the UI) and a sample of the violating rows; a step whose ``fail`` expectation broke
fails after its results are recorded (``fail_broken``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.checks.expectations import (
    Expectation,
    ExpectationError,
    require_table_columns,
    row_count_holds,
    table_outcome,
)
from lakehouse_assets.checks.outcome import Outcome
from lakehouse_assets.checks.results import markdown
from lakehouse_assets.constants import SILVER, asset_key
from resources import LakeResource

SEVERITY = {"warn": dg.AssetCheckSeverity.WARN, "drop": dg.AssetCheckSeverity.WARN,
            "fail": dg.AssetCheckSeverity.ERROR}  # fmt: skip


def expectation_specs(
    key: dg.AssetKey, expectations: Sequence[Expectation]
) -> list[dg.AssetCheckSpec]:
    """One asset check of the table of ``key`` per expectation; those that fail block."""
    return [
        dg.AssetCheckSpec(
            e.name, asset=key, blocking=e.on_violation == "fail", description=e.describe()
        )
        for e in expectations
    ]


def expectation_results(
    lake: LakeResource,
    spark: SparkSession,
    table: str,
    expectations: Sequence[Expectation],
    run: Mapping[str, Outcome],
) -> list[dg.AssetCheckResult]:
    """The results of ``expectations`` on ``silver.<table>`` after a run: a ``check``'s from
    ``run`` (its records' counts and samples; none when the run read nothing), the others
    evaluated on the table as it now is."""
    key = asset_key(SILVER, table)
    results = []
    for expectation in expectations:
        metadata: dict[str, Any] = {"on_violation": expectation.on_violation}
        if expectation.per_row:
            outcome = run.get(expectation.name, Outcome(expectation.name, 0, []))
            counted = (
                "dropped_records" if expectation.on_violation == "drop" else "violating_records"
            )
            metadata[counted] = outcome.offending
        elif expectation.row_count is not None:
            rows = lake.row_count(SILVER, table)
            broken = not row_count_holds(expectation, rows)
            outcome = Outcome(expectation.name, int(broken), [])
            metadata["rows"] = rows
        elif not lake.exists(SILVER, table):  # nothing written yet: no row to break it
            outcome = Outcome(expectation.name, 0, [])
            metadata["violating_rows"] = 0
        else:
            try:
                outcome = _table_outcome(lake, spark, table, expectation)
            except ExpectationError as error:  # a declaration to fix: the run's writes stand
                outcome = Outcome(expectation.name, 1, [])
                metadata["error"] = str(error)
            metadata["violating_rows"] = outcome.offending
        if outcome.sample:
            metadata["sample"] = dg.MetadataValue.md(markdown(outcome.sample))
        results.append(
            dg.AssetCheckResult(
                asset_key=key,
                check_name=expectation.name,
                passed=outcome.passed,
                severity=SEVERITY[expectation.on_violation],
                metadata=metadata,
            )
        )
    return results


def _table_outcome(
    lake: LakeResource, spark: SparkSession, table: str, expectation: Expectation
) -> Outcome:
    """A ``unique`` or ``references`` expectation's outcome on ``silver.<table>``, the columns
    it names looked for first in both tables."""
    rows = lake.read(spark, SILVER, table)
    require_table_columns(expectation, rows, f"{SILVER}.{table}")
    referenced = None
    if expectation.references is not None:
        other_layer, other = expectation.references[0].split(".", 1)
        if lake.exists(other_layer, other):
            referenced = lake.read(spark, other_layer, other)
            require_table_columns(expectation, referenced, expectation.references[0])
    return table_outcome(rows, expectation, referenced)


def fail_broken(
    results: Sequence[dg.AssetCheckResult], expectations: Sequence[Expectation]
) -> None:
    """Fail the step when an expectation that fails on violation broke (its results and the
    table's write are recorded first: call this after yielding them).

    Raises:
        dg.Failure: naming each broken expectation and its count.
    """
    failing = {e.name for e in expectations if e.on_violation == "fail"}
    broken = [r for r in results if r.check_name in failing and not r.passed]
    if broken:
        named = ", ".join(
            f"{r.check_name} ({_count(r.metadata)})" for r in broken if r.check_name is not None
        )
        raise dg.Failure(
            description=f"Expectations that fail on violation broke: {named}. The run's rows "
            "are written; the tables downstream wait until a run passes them.",
            metadata={"broken_expectations": [r.check_name for r in broken]},
        )


def _count(metadata: Mapping[str, Any]) -> str:
    for name in ("violating_records", "violating_rows", "rows"):
        if name in metadata:
            value = metadata[name]
            return f"{getattr(value, 'value', value)} {name.replace('_', ' ')}"
    return "broken"
