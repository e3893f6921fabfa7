"""Delta merges (silver upserts) through PySpark's ``DataFrame.mergeInto``, which Delta Lake runs
as its own ``MERGE``: the batch's changes (a DataFrame, never collected) merged into the table by
its keys. Conditions are Spark columns built by the caller over the merge's two sides
(``Condition``); the one SQL statement left is ``ALTER TABLE ... ADD COLUMNS`` for columns the
table lacks (``mergeInto``'s schema evolution adds none for explicit assignments)."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from resources.delta import (
    Markers,
    append,
    commit_markers,
    ddl,
    plain_strings,
    quoted,
    recorded_by_writes,
    table_name,
)
from resources.delta_log import find, recording
from resources.object_store import hadoop_uri

Side = Callable[[str], Column]
"""A column of one side of a merge (its source or its target row), by name."""
Condition = Callable[[Side, Side], Column]
"""A merge's condition over its ``source`` and ``target`` rows."""
SOURCE = "source"  # the alias of a merge's source rows


def later(column: str) -> Condition:
    """The condition that the source row's ``column`` is later than the target row's: the
    newest wins."""
    return lambda source, target: source(column) > target(column)


def merge(
    source: DataFrame,
    uri: str,
    keys: Sequence[str],
    markers: Markers | None = None,
    update_when: Condition | None = None,
    delete_flag: str | None = None,
    partition_by: Sequence[str] = (),
    replace: Column | None = None,
    within_partitions: bool = True,
    insert_only: bool = False,
) -> None:
    """Upsert ``source`` (a batch's changes) by ``keys``.

    A matching row is updated only when one of its columns changes, so the change feed carries
    real changes only. In a partitioned table a key is looked for only in the partitions of the
    source's rows (the merge reads only those files): a key must not move between partitions,
    which holds when the partition is derived from the key or from a time that never changes.
    Where it may move, ``within_partitions=False`` looks for each key in the whole table.
    Columns of ``source`` the table lacks are added to it first. Into a table without rows,
    the rows are appended.

    Args:
        update_when: the condition a matching row must meet to be updated (e.g. ``later("ts")``:
            the newest wins).
        delete_flag: a boolean column of ``source``: rows where it is true delete their match
            (if it meets ``update_when``) and are never inserted. The column is not stored.
        partition_by: the table's partition columns (used when the merge creates it).
        replace: a condition over the table's columns: ``source`` holds every row the table
            should have where it holds; the table's other such rows are deleted (in every
            partition). Not with ``update_when`` or ``delete_flag``.
        insert_only: a key, once in the table, keeps its row: only the source's new keys are
            inserted (Delta's insert-only merge: about half the Spark jobs of a merge that may
            update, since it rewrites no file). For tables whose key is its record's identity.

    Raises:
        ValueError: the table exists with other partition columns (laid out by an older version).
    """
    if replace is not None and (update_when or delete_flag):
        raise ValueError("A merge that replaces rows takes neither update_when nor delete_flag.")
    if insert_only and (replace is not None or update_when or delete_flag):
        raise ValueError("An insert-only merge takes no replace, update_when or delete_flag.")
    spark = source.sparkSession
    options = recording(uri, markers)
    if options is None:
        return  # done before: the table holds every marker
    source = plain_strings(source)
    kept = [name for name in source.columns if name != delete_flag]
    delta = find(uri)
    if delta is None:
        live = source.where(~F.col(delete_flag)) if delete_flag else source
        append(live.select(*kept), uri, partition_by, markers)
        return
    _check_layout(delta.metadata().partition_columns, partition_by, uri)
    if delete_flag is None and replace is None and not delta.file_uris():
        # No row to match (a table its first batches left empty): the rows are appended, with
        # no join, as a merge would insert them.
        append(source, uri, partition_by, markers)
        return
    stored = set(delta.schema().to_arrow().names)
    _add_columns(source.select(*kept), uri, stored)
    if replace is not None:
        source, delete_flag = _with_replaced(source, uri, keys, replace), REPLACED
    target_name = table_name(uri)

    def source_column(name: str) -> Column:
        return F.col(f"{SOURCE}.{quoted(name)}")

    def target_column(name: str) -> Column:  # Delta names the target by its table name
        return F.col(f"{target_name}.{quoted(name)}")

    matches = [target_column(key) == source_column(key) for key in keys]
    if within_partitions:
        matches += _in_partitions(source, partition_by, target_column)
    assignments = {quoted(name): source_column(name) for name in kept}
    writer = source.alias(SOURCE).mergeInto(target_name, functools.reduce(operator.and_, matches))
    if insert_only:
        writer = writer.whenNotMatched().insert(assignments)
    else:
        newer = update_when(source_column, target_column) if update_when else None
        values = [name for name in kept if name not in keys]
        differs = [~target_column(name).eqNullSafe(source_column(name)) for name in values]
        changed = functools.reduce(operator.or_, differs) if differs else None
        deleted = source_column(delete_flag) if delete_flag else None
        if deleted is not None:
            writer = writer.whenMatched(_all([deleted, newer])).delete()
        writer = writer.whenMatched(_all([_not(deleted), newer, changed])).update(assignments)
        writer = writer.whenNotMatched(_not(deleted)).insert(assignments)
    with recorded_by_writes(spark, options):
        writer.merge()
    # Delta commits no MERGE of an empty source, nor its markers: then they commit alone.
    commit_markers(spark, uri, markers)


