"""The expectations a declared source states of its silver table (``expectations`` in its
declaration), checked when the declaration loads: a ``check`` that does not parse as one Spark
SQL condition of a row, a column the table does not have (when its fields are declared), a table
``references`` names that no pipeline or declaration has, an unknown action, or two expectations
of one name are refused with the file, line and field. What they do is ``checks.expectations``::

    expectations:
      - {name: kwh_not_negative, check: "kwh >= 0", on_violation: drop}
      - {name: one_reading_per_quarter, unique: [meter_id, quarter], on_violation: fail}
      - {name: meter_exists, references: {table: silver.meters, columns: [meter_id]}}
      - {name: enough_readings, row_count: {min: 1}, on_violation: warn}
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Sequence
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from lakehouse_assets.checks.expectations import Action, Expectation, ExpectationError
from lakehouse_assets.checks.reconciliation import RECONCILED_WITH_BRONZE
from lakehouse_assets.checks.results import NOT_EMPTY
from lakehouse_assets.checks.rules import (
    ONE_CURRENT_VERSION,
    PRIMARY_KEY_NOT_NULL,
    PRIMARY_KEY_UNIQUE,
)
from lakehouse_assets.sources.declaration.check_sql import check_columns
from lakehouse_assets.sources.declaration.errors import named_twice
from lakehouse_assets.sources.declaration.fields import Name

TABLE = re.compile(r"(bronze|silver|gold)\.[a-z][a-z0-9_]*")
COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _column(value: str) -> str:
    if not COLUMN.fullmatch(value):
        raise ValueError("must be a column name: letters, digits and _, not starting with a digit")
    return value


def _once(columns: tuple[str, ...]) -> tuple[str, ...]:
    twice = named_twice(columns)
    if twice is not None:
        raise ValueError(twice)
    return columns


# A column named by ``unique`` or ``references``: the table's own (``_kafka_offset`` too).
ColumnName = Annotated[str, AfterValidator(_column)]
Columns = Annotated[tuple[ColumnName, ...], AfterValidator(_once)]  # each named once
KINDS = ("check", "unique", "references", "row_count")
# The names of the checks a table has anyway (and ``accepted_<field>``).
BUILT_IN_CHECKS = (
    PRIMARY_KEY_UNIQUE, PRIMARY_KEY_NOT_NULL, NOT_EMPTY, RECONCILED_WITH_BRONZE, ONE_CURRENT_VERSION
)  # fmt: skip


class References(BaseModel):
    """A ``references`` expectation: the table looked in, and the columns (named alike in
    both tables)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    table: str = Field(description="<layer>.<table>, e.g. silver.meters.")
    columns: Columns = Field(min_length=1, description="Looked up together.")

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        if not TABLE.fullmatch(value):
            raise ValueError("must be <layer>.<table> with layer bronze, silver or gold")
        return value


class RowCount(BaseModel):
    """A ``row_count`` expectation's bounds (either may be left out)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: int | None = Field(default=None, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounds(self) -> RowCount:
        if self.min is None and self.max is None:
            raise ValueError("set min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


class DeclaredExpectation(BaseModel):
    """One expectation of a declared source's silver table: a name, exactly one kind, and what
    a violation does (default: warn)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name = Field(description="The asset check's name; unique in the declaration.")
    check: str | None = Field(default=None, description="A Spark SQL condition of each row.")
    unique: Columns = Field(default=(), description="Columns no two rows share.")
    references: References | None = Field(default=None, description="Values found elsewhere.")
    row_count: RowCount | None = Field(default=None, description="Bounds on the table's rows.")
    on_violation: Action = Field(
        default="warn",
        description="warn: keep and count; drop: to the quarantine (check only); fail: count, "
        "then fail the step and block downstream.",
    )

    @field_validator("check")
    @classmethod
    def _check(cls, value: str | None) -> str | None:
        if value is not None:
            check_columns(value)
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> DeclaredExpectation:
        kinds = [kind for kind in KINDS if getattr(self, kind) not in (None, ())]
        if len(kinds) != 1:
            raise ValueError(f"set exactly one of {', '.join(KINDS)} (found {len(kinds)})")
        if self.on_violation == "drop" and kinds[0] != "check":
            raise ValueError(
                f"drop removes the records that break a check; a {kinds[0]} expectation is a "
                "fact of the whole table: warn or fail"
            )
        return self

    def expectation(self) -> Expectation:
        """What the checks evaluate."""
        references = self.references
        bounds = self.row_count
        return Expectation(
            self.name,
            self.on_violation,
            check=self.check,
            unique=self.unique,
            references=(references.table, references.columns) if references else None,
            row_count=(bounds.min, bounds.max) if bounds else None,
        )


