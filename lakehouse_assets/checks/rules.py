"""What a table's data-quality rules are: its primary key (unique, not null), the values a column
accepts, and the conditions every row must meet. Each pipeline declares its tables' rules beside
them (``silver/rules.py``, ``gold/rules.py``, ``sources/rules.py``); each rule becomes a Dagster
asset check of the table's asset (``checks/results.py``); the rules themselves are plain data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

QUARANTINE_RATE = "quarantine_rate"
PRIMARY_KEY_UNIQUE = "primary_key_unique"
PRIMARY_KEY_NOT_NULL = "primary_key_not_null"
ONE_CURRENT_VERSION = "one_current_version"  # of a key in an SCD2 table


@dataclass(frozen=True)
class Condition:
    """A condition every row must meet: ``holds`` is a Spark SQL expression; a row for which it
    is false is offending (null counts as met, as in SQL's CHECK constraints)."""

    holds: str
    description: str


@dataclass(frozen=True)
class TableRules:
    """The checks of one table. ``keys``: its primary key (checked unique and not null);
    ``accepted``: column -> the values it may hold (nulls aside); ``conditions``: check name ->
    a condition of every row. All of them block the tables downstream when they fail."""

    keys: tuple[str, ...] = ()
    accepted: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    conditions: Mapping[str, Condition] = field(default_factory=dict)
    # Check name -> (columns, condition): the columns are unique among the rows meeting it.
    unique_where: Mapping[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    # The key fixes the day partition a row is in, so a run's rows can clash only with rows of
    # the days it wrote: the rules are evaluated on those days (``results.check_results``).
    key_fixes_day: bool = False

    def check_names(self) -> list[str]:
        """The names of the asset checks these rules make, in a stable order."""
        names = [PRIMARY_KEY_UNIQUE, PRIMARY_KEY_NOT_NULL] if self.keys else []
        accepted = [f"accepted_{column}" for column in self.accepted]
        return [*names, *accepted, *self.conditions, *self.unique_where]
