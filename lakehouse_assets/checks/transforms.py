"""Pure Spark evaluation of a table's rules (``checks.rules``): how many rows break each one, all
counted in one aggregation over the table, and a few of the offending rows of a rule that fails."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.checks.expectations import any_null, violates
from lakehouse_assets.checks.outcome import SAMPLE_ROWS, Outcome
from lakehouse_assets.checks.rules import TableRules


def offending_conditions(rules: TableRules) -> dict[str, Column]:
    """Check name -> the condition under which a row breaks a ``check`` rule (null counts as
    met, as in SQL's CHECK constraints)."""
    return {e.name: violates(e) for e in rules.expectations if e.check is not None}


def unique_rules(rules: TableRules) -> dict[str, tuple[tuple[str, ...], Column]]:
    """Check name -> (columns, rows considered) of each ``unique`` rule: the rows it names
    (``where``) without a null in the columns (NULL equals nothing, as in SQL's UNIQUE)."""
    unique = {}
    for expectation in rules.expectations:
        if expectation.unique:
            where = F.coalesce(F.expr(expectation.where or "true"), F.lit(False))
            unique[expectation.name] = (expectation.unique, where & ~any_null(expectation.unique))
    return unique


def offending_counts(rules: TableRules) -> dict[str, Column]:
    """Check name -> the aggregation counting the rows that break it (uniqueness: the rows
    beyond the first of each repeated value), in the rules' order."""
    conditions = offending_conditions(rules)
    unique = unique_rules(rules)
    counts = {}
    for name in rules.check_names():
        if name in conditions:
            counts[name] = F.sum(F.when(conditions[name], 1).otherwise(0))
        else:
            columns, considered = unique[name]
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
    """A few of the rows breaking rule ``name``: whole rows for a ``check``; the repeated values
    and how often each occurs for a ``unique``."""
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
