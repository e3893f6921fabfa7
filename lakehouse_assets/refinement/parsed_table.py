"""What a pipeline declares of a silver table parsed by fixed rules from one bronze table
(``ParsedTable``), and the rows its records make; the step that writes it is
``refinement.parsed``."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.checks.expectations import Expectation
from lakehouse_assets.checks.rules import TableRules
from lakehouse_assets.constants import BRONZE
from lakehouse_assets.migrations import Upgrade
from lakehouse_assets.refinement.layout import dated
from lakehouse_assets.refinement.step import quarantine_table
from lakehouse_assets.table_metadata import Column
from lakehouse_assets.validation import valid
from resources import LakeResource
from resources.delta_merge import Condition

Transform = Callable[[DataFrame], DataFrame]
Lineage = Mapping[str, tuple[Column, ...]]


@dataclass(frozen=True)
class ParsedTable:
    """A silver table parsed from one bronze source, with a quarantine table for rejects.

    ``parse``: bronze rows typed, each with a ``reason`` when it is rejected; ``quarantine``:
    the rejected ones in the quarantine's shape; ``shape``: the valid ones as the table's rows,
    merged by ``keys`` (an existing row is updated only when ``update_when`` holds, if given).
    ``rules``, ``descriptions``, ``lineage``: the table's checks and what its columns hold and
    come from; ``quarantine_lineage``: the quarantine's columns'."""

    table: str
    source: str
    parse: Transform
    quarantine: Transform
    shape: Transform
    keys: tuple[str, ...]
    update_when: Condition | None = None
    # Recompute each changed key from all its valid source records (newest-wins with deletes).
    from_history: bool = False
    # The column whose UTC date partitions the table (None: not laid out by days).
    dated_by: str | None = None
    # Every row is new (its key is its record's Kafka coordinates, which one run reads once):
    # appended, with no merge to look for the key in the table.
    append: bool = False
    # A key is its record's identity (a reading's device and time): a row, once in the table,
    # never changes, so only new keys are inserted (an insert-only merge, no file rewritten).
    insert_only: bool = False
    # The condition a replayed row must meet to replace its key's row (``refinement.replay``):
    # that it came later (default: ``update_when``; a table of ``append`` or ``insert_only``,
    # or with neither condition, inserts only the replayed rows whose keys it lacks; one kept
    # ``from_history`` recomputes each key from all of bronze).
    replay_when: Condition | None = None
    rules: TableRules | None = None
    # The Spark SQL types a user declared for its columns, which the table follows when they
    # change (``column_types``); None: types fixed by the code.
    column_types: Mapping[str, str] | None = None
    # Declared by a user (``checks.expectations``); ``parse`` gives the dropped their reason.
    expectations: tuple[Expectation, ...] = ()
    descriptions: Mapping[str, str] | None = None
    lineage: Lineage | None = None
    quarantine_lineage: Lineage | None = None
    owners: Sequence[str] = ()
    description: str | None = None  # the table's (default: ``shape``'s docstring)
    tags: Mapping[str, str] | None = None  # more tags of both assets
    # The quarantine's upgrade, if an earlier version wrote it in another layout.
    quarantine_upgrade: Upgrade | None = None

    @property
    def quarantine_table(self) -> str:
        return quarantine_table(self.source)


def rows_to_merge(
    lake: LakeResource, spark: SparkSession, spec: ParsedTable, parsed: DataFrame
) -> DataFrame:
    """The rows a run merges from its parsed records (``parsed``): its valid ones shaped (a
    table kept from its history: every valid bronze record of the keys they touch)."""
    accepted = valid(parsed)
    if spec.from_history:
        changed = accepted.select(*spec.keys).distinct()
        history = valid(spec.parse(lake.read(spark, BRONZE, spec.source)))
        accepted = history.join(changed, list(spec.keys), "left_semi")
    return dated(spec.shape(accepted), spec.dated_by)


def all_rows(spec: ParsedTable, parsed: DataFrame) -> DataFrame:
    """The table's rows from all of bronze (``parsed``)."""
    rows = dated(spec.shape(valid(parsed)), spec.dated_by)
    if spec.from_history:  # the newest event of a deleted key is its delete: no row
        rows = rows.where(~F.col("deleted")).drop("deleted")
    return rows