REPLACED = "_lakehouse_replaced"


def _with_replaced(source: DataFrame, uri: str, keys: Sequence[str], replace: Column) -> DataFrame:
    """``source`` with the table's rows where ``replace`` holds and ``source`` lacks their key,
    flagged in ``REPLACED`` for deletion.

    The merge deletes them as matched rows rather than by ``whenNotMatchedBySource``, with
    which Delta reads and rewrites every file of the table; this way it touches only the files
    of the replaced rows (found by the condition, with Delta's file statistics) and the source's.
    """
    target = source.sparkSession.read.format("delta").load(hadoop_uri(uri))
    replaced = target.where(replace).select(*source.columns)
    gone = replaced.join(source.select(*keys), list(keys), "anti")
    kept = source.select("*", F.lit(False).alias(REPLACED))
    return kept.unionByName(gone.select("*", F.lit(True).alias(REPLACED)))


def _all(conditions: Sequence[Column | None]) -> Column | None:
    """Every present condition holds (None when none is present: no condition)."""
    present = [c for c in conditions if c is not None]
    return functools.reduce(operator.and_, present) if present else None


def _not(condition: Column | None) -> Column | None:
    return None if condition is None else ~condition


def _add_columns(source: DataFrame, uri: str, stored: set[str]) -> None:
    """Add the columns of ``source`` the table lacks (nullable, at the end)."""
    new = [field for field in source.schema.fields if field.name not in stored]
    if new:
        columns = ", ".join(f"{quoted(f.name)} {ddl(f.dataType)}" for f in new)
        source.sparkSession.sql(f"ALTER TABLE {table_name(uri)} ADD COLUMNS ({columns})")


def _check_layout(stored: Sequence[str], partition_by: Sequence[str], uri: str) -> None:
    if list(stored) != list(partition_by):
        raise ValueError(
            f"The Delta table {uri} is partitioned by {list(stored) or 'nothing'}, but this "
            f"version of the lakehouse lays it out by {list(partition_by) or 'nothing'}. It is "
            "derived from upstream tables: delete its folder and run again to rebuild it."
        )


def _in_partitions(source: DataFrame, partition_by: Sequence[str], target: Side) -> list[Column]:
    """Conditions keeping a merge's target to the partitions of ``source``'s rows (one small
    job collects their distinct values)."""
    if not partition_by:
        return []
    present = source.select(*partition_by).distinct().collect()
    conditions = []
    for column in partition_by:
        values = {row[column] for row in present}
        known = [value for value in values if value is not None]
        listed = target(column).isin(known) if known else F.lit(False)
        conditions.append(listed | target(column).isNull() if None in values else listed)
    return conditions
