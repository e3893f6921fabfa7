"""How a declared source's silver tables take a batch's rows: appended, merged by key (latest
per key, SCD1, SCD2), or replaced whole (a full refresh); and how a table's columns follow its
schema (widened by a rewrite, or values cast to the table's types)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructType

from lakehouse_assets.constants import SILVER
from lakehouse_assets.refinement.step_asset import StepRun
from lakehouse_assets.sources.declaration.model import SourceDeclaration
from lakehouse_assets.sources.decoding import schema as types
from lakehouse_assets.sources.decoding.reader import DELETED, ORDER_KIND, SEQUENCE, SKIPPED
from lakehouse_assets.sources.decoding.schema import Schema
from lakehouse_assets.sources.writing import cdc, transforms
from lakehouse_assets.validation import REASON
from resources import LakeResource
from resources.delta_log import Markers, spark_schema
from resources.delta_merge import later


def deletes_table(source: SourceDeclaration) -> str:
    """The table remembering a CDC source's deletes (keys and sequence)."""
    return f"{source.name}{cdc.DELETES_SUFFIX}"


def validity(run: StepRun, source: SourceDeclaration, typed: DataFrame) -> str | None:
    """The type of ``valid_from`` and ``valid_to`` of ``silver.<source>`` (``cdc-scd2``): the
    table's; for a new table (or a rebuild), that of the read records' order values (one query,
    ``cdc.validity_type``), None while they have none."""
    table = None if run.rebuild else run.lake.find(SILVER, source.name)
    if table is not None:
        return spark_schema(table)[cdc.VALID_FROM].dataType.simpleString()
    read = typed.where(F.col(REASON).isNull() & ~F.col(SKIPPED))
    kinds = {row[0] for row in read.select(ORDER_KIND).distinct().collect() if row[0]}
    return cdc.validity_type(kinds) if kinds else None


def replace(
    lake: LakeResource,
    source: SourceDeclaration,
    rows: DataFrame,
    markers: Markers,
    validity: str | None = None,
    fill: Sequence[str] = (),
) -> int:
    """Replace ``silver.<source>`` with what ``rows`` (every change bronze holds) make of it.
    ``fill``: the columns holding Debezium's placeholder in some of ``rows`` (``cdc.fill``)."""
    keys = list(source.keys)
    if source.mode == "append":
        table = rows.drop(DELETED)
    elif source.mode == "latest-per-key":
        table = transforms.newest_per_key(rows, ["_kafka_key"]).where(~F.col(DELETED))
    elif source.mode == "cdc-scd1":
        rows = cdc.fill(rows, keys, fill) if fill else rows
        table = transforms.newest_per_key(rows, keys, [SEQUENCE]).where(~F.col(DELETED))
    else:
        no_deletes = cdc.new_deletes(rows, keys).limit(0)
        table = cdc.scd2(rows, _no_versions(rows), no_deletes, keys, validity, fill)
    partition_by = [column for column, _ in source.partition_columns]
    before = lake.version(SILVER, source.name)
    lake.replace(SILVER, source.name, table.drop(DELETED), markers, partition_by)
    return _taken(lake, source, before)


def _taken(lake: LakeResource, source: SourceDeclaration, before: int | None) -> int:
    """The rows the write after version ``before`` of ``silver.<source>`` took, by its commit's
    operation metrics (a merge's source rows, deletes included; the rows an append or a replace
    wrote), with no query; none when no write followed."""
    return lake.rows_written(SILVER, source.name, before) or 0


def keep(
    run: StepRun,
    source: SourceDeclaration,
    rows: DataFrame,
    validity: str | None = None,
    fill: Sequence[str] = (),
) -> tuple[int, DataFrame | None]:
    """Write the batch's valid ``rows`` to ``silver.<source>`` as its mode says; returns the
    rows its commit took (``_taken``) and, for a merge, the rows it took but its deletes
    (checkpointed): merged by the key of the mode's rules, they stand for the table in its
    checks (``checks.results.written_rows``). ``validity``: ``cdc-scd2``'s ``valid_from`` type;
    ``fill``: the columns holding Debezium's placeholder in some of ``rows`` (``cdc.fill``).
    With ``run.replayed``, ``rows`` are quarantined records read again (``refinement.replay``),
    written as if they had arrived in their order: appended ones inserted by their coordinates
    (once however often replayed), latest per key only over an older row (a lower offset); the
    CDC modes order every change already."""
    lake, spark, markers, replay = run.lake, run.spark, run.markers, run.replayed is not None
    partition_by = [column for column, _ in source.partition_columns]
    merge = {"markers": markers, "partition_by": partition_by, "within_partitions": False}
    before = lake.version(SILVER, source.name)
    if source.mode == "append":
        if replay:  # a record's partition values are its own: it is looked for there only
            coordinates = ["_kafka_topic", "_kafka_partition", "_kafka_offset"]
            lake.merge(SILVER, source.name, rows.drop(DELETED), coordinates,
                       partition_by=partition_by, insert_only=True)  # fmt: skip
        else:
            lake.append(SILVER, source.name, rows.drop(DELETED), partition_by, markers=markers)
        return _taken(lake, source, before), None
    if source.mode == "latest-per-key":
        newest = transforms.newest_per_key(rows, ["_kafka_key"]).localCheckpoint()
        update_when = later("_kafka_offset") if replay else None
        lake.merge(SILVER, source.name, newest, ["_kafka_key"], delete_flag=DELETED,
                   update_when=update_when, **merge)  # fmt: skip
        return _taken(lake, source, before), newest.where(~F.col(DELETED))
    keys = list(source.keys)
    changed = rows.select(*keys).distinct()
    deletes = _stored(lake, spark, deletes_table(source), changed, cdc.new_deletes(rows, keys))
    if source.mode == "cdc-scd1":
        if fill:  # the values before a placeholder: the batch's, the stored row's
            stored = _stored(lake, spark, source.name, changed, rows.limit(0))
            rows = cdc.fill_from_stored(rows, stored, deletes, keys, fill)
        newest = cdc.scd1(rows, deletes, keys).localCheckpoint()
        lake.merge(
            SILVER, source.name, newest, keys, update_when=cdc.newer, delete_flag=DELETED, **merge
        )
        return _taken(lake, source, before), newest.where(~F.col(DELETED))
    versions = _stored(lake, spark, source.name, changed, _no_versions(rows))
    # Computed before the merge: it reads the rows the merge replaces. Every version of each
    # key it holds: one current version per key among them is one in the table.
    history = cdc.scd2(rows, versions, deletes, keys, validity, fill).localCheckpoint()
    lake.merge(SILVER, source.name, history, [*keys, cdc.VALID_FROM], **merge)
    return _taken(lake, source, before), history


