"""Expectations a user declares on a table, and what a broken one does: ``warn`` keeps the
violating rows and counts them, ``drop`` sends them to the source's quarantine with the reason
``expectation <name>``, ``fail`` counts them, then fails the step and blocks the tables
downstream (the rows are kept: data already accepted is never lost).

Four kinds: ``check``, a Spark SQL condition of each row (null counts as met, as in SQL's CHECK
constraints); ``unique``, columns no two rows share; ``references``, columns whose values must
be in another table; ``row_count``, bounds on the table's rows. A ``check`` is counted on the
records a run reads; the others on the table after the run's write. Only a ``check`` may drop:
the others are facts of the whole table, not of one record.

The declaration's side (parsing, errors with file and line) is ``sources.expectations``; this
module is plain data and pure Spark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from lakehouse_assets.checks.outcome import SAMPLE_ROWS, Outcome

Action = Literal["warn", "drop", "fail"]
REASON_PREFIX = "expectation "  # a dropped record's reason: "expectation <name>"


class ExpectationError(ValueError):
    """An expectation that cannot be evaluated on its records or table: a column it names is
    not there, or its check is not a condition of them."""


@dataclass(frozen=True)
class Expectation:
    """One declared expectation: its name, what a violation does, and exactly one kind:
    ``check`` (a condition of each row), ``unique`` (columns), ``references`` (a table
    ``layer.name`` and the columns looked up in it, named alike in both), ``row_count``
    (``(min, max)``, either None). ``where``: the rows a ``unique`` considers (a condition;
    default all); ``description``: what it asks, in words, in place of the sentence made of it.
    A table's own rules are expectations too (``checks.rules``)."""

    name: str
    on_violation: Action
    check: str | None = None
    unique: tuple[str, ...] = ()
    references: tuple[str, tuple[str, ...]] | None = None
    row_count: tuple[int | None, int | None] | None = None
    where: str | None = None
    description: str | None = None

    @property
    def per_row(self) -> bool:
        """Whether it judges each record by itself (a ``check``), so a run's records count."""
        return self.check is not None

    @property
    def reason(self) -> str:
        """The quarantine reason of a record it drops."""
        return f"{REASON_PREFIX}{self.name}"

    def describe(self) -> str:
        """What it asks of the table and what a violation does, in a sentence."""
        if self.description is not None:
            return self.description
        if self.check is not None:
            asks = f"Every row: `{self.check}` (null counts as met)"
        elif self.unique:
            asks = f"No two rows without nulls share {_listed(self.unique)}"
            asks += f" among those where `{self.where}`" if self.where else ""
        elif self.references is not None:
            table, columns = self.references
            asks = f"Each {_listed(columns)} without nulls is in `{table}`"
        else:
            low, high = self.row_count or (None, None)
            asks = f"The table has {_bounds(low, high)} rows"
        return f"{asks}. On violation: {self.on_violation} (declared)."


def _listed(columns: Sequence[str]) -> str:
    return ", ".join(f"`{column}`" for column in columns)


def _bounds(low: int | None, high: int | None) -> str:
    if high is None:
        return f"at least {low}"
    return f"at most {high}" if low is None else f"{low} to {high}"


def violates(expectation: Expectation) -> Column:
    """The condition under which a row breaks a ``check`` expectation."""
    assert expectation.check is not None
    return ~F.coalesce(F.expr(expectation.check), F.lit(True))


def require_conditions(records: DataFrame, expectations: Sequence[Expectation]) -> None:
    """Refuse ``check`` expectations that are not boolean conditions of ``records`` (one
    analysis of all of them, before anything is written).

    Raises:
        ExpectationError: naming the expectation and what Spark says of its check.
    """
    checks = [expectation for expectation in expectations if expectation.per_row]
    for expectation in checks:
        try:
            [field] = records.select(F.expr(expectation.check or "")).schema.fields
        except PySparkException as error:
            first = str(error).strip().splitlines()[0]
            raise ExpectationError(
                f"The check of the expectation {expectation.name!r} cannot be evaluated on "
                f"the records: {first}. Fix the declaration; the records wait in bronze."
            ) from None
        if not isinstance(field.dataType, BooleanType):
            raise ExpectationError(
                f"The check of the expectation {expectation.name!r} is a "
                f"{field.dataType.simpleString()}, not a condition. Fix the declaration; the "
                "records wait in bronze."
            )


