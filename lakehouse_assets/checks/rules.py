"""What a table's own data-quality rules are: expectations (``checks.expectations``) that fail on
violation, as a pipeline declares them beside its tables (``silver/rules.py``, ``gold/rules.py``,
``sources/writing/rules.py``): its primary key (unique, not null), the values a column
accepts, and the conditions every row must meet. Each becomes a blocking Dagster asset check of
the table's asset (``checks.results``), evaluated on the table after each write; the rules
themselves are plain data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lakehouse_assets.checks.expectations import Expectation

QUARANTINE_RATE = "quarantine_rate"
PRIMARY_KEY_UNIQUE = "primary_key_unique"
PRIMARY_KEY_NOT_NULL = "primary_key_not_null"
ONE_CURRENT_VERSION = "one_current_version"  # of a key in an SCD2 table


def primary_key(*columns: str) -> tuple[Expectation, Expectation]:
    """The expectations of a primary key: no two rows share it, and none of it is null."""
    listed = ", ".join(f"`{column}`" for column in columns)
    return (
        Expectation(
            PRIMARY_KEY_UNIQUE,
            "fail",
            unique=columns,
            description=f"No two rows share the primary key ({listed}).",
        ),
        Expectation(
            PRIMARY_KEY_NOT_NULL,
            "fail",
            check=" AND ".join(f"`{column}` IS NOT NULL" for column in columns),
            description=f"No primary key column ({listed}) is null.",
        ),
    )


def accepted_values(column: str, values: Sequence[str]) -> Expectation:
    """``accepted_<column>``: the column is null or one of ``values``."""
    literals = ", ".join("'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
                         for value in values)  # fmt: skip
    return Expectation(
        f"accepted_{column}",
        "fail",
        check=f"`{column}` IN ({literals})",
        description=f"`{column}` is null or one of {', '.join(f'`{v}`' for v in values)}.",
    )


def condition(name: str, holds: str, description: str) -> Expectation:
    """A condition every row meets (a Spark SQL expression; null counts as met), in words."""
    return Expectation(name, "fail", check=holds, description=f"Every row: {description}.")


@dataclass(frozen=True)
class TableRules:
    """The rules of one table: expectations of the ``check`` and ``unique`` kinds that fail on
    violation, so each blocks the tables downstream when it breaks."""

    expectations: tuple[Expectation, ...]
    # The key fixes the day partition a row is in, so a run's rows can clash only with rows of
    # the days it wrote: the rules are evaluated on those days (``results.check_results``).
    key_fixes_day: bool = False

    def __post_init__(self) -> None:
        for expectation in self.expectations:
            if expectation.on_violation != "fail" or not (expectation.check or expectation.unique):
                raise ValueError(f"A table's rule is a check or unique that fails: {expectation}")

    @property
    def keys(self) -> tuple[str, ...]:
        """The table's primary key (empty without one)."""
        return next((e.unique for e in self.expectations if e.name == PRIMARY_KEY_UNIQUE), ())

    def check_names(self) -> list[str]:
        """The names of the asset checks these rules make, in their declared order."""
        return [expectation.name for expectation in self.expectations]
