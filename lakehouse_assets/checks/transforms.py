"""Pure Spark evaluation of a table's rules: how many rows break each one, all counted in one
aggregation over the table, and a few of the offending rows of a rule that fails."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.checks.rules import PRIMARY_KEY_NOT_NULL, PRIMARY_KEY_UNIQUE, TableRules

SAMPLE_ROWS = 5  # offending rows shown with a failed check


@dataclass(frozen=True)
class Outcome:
    """One rule's result: the rows breaking it (for a uniqueness rule: the rows beyond the first
    of each repeated value) and a sample of them."""

    name: str
    offending: int
    sample: list[dict[str, Any]]

    @property
    def passed(self) -> bool:
        return self.offending == 0


def offending_conditions(rules: TableRules) -> dict[str, Column]:
    """Check name -> the condition under which a row breaks a row-level rule (not-null key,
    accepted values, conditions). A null condition means met, as in SQL's CHECK constraints."""
    offends: dict[str, Column] = {}
    if rules.keys:
        offends[PRIMARY_KEY_NOT_NULL] = _any_null(rules.keys)
    for column, values in rules.accepted.items():
        offends[f"accepted_{column}"] = F.col(column).isNotNull() & ~F.col(column).isin(*values)
    for name, condition in rules.conditions.items():
        offends[name] = ~F.coalesce(F.expr(condition.holds), F.lit(True))
    return offends


def _any_null(columns: tuple[str, ...]) -> Column:
    nulls = [F.col(column).isNull() for column in columns]
    found = nulls[0]
    for null in nulls[1:]:
        found = found | null
    return found


def unique_rules(rules: TableRules) -> dict[str, tuple[tuple[str, ...], Column]]:
    """Check name -> (columns, rows considered) of each uniqueness rule."""
    unique = {PRIMARY_KEY_UNIQUE: (rules.keys, F.lit(True))} if rules.keys else {}
    for name, (columns, where) in rules.unique_where.items():
        unique[name] = (columns, F.coalesce(F.expr(where), F.lit(False)))
    return unique


def offending_counts(rules: TableRules) -> dict[str, Column]:
    """Check name -> the aggregation counting the rows that break it (uniqueness: the rows
    beyond the first of each repeated value)."""
    counts = {
        name: F.sum(F.when(offends, 1).otherwise(0))
        for name, offends in offending_conditions(rules).items()
    }
    for name, (columns, considered) in unique_rules(rules).items():
        key = F.when(considered, F.struct(*columns))
        counts[name] = F.count(key) - F.count_distinct(key)
    return counts


def count_offending(rows: DataFrame, rules: TableRules) -> dict[str, int]:
    """Rows breaking each rule, in one aggregation over ``rows``."""
    counts = offending_counts(rules)
    if not counts:
        return {}
    result = rows.agg(*[count.alias(name) for name, count in counts.items()]).first()
    assert result is not None  # a global aggregation has one row
    return {name: int(result[name] or 0) for name in rules.check_names()}


def sample_offending(rows: DataFrame, rules: TableRules, name: str) -> list[dict[str, Any]]:
    """A few of the rows breaking rule ``name``: whole rows for a row-level rule; the repeated
    values and how often each occurs for a uniqueness rule."""
    unique = unique_rules(rules)
    if name in unique:
        columns, considered = unique[name]
        repeated = rows.where(considered).groupBy(*columns).count().where("count > 1")
        picked = repeated.orderBy(F.desc("count"), *columns).limit(SAMPLE_ROWS)
    else:
        picked = rows.where(offending_conditions(rules)[name]).limit(SAMPLE_ROWS)
    return [row.asDict() for row in picked.collect()]


def evaluate(rows: DataFrame, rules: TableRules) -> list[Outcome]:
    """Every rule's outcome on ``rows``: one aggregation, then one small query per failed rule."""
    counts = count_offending(rows, rules)
    return [
        Outcome(name, count, sample_offending(rows, rules, name) if count else [])
        for name, count in counts.items()
    ]