def mark_dropped(
    records: DataFrame, expectations: Sequence[Expectation], reason: str, judged: Column
) -> DataFrame:
    """``records`` with the ``reason`` of each record that a ``drop`` expectation removes: among
    those ``judged`` (valid so far: no reason yet, and a record that changes a row), the first
    such expectation it breaks, in declared order."""
    drops = [e for e in expectations if e.on_violation == "drop"]
    if not drops:
        return records
    dropped = F.lit(None).cast("string")
    for expectation in reversed(drops):
        dropped = F.when(violates(expectation), F.lit(expectation.reason)).otherwise(dropped)
    return records.withColumn(reason, F.when(judged, dropped).otherwise(F.col(reason)))


def run_outcomes(
    records: DataFrame,
    expectations: Sequence[Expectation],
    reason: str,
    kept: Column,
    columns: Sequence[str] | None = None,
) -> dict[str, Outcome]:
    """Each ``check`` expectation's outcome on the records of a run, counted in one aggregation:
    the records it dropped (their ``reason`` is its) or, warn and fail, those it finds among the
    records ``kept`` (valid, and changing a row); a few of them shown by their ``columns``
    (default: all but bytes)."""
    concerned = {
        e.name: F.col(reason) == e.reason if e.on_violation == "drop" else kept & violates(e)
        for e in expectations
        if e.per_row
    }
    if not concerned:
        return {}
    counts = [
        F.count(F.when(rows, True)).alias(f"_{n}") for n, rows in enumerate(concerned.values())
    ]
    row = records.agg(*counts).first()
    assert row is not None  # a global aggregation has one row
    outcomes = {}
    for n, (name, rows) in enumerate(concerned.items()):
        shown = []
        if row[n]:  # the columns looked up only then: one round trip less
            columns = columns or [c for c, kind in records.dtypes if kind != "binary"]
            quoted = [F.col(f"`{column}`") for column in columns]  # a name may hold a dot
            shown = records.where(rows).select(*quoted).limit(SAMPLE_ROWS).collect()
        outcomes[name] = Outcome(name, int(row[n]), [r.asDict() for r in shown])
    return outcomes


def table_outcome(
    table: DataFrame, expectation: Expectation, referenced: DataFrame | None
) -> Outcome:
    """A ``unique`` or ``references`` expectation's outcome on ``table``: the rows beyond the
    first of each repeated value, or the rows whose values ``referenced`` (the other table; None
    before it exists) lacks; a few of the values either way. A row with a null in the columns
    breaks neither (SQL's UNIQUE and FOREIGN KEY do the same)."""
    columns = list(expectation.unique or (expectation.references or ("", ()))[1])
    present = table.where(~any_null(columns))  # NULL equals nothing, as in SQL's UNIQUE
    if expectation.where:
        present = present.where(F.coalesce(F.expr(expectation.where), F.lit(False)))
    if expectation.unique:
        repeated = present.groupBy(*columns).count().where("count > 1")
        found = repeated.agg(F.sum(F.col("count") - 1)).first()
        offending = int(found[0] or 0) if found is not None else 0
        sample = repeated.orderBy(F.desc("count"), *columns)
    else:
        missing = present if referenced is None else present.join(
            referenced.select(*columns).distinct(), columns, "left_anti"
        )  # fmt: skip
        offending = missing.count()
        sample = missing.select(*columns).distinct().orderBy(*columns)
    shown = sample.limit(SAMPLE_ROWS).collect() if offending else []
    return Outcome(expectation.name, offending, [row.asDict() for row in shown])


def require_table_columns(expectation: Expectation, table: DataFrame, name: str) -> None:
    """Refuse to evaluate a ``unique`` or ``references`` expectation on the table ``name``
    (``table``: the expectation's own, or the one it references) when it lacks a column the
    expectation names (compared as Spark does, regardless of case).

    Raises:
        ExpectationError: naming the columns missing and the columns there are.
    """
    named = expectation.unique or (expectation.references or ("", ()))[1]
    present = {column.lower() for column in table.columns}
    missing = sorted(column for column in named if column.lower() not in present)
    if missing:
        raise ExpectationError(
            f"The expectation {expectation.name!r} names {', '.join(missing)}, which "
            f"{name} does not have (its columns: {', '.join(table.columns)}). Fix the "
            "declaration: the rows are written, and the next run checks them."
        )


def row_count_holds(expectation: Expectation, rows: int) -> bool:
    """Whether a table of ``rows`` rows is within a ``row_count`` expectation's bounds."""
    low, high = expectation.row_count or (None, None)
    return (low is None or rows >= low) and (high is None or rows <= high)


def any_null(columns: Sequence[str]) -> Column:
    """Whether any of ``columns`` is null in a row."""
    nulls = F.lit(False)
    for column in columns:
        nulls = nulls | F.col(column).isNull()
    return nulls