def record_deletes(run: StepRun, source: SourceDeclaration, rows: DataFrame) -> None:
    """Remember the deletes among ``rows`` in ``silver.<source>_deletes`` (all of them, replacing
    the table, when ``run.rebuild``)."""
    lake, markers, table = run.lake, run.markers, deletes_table(source)
    if not run.rebuild and markers and lake.holds(SILVER, table, markers):  # (a replay has none)
        return
    deleted = cdc.new_deletes(rows, source.keys)
    if run.rebuild:
        lake.replace(SILVER, table, deleted, markers)
    else:
        keys = [*source.keys, SEQUENCE]
        lake.merge(SILVER, table, deleted, keys, markers=markers)


def apply_truncates(
    run: StepRun, source: SourceDeclaration, rows: DataFrame, batch_truncates: bool
) -> tuple[DataFrame, DataFrame]:
    """``cdc.truncated`` of the batch's ``rows``: the rows to write, and those whose deletes to
    record. The truncates recorded before, and (when the batch truncates) the keys stored:
    ``silver.<source>``'s (``cdc-scd2``: of its open versions). With ``run.rebuild``, ``rows`` are
    every change, so neither is read."""
    lake, spark, keys = run.lake, run.spark, list(source.keys)
    recorded, known = rows.limit(0), rows.limit(0)
    if not run.rebuild and lake.exists(SILVER, deletes_table(source)):
        recorded = lake.read(spark, SILVER, deletes_table(source)).where(F.col(keys[0]).isNull())
    if not run.rebuild and batch_truncates and lake.exists(SILVER, source.name):
        known = lake.read(spark, SILVER, source.name)
        known = known.where(F.col(cdc.IS_CURRENT)) if source.mode == "cdc-scd2" else known
    return cdc.truncated(rows, known, recorded, keys)


def _no_versions(rows: DataFrame) -> DataFrame:
    """No stored versions, in the shape of a new table's (``valid_from`` the sequence)."""
    return rows.limit(0).withColumnRenamed(SEQUENCE, cdc.VALID_FROM)


def _stored(
    lake: LakeResource, spark: SparkSession, table: str, keys: DataFrame, like: DataFrame
) -> DataFrame:
    """The rows of ``silver.<table>`` whose keys are in ``keys`` (before the table exists, no
    rows, with the columns of ``like``)."""
    if not lake.exists(SILVER, table):
        return like.limit(0)
    return lake.read(spark, SILVER, table).join(keys, keys.columns, "left_semi")


def widen_table(
    lake: LakeResource, spark: SparkSession, source: SourceDeclaration, schema: Schema
) -> None:
    """Rewrite ``silver.<source>`` with its columns in the wider types of ``schema`` (a Delta
    column's type changes only by a rewrite, which Delta counts as a data change: a reader of
    the table's change feed sees every row again)."""
    stored = lake.read(spark, SILVER, source.name)
    leaves = types.leaves(schema, source.flatten, source.separator)
    wanted = {name: types.data_type(t) for name, _, t in leaves}
    columns, changed = [], False
    for column in stored.schema.fields:
        target = wanted.get(column.name)
        if target is None or column.dataType == target:
            columns.append(F.col(column.name))
            continue
        changed = True
        if isinstance(target, StructType | ArrayType):  # a JSON round trip: lossless
            columns.append(F.from_json(F.to_json(column.name), target).alias(column.name))
        else:
            columns.append(F.col(column.name).cast(target).alias(column.name))
    if changed:
        partition_by = [column for column, _ in source.partition_columns]
        lake.replace(SILVER, source.name, stored.select(*columns), partition_by=partition_by)


def conform(lake: LakeResource, source: SourceDeclaration, rows: DataFrame) -> DataFrame:
    """``rows`` with each column the table already has in the table's type (a schema file
    edited to a narrower type does not change the table: its values are cast)."""
    table = lake.find(SILVER, source.name)
    if table is None:
        return rows
    stored = {f.name: f.dataType for f in spark_schema(table).fields}
    return rows.select(
        *[
            F.col(f.name).cast(stored[f.name]).alias(f.name)
            if f.name in stored and stored[f.name] != f.dataType
            else F.col(f.name)
            for f in rows.schema.fields
        ]
    )
