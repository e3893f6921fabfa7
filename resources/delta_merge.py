"""Delta merges (silver upserts) with Delta Lake's ``MERGE INTO``, run by Spark: the batch's
changes (a DataFrame, never collected) merged into the table by its keys."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from resources.delta import (
    Markers,
    append,
    commit_markers,
    ddl,
    literal,
    marker_settings,
    plain_strings,
    quoted,
    session_settings,
    table_name,
)
from resources.delta_log import find, unheld
from resources.object_store import hadoop_uri


def merge(
    source: DataFrame,
    uri: str,
    keys: Sequence[str],
    markers: Markers | None = None,
    update_when: str | None = None,
    delete_flag: str | None = None,
    partition_by: Sequence[str] = (),
    replace: str | None = None,
    within_partitions: bool = True,
) -> None:
    """Upsert ``source`` (a batch's changes) by ``keys``.

    A matching row is updated only when one of its columns changes, so the change feed carries
    real changes only. In a partitioned table a key is looked for only in the partitions of the
    source's rows (the merge reads only those files): a key must not move between partitions,
    which holds when the partition is derived from the key or from a time that never changes.
    Where it may move, ``within_partitions=False`` looks for each key in the whole table.
    Columns of ``source`` the table lacks are added to it first.

    Args:
        update_when: a SQL condition over ``source`` and ``target`` that a matching row must
            meet to be updated (e.g. ``source.ts > target.ts``: the newest wins).
        delete_flag: a boolean column of ``source``: rows where it is true delete their match
            (if it meets ``update_when``) and are never inserted. The column is not stored.
        partition_by: the table's partition columns (used when the merge creates it).
        replace: a SQL condition over ``target`` (see ``in_values``): ``source`` holds every row
            the table should have where it holds; the table's other such rows are deleted (in
            every partition). Not with ``update_when`` or ``delete_flag``.

    Raises:
        ValueError: the table exists with other partition columns (laid out by an older version).
    """
    if replace and (update_when or delete_flag):
        raise ValueError("A merge that replaces rows takes neither update_when nor delete_flag.")
    spark = source.sparkSession
    missing = unheld(uri, markers)
    if markers and not missing:
        return  # done before: the table holds every marker
    markers = missing  # the commit carries one the table lacks, so Delta does not skip it
    source = plain_strings(source)
    kept = [name for name in source.columns if name != delete_flag]
    delta = find(uri)
    if delta is None:
        live = source.where(~F.col(delete_flag)) if delete_flag else source
        append(live.select(*kept), uri, partition_by, markers)
        return
    _check_layout(delta.metadata().partition_columns, partition_by, uri)
    stored = set(delta.schema().to_arrow().names)
    _add_columns(source.select(*kept), uri, stored)
    if replace:
        source, delete_flag = _with_replaced(source, uri, keys, replace), REPLACED
    matches = [f"target.{quoted(key)} = source.{quoted(key)}" for key in keys]
    if within_partitions:
        matches += _in_partitions(source, partition_by)
    values = [name for name in kept if name not in keys]
    differs = " OR ".join(f"target.{quoted(n)} IS DISTINCT FROM source.{quoted(n)}" for n in values)
    live = f"NOT source.{quoted(delete_flag)}" if delete_flag else None
    clauses = []
    if delete_flag:
        deletes = f"source.{quoted(delete_flag)}" + (f" AND ({update_when})" if update_when else "")
        clauses.append(f"WHEN MATCHED AND {deletes} THEN DELETE")
    conditions = (live, update_when and f"({update_when})", differs and f"({differs})")
    assignments = ", ".join(f"target.{quoted(n)} = source.{quoted(n)}" for n in kept)
    clauses.append(f"WHEN MATCHED{_and(conditions)} THEN UPDATE SET {assignments}")
    columns = ", ".join(quoted(n) for n in kept)
    inserted = ", ".join(f"source.{quoted(n)}" for n in kept)
    clauses.append(f"WHEN NOT MATCHED{_and([live])} THEN INSERT ({columns}) VALUES ({inserted})")
    view = f"merge_source_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    statement = (
        f"MERGE INTO {table_name(uri)} AS target USING {view} AS source "
        f"ON {' AND '.join(matches)} " + " ".join(clauses)
    )
    try:
        with session_settings(spark, marker_settings(markers)):
            spark.sql(statement).collect()
    finally:
        spark.catalog.dropTempView(view)
    # Delta commits no MERGE of an empty source, nor its marker: then every marker alone.
    first = dict(list(markers.items())[:1])
    commit_markers(spark, uri, markers, skip_first=not unheld(uri, first))


REPLACED = "_lakehouse_replaced"


def _with_replaced(source: DataFrame, uri: str, keys: Sequence[str], replace: str) -> DataFrame:
    """``source`` with the table's rows where ``replace`` holds and ``source`` lacks their key,
    flagged in ``REPLACED`` for deletion.

    The merge deletes them as matched rows rather than by ``WHEN NOT MATCHED BY SOURCE``, with
    which Delta reads and rewrites every file of the table; this way it touches only the files
    of the replaced rows (found by the condition, with Delta's file statistics) and the source's.
    """
    target = source.sparkSession.read.format("delta").load(hadoop_uri(uri)).alias("target")
    replaced = target.where(replace).select(*source.columns)
    gone = replaced.join(source.select(*keys), list(keys), "anti")
    kept = source.select("*", F.lit(False).alias(REPLACED))
    return kept.unionByName(gone.select("*", F.lit(True).alias(REPLACED)))


def _and(conditions: Sequence[str | None]) -> str:
    present = [c for c in conditions if c]
    return f" AND {' AND '.join(present)}" if present else ""


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


def _in_partitions(source: DataFrame, partition_by: Sequence[str]) -> list[str]:
    """Conditions keeping a merge's target to the partitions of ``source``'s rows (one small
    job collects their distinct values)."""
    if not partition_by:
        return []
    present = source.select(*partition_by).distinct().collect()
    conditions = []
    for column in partition_by:
        values = {row[column] for row in present}
        listed = in_values(column, [v for v in values if v is not None])
        nulls = f"target.{quoted(column)} IS NULL" if None in values else None
        conditions.append(f"({listed} OR {nulls})" if nulls else listed)
    return conditions


def in_values(column: str, values: Sequence[Any]) -> str:
    """``target.column IN (values)`` in SQL (FALSE when there are none): the condition of a
    merge's target rows, e.g. of those ``replace`` deletes."""
    literals = ", ".join(literal(value) for value in values)
    return f"target.{quoted(column)} IN ({literals})" if literals else "FALSE"
