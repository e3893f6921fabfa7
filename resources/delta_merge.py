"""Delta merges (silver upserts): delta-rs merges a batch's changes, handed over as Arrow, into
the table; the table itself never passes through the driver's Python process."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

from resources.delta import TABLE_CONFIGURATION, Markers, Options, commit_properties, find


def merge(
    source: pa.Table,
    uri: str,
    keys: Sequence[str],
    options: Options | None = None,
    markers: Markers | None = None,
    update_when: str | None = None,
    delete_flag: str | None = None,
    partition_by: Sequence[str] = (),
    replace: tuple[str, Sequence[Any]] | None = None,
    within_partitions: bool = True,
) -> int:
    """Upsert ``source`` (a batch's changes) by ``keys`` with delta-rs; returns the new version.

    A matching row is updated only when one of its columns changes, so the change feed carries
    real changes only. In a partitioned table a key is looked for only in the partitions of the
    source's rows (the merge reads only those files): a key must not move between partitions,
    which holds when the partition is derived from the key or from a time that never changes.
    Where it may move, ``within_partitions=False`` looks for each key in the whole table.

    Args:
        update_when: a SQL condition over ``source`` and ``target`` that a matching row must
            meet to be updated (e.g. ``source.ts > target.ts``: the newest wins).
        delete_flag: a boolean column of ``source``: rows where it is true delete their match
            (if it meets ``update_when``) and are never inserted. The column is not stored.
        partition_by: the table's partition columns (used when the merge creates it).
        replace: ``(column, values)``: ``source`` holds every row the table should have where
            ``column`` is one of ``values``; the table's other such rows are deleted (in every
            partition).

    Raises:
        ValueError: the table exists with other partition columns (laid out by an older version).
    """
    kept = [name for name in source.column_names if name != delete_flag]
    delta = find(uri, options)
    if delta is None:
        rows = source.filter(pc.invert(source[delete_flag])) if delete_flag else source  # pyright: ignore[reportAttributeAccessIssue]
        write_deltalake(
            uri,
            rows.select(kept),
            mode="append",
            partition_by=list(partition_by) or None,
            configuration=TABLE_CONFIGURATION,
            storage_options=dict(options or {}),
            commit_properties=commit_properties(markers),
        )
        return 0
    _check_layout(delta, partition_by)
    replaced = _in_values(*replace) if replace else None
    if source.num_rows == 0:
        if replaced:
            before = delta.version()
            delta.delete(replaced, commit_properties=commit_properties(markers))
            if delta.version() != before:
                return delta.version()
        return _commit_markers(delta, partition_by, markers)
    matches = [f"target.`{key}` = source.`{key}`" for key in keys]
    if within_partitions:
        matches += _in_partitions(source, partition_by)
    merger = delta.merge(
        source,
        " AND ".join(matches),
        source_alias="source",
        target_alias="target",
        merge_schema=True,
        commit_properties=commit_properties(markers),
    )
    live = f"NOT source.`{delete_flag}`" if delete_flag else None
    if delete_flag:
        deletes = f"source.`{delete_flag}`" + (f" AND ({update_when})" if update_when else "")
        merger = merger.when_matched_delete(deletes)
    stored = set(delta.schema().to_arrow().names)
    values = [name for name in kept if name not in keys and name in stored]
    # Each comparison in parentheses: DataFusion binds OR tighter than IS DISTINCT FROM.
    differs = " OR ".join(f"(target.`{n}` IS DISTINCT FROM source.`{n}`)" for n in values)
    if set(kept) - stored:  # new columns: every match changes
        differs = ""
    conditions = [c for c in (live, update_when, differs and f"({differs})") if c]
    excluded = [delete_flag] if delete_flag else None
    merger = merger.when_matched_update_all(
        " AND ".join(conditions) or None, except_cols=excluded
    ).when_not_matched_insert_all(live, except_cols=excluded)
    if replace:
        # A target row outside the source's partitions is "not matched" too: the predicate
        # keeps the deletes to the replaced rows.
        merger = merger.when_not_matched_by_source_delete(_in_values(*replace, alias="target"))
    before = delta.version()
    merger.execute()
    if delta.version() == before:  # delta-rs commits nothing for a merge that changes nothing
        return _commit_markers(delta, partition_by, markers)
    return delta.version()


def _commit_markers(delta: DeltaTable, partition_by: Sequence[str], markers: Markers | None) -> int:
    """Commit ``markers`` alone (no data), so the table records what its writer consumed."""
    if markers:
        delta.create_write_transaction(
            [], "append", delta.schema(), partition_by=list(partition_by) or None,
            commit_properties=commit_properties(markers),
        )  # fmt: skip
        delta.update_incremental()  # the commit does not move this snapshot
    return delta.version()


def _check_layout(delta: DeltaTable, partition_by: Sequence[str]) -> None:
    stored = delta.metadata().partition_columns
    if list(stored) != list(partition_by):
        raise ValueError(
            f"The Delta table {delta.table_uri} is partitioned by {stored or 'nothing'}, but this "
            f"version of the lakehouse lays it out by {list(partition_by) or 'nothing'}. It is "
            "derived from upstream tables: delete its folder and run again to rebuild it."
        )


def _in_partitions(source: pa.Table, partition_by: Sequence[str]) -> list[str]:
    """Conditions keeping a merge's target to the partitions of ``source``'s rows."""
    conditions = []
    for column in partition_by:
        values = source[column].unique().to_pylist()
        literals = ", ".join(_sql_literal(value) for value in values if value is not None)
        in_values = f"target.`{column}` IN ({literals})" if literals else "FALSE"
        nulls = f"target.`{column}` IS NULL" if None in values else None
        conditions.append(f"({in_values} OR {nulls})" if nulls else in_values)
    return conditions


def _in_values(column: str, values: Sequence[Any], alias: str | None = None) -> str:
    """``column IN (values)`` in SQL (FALSE when there are none)."""
    name = f"{alias}.`{column}`" if alias else f"`{column}`"
    literals = ", ".join(_sql_literal(value) for value in values)
    return f"{name} IN ({literals})" if literals else "FALSE"


def _sql_literal(value: Any) -> str:
    if isinstance(value, date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, int | float):
        return repr(value)
    raise TypeError(f"Partition values of type {type(value).__name__} are not supported")
