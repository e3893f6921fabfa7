"""A table's column statistics from its Delta log: per column, the nulls and the least and
greatest value, combined from the statistics Delta records for every data file it writes (and
from the partition values), so a write shows them without reading a row.

What the log can tell, and so what this shows: Delta collects statistics for the first 32 leaf
columns of a table (``delta.dataSkippingNumIndexedCols``) and keeps a string's bounds as its
first 32 characters; a column without them shows no value. A file's statistics count the rows
it was written with: a deletion vector (rows deleted without rewriting the file) makes them
bounds of the table's rows, not its exact figures (``exact`` says which).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import pyarrow as pa

NULLS, LEAST, GREATEST, PARTITION = "null_count.", "min.", "max.", "partition."


@dataclass(frozen=True)
class ColumnBounds:
    """One column's statistics over the table's files; None where the log does not tell."""

    column: str
    nulls: int | None
    least: Any
    greatest: Any


def _combined(values: Sequence[Any], pick: Any) -> Any:
    present = [value for value in values if value is not None]
    return pick(present) if present else None


def _values(actions: pa.Table, name: str, files: int) -> list[Any]:
    """Column ``name`` of the actions; all None when the log has none of it."""
    return actions[name].to_pylist() if name in actions.column_names else [None] * files


def _file_column(actions: pa.Table, name: str, rows: list[int]) -> ColumnBounds:
    """A data column's bounds: its files' null counts summed (unknown if a file lacks one), and
    the least minimum and greatest maximum of the files holding a value of it (unknown if one of
    those lacks its bound: a column past the indexed ones, a type without bounds)."""
    nulls = actions[NULLS + name].to_pylist()
    least, most = (_values(actions, prefix + name, len(rows)) for prefix in (LEAST, GREATEST))
    holding = [i for i, n in enumerate(nulls) if n is None or n < rows[i]]
    bounded = all(least[i] is not None and most[i] is not None for i in holding)
    return ColumnBounds(
        column=name,
        nulls=None if None in nulls else sum(nulls),
        least=_combined([least[i] for i in holding], min) if bounded else None,
        greatest=_combined([most[i] for i in holding], max) if bounded else None,
    )


def _partition_column(actions: pa.Table, name: str, rows: list[int]) -> ColumnBounds:
    """A partition column's bounds, from the files' partition values (every row of a file has
    its file's value)."""
    values = actions[PARTITION + name].to_pylist()
    return ColumnBounds(
        column=name,
        nulls=sum(count for count, value in zip(rows, values, strict=True) if value is None),
        least=_combined(values, min),
        greatest=_combined(values, max),
    )


def column_bounds(actions: pa.Table) -> list[ColumnBounds]:
    """Every column's statistics from a snapshot's add actions (``get_add_actions(flatten=True)``
    of delta-rs: ``num_records``, ``null_count.<column>``, ``min.<column>``, ``max.<column>``,
    ``partition.<column>``; nested columns as ``<column>.<field>``): the data columns, then the
    partition columns.
    A table without files has none."""
    if actions.num_rows == 0:
        return []
    rows = [count or 0 for count in actions["num_records"].to_pylist()]
    bounds = []
    for name in actions.column_names:
        if name.startswith(NULLS):
            bounds.append(_file_column(actions, name[len(NULLS) :], rows))
        elif name.startswith(PARTITION):
            bounds.append(_partition_column(actions, name[len(PARTITION) :], rows))
    return bounds


def exact(actions: pa.Table) -> bool:
    """Whether no file of the snapshot has a deletion vector (its statistics are then its
    rows')."""
    names = [name for name in actions.column_names if name.startswith("deletionVector")]
    return not any(value is not None for name in names for value in actions[name].to_pylist())


STATISTICS_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("column", "string"),
        dg.TableColumn("nulls", "int"),
        dg.TableColumn("min", "string"),
        dg.TableColumn("max", "string"),
    ]
)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def statistics_metadata(actions: pa.Table) -> dict[str, dg.MetadataValue]:
    """The statistics as materialization metadata: ``column_statistics`` (a table, one record
    per column) and whether they are exact; none for a table without files."""
    bounds = column_bounds(actions)
    if not bounds:
        return {}
    records = [
        dg.TableRecord(
            {"column": b.column, "nulls": b.nulls, "min": _text(b.least), "max": _text(b.greatest)}
        )
        for b in bounds
    ]
    return {
        "column_statistics": dg.MetadataValue.table(records, STATISTICS_SCHEMA),
        "column_statistics_exact": dg.MetadataValue.bool(exact(actions)),
    }