def expectation_errors(
    expectations: Sequence[DeclaredExpectation],
    record_columns: Collection[str] | None,
    table_columns: Collection[str] | None,
) -> Iterator[tuple[str, str]]:
    """Rules across a declaration's expectations, as ``(field, message)``: names unique, and,
    when the columns are known (declared fields), each column named is one of them: a check's
    among the ``record_columns``, the others' among the ``table_columns``."""
    names = [expectation.name for expectation in expectations]
    for n, expectation in enumerate(expectations):
        if names.index(expectation.name) != n:
            yield (
                f"expectations.{n}.name",
                f"the expectation {expectation.name!r} is declared twice",
            )
        if expectation.name in BUILT_IN_CHECKS or expectation.name.startswith("accepted_"):
            yield (
                f"expectations.{n}.name",
                f"{expectation.name!r} is the name of a check the table has anyway: choose another",
            )
        if record_columns is None or table_columns is None:
            continue
        for kind, columns, known in _named_columns(expectation, record_columns, table_columns):
            lower = {column.lower() for column in known}  # Spark's names ignore case
            for column in sorted(c for c in set(columns) if c.lower() not in lower):
                yield (
                    f"expectations.{n}.{kind}",
                    f"names the column {column!r}, which the table does not have; it has "
                    f"{', '.join(known)}",
                )


def _named_columns(
    expectation: DeclaredExpectation,
    record_columns: Collection[str],
    table_columns: Collection[str],
) -> Iterator[tuple[str, Collection[str], Collection[str]]]:
    if expectation.check is not None:
        yield "check", check_columns(expectation.check), record_columns
    yield "unique", expectation.unique, table_columns
    if expectation.references is not None:
        yield "references", expectation.references.columns, table_columns


def require_columns(
    source: str, expectations: Sequence[DeclaredExpectation], columns: Collection[str]
) -> None:
    """Refuse a run whose records (of ``columns``, an inferred schema) lack a column that one of
    the ``check`` ``expectations`` of the ``source`` names (a declaration's fields are checked at
    load).

    Raises:
        ExpectationError: naming the expectation, the columns and the columns there are.
    """
    for expectation in expectations:
        if expectation.check is None:
            continue
        present = {column.lower() for column in columns}  # Spark's names ignore case
        missing = sorted(c for c in check_columns(expectation.check) if c.lower() not in present)
        if missing:
            raise ExpectationError(
                f"The expectation {expectation.name!r} of the source {source!r} names "
                f"{', '.join(missing)}, which its records do not have (their columns: "
                f"{', '.join(columns)}). Fix the check in the declaration; the records wait in "
                "bronze and are read once it is fixed."
            )


def reference_errors(
    expectations: Sequence[DeclaredExpectation], tables: Collection[str]
) -> Iterator[tuple[str, str]]:
    """A ``references`` to a table that is not among ``tables`` (``<layer>.<table>``), as
    ``(field, message)``."""
    for n, expectation in enumerate(expectations):
        references = expectation.references
        if references is not None and references.table not in tables:
            yield (
                f"expectations.{n}.references.table",
                f"no pipeline or declared source has the table {references.table!r}",
            )
