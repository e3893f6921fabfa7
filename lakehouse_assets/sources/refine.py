"""A declared source's bronze changes into its silver table: read with the source's schema
(inferred, persisted, evolved), rejects to the quarantine table, the rest kept as the mode says.

Each write carries the transaction marker of the bronze version read, so a re-run after a crash
neither loses nor repeats a batch. The schema file is written before the tables: a crash between
leaves a schema that already describes the batch the re-run reads again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructType

from lakehouse_assets.constants import BRONZE, QUARANTINE_SUFFIX, SILVER
from lakehouse_assets.silver.validation import REASON, kafka_quarantine
from lakehouse_assets.sources import cdc, debezium, evolution, transforms
from lakehouse_assets.sources import schema as types
from lakehouse_assets.sources.cdc import DELETED
from lakehouse_assets.sources.declarations import CDC_MODES, SourceDeclaration
from lakehouse_assets.sources.schema import Schema
from resources import LakeResource, delta
from resources.delta import Markers

SCHEMAS_DIR = "_schemas"  # <root>/silver/_schemas/<source>.json, beside the silver tables
SKIPPED = "_skipped"  # changes nothing: not kept, not quarantined


@dataclass
class Refined:
    """What one run did to a declared source's silver tables."""

    rows: int = 0
    rejected: int = 0
    schema_inferred: bool = False
    added: list[str] = field(default_factory=list)
    widened: list[str] = field(default_factory=list)

    def metadata(self) -> dict[str, Any]:
        return {
            "records_read": self.rows + self.rejected,
            "schema_inferred": self.schema_inferred,
            "columns_added": ", ".join(self.added) or "-",
            "columns_widened": ", ".join(self.widened) or "-",
        }


def quarantine_table(source: SourceDeclaration) -> str:
    return f"{source.name}{QUARANTINE_SUFFIX}"


def deletes_table(source: SourceDeclaration) -> str:
    """The table remembering a CDC source's deletes (keys and sequence)."""
    return f"{source.name}{cdc.DELETES_SUFFIX}"


def schema_path(source: SourceDeclaration) -> tuple[str, ...]:
    """Where the source's schema file lives, under the lake root."""
    return (SILVER, SCHEMAS_DIR, f"{source.name}.json")


def load_schema(lake: LakeResource, source: SourceDeclaration) -> Schema | None:
    """The source's persisted schema, or None before the first run (or after a deletion, which
    asks for a new inference).

    Raises:
        SchemaError: the file was edited into something that is not a schema.
    """
    text = lake.read_text(*schema_path(source))
    return types.loads(text, where=lake.path(*schema_path(source))) if text else None


def reinfer_schema(lake: LakeResource, spark: SparkSession, source: SourceDeclaration) -> Schema:
    """Infer the source's schema anew from the latest value per key of all of bronze, and
    replace the file with it. Columns the table has keep their types until the data widens them.
    """
    records = records_of(lake.read(spark, BRONZE, source.name), source)
    schema = evolution.infer(records.where(~F.col(SKIPPED)), source.sample_size)
    lake.write_text(types.dumps(schema), *schema_path(source))
    return schema


def records_of(changes: DataFrame, source: SourceDeclaration) -> DataFrame:
    """Bronze changes with their parsed value (``_variant``: a Debezium envelope's row), a
    ``reason`` when rejected, ``_deleted`` for the changes that delete their key (tombstones of a
    latest-per-key source, Debezium deletes), and ``_skipped`` for records that change nothing
    (the tombstones following Debezium deletes)."""
    parsed = transforms.parse_values(changes)
    tombstone = F.col("value").isNull()
    if source.format == "debezium-json":
        events = debezium.changes(parsed, source.order_by)
        return events.withColumn(DELETED, F.col(debezium.OP) == "d").withColumnRenamed(
            debezium.TOMBSTONE, SKIPPED
        )
    if source.mode == "latest-per-key":
        reason = F.when(F.col("key").isNull(), F.lit("null key")).when(~tombstone, F.col(REASON))
    else:
        reason = F.when(tombstone, F.lit("no value (tombstone)")).otherwise(F.col(REASON))
    return (
        parsed.withColumn(REASON, reason)
        .withColumn(DELETED, tombstone)
        .withColumn(SKIPPED, F.lit(False))
    )


def refine(
    lake: LakeResource,
    spark: SparkSession,
    source: SourceDeclaration,
    changes: DataFrame,
    markers: Markers,
    rebuild: bool = False,
) -> Refined:
    """Bring ``silver.<source>`` and its quarantine (and deletes) tables up to date with
    ``changes``; with ``rebuild``, ``changes`` are all of bronze and each table is replaced in
    one commit (readers see the old table until then)."""
    records = records_of(changes, source).where(~F.col(SKIPPED)).cache()
    done = Refined()
    batch = _batch_schema(lake, spark, source, records, done, rebuild)
    checks = transforms.violations(batch.schema, source.flatten, batch.rejected_types)
    checks += _key_checks(source, batch.schema)
    checked = transforms.with_reason(records, checks).cache()
    done.rejected = _quarantine(lake, source, checked, markers, rebuild)
    valid = checked.where(F.col(REASON).isNull())
    columns = transforms.typed_columns(batch.schema, source.flatten, empty_as_null=True)
    keep = [DELETED, *([debezium.OP, debezium.SEQUENCE] if source.mode in CDC_MODES else [])]
    rows = transforms.refined(valid, columns, source.partition_columns, keep)
    if rebuild:
        done.rows = _replace(lake, source, rows, markers)
    elif not lake.holds(SILVER, source.name, markers):
        done.rows = _keep(lake, spark, source, _conform(lake, source, rows), markers)
    if source.mode in CDC_MODES and (
        rebuild or not lake.holds(SILVER, deletes_table(source), markers)
    ):
        deleted = cdc.new_deletes(rows, source.keys)
        if rebuild:
            lake.replace(SILVER, deletes_table(source), deleted, markers)
        else:
            keys = [*source.keys, debezium.SEQUENCE]
            lake.merge(SILVER, deletes_table(source), deleted.toArrow(), keys, markers=markers)
    checked.unpersist()
    records.unpersist()
    return done


def _batch_schema(
    lake: LakeResource,
    spark: SparkSession,
    source: SourceDeclaration,
    records: DataFrame,
    done: Refined,
    rebuild: bool,
) -> evolution.BatchSchema:
    """The schema ``records`` are read with (inferred, or the file's, grown by them), saved;
    the table's columns widened with it (unless it is about to be rebuilt)."""
    schema = load_schema(lake, source)
    if schema is None:
        schema = evolution.infer(records, source.sample_size)
        done.schema_inferred = True
    batch = evolution.for_batch(records, schema, source.flatten)
    if batch.schema != schema or done.schema_inferred:
        lake.write_text(types.dumps(batch.schema), *schema_path(source))
    done.added, done.widened = batch.added, batch.widened
    if batch.widened and not rebuild and lake.exists(SILVER, source.name):
        _widen_table(lake, spark, source, batch.schema)
    return batch


def _key_checks(source: SourceDeclaration, schema: Schema) -> list[tuple[Column, Column]]:
    """A record without a value for one of the declared keys cannot be kept: its reason."""
    if source.mode not in CDC_MODES:
        return []
    paths = {name: path for name, path, _ in types.leaves(schema, source.flatten)}
    checks = []
    for key in source.keys:
        if key not in paths:
            known = ", ".join(paths) or "none yet"
            raise KeyError(
                f"Declared source {source.name!r}: the key column {key!r} is not in its schema "
                f"({lake_schema_hint(source)}; columns: {known})."
            )
        kind = transforms.type_at(paths[key])
        checks.append((kind.isNull() | (kind == "VOID"), F.lit(f"missing key {key}")))
    return checks


def lake_schema_hint(source: SourceDeclaration) -> str:
    return f"<lake root>/{'/'.join(schema_path(source))}"


def _quarantine(
    lake: LakeResource,
    source: SourceDeclaration,
    checked: DataFrame,
    markers: Markers,
    rebuild: bool,
) -> int:
    table = quarantine_table(source)
    if not rebuild and lake.holds(SILVER, table, markers):
        return 0
    rejected = kafka_quarantine(checked).cache()
    count = rejected.count()
    if rebuild:
        lake.replace(SILVER, table, rejected, markers)
    elif count or not lake.exists(SILVER, table):
        lake.append(SILVER, table, rejected, markers=markers)
    rejected.unpersist()
    return count


def _replace(
    lake: LakeResource, source: SourceDeclaration, rows: DataFrame, markers: Markers
) -> int:
    """Replace ``silver.<source>`` with what ``rows`` (every change bronze holds) make of it."""
    keys = list(source.keys)
    if source.mode == "append":
        table = rows.drop(DELETED)
    elif source.mode == "latest-per-key":
        table = transforms.newest_per_key(rows, ["_kafka_key"]).where(~F.col(DELETED))
    elif source.mode == "cdc-scd1":
        table = transforms.newest_per_key(rows, keys, [debezium.SEQUENCE]).where(~F.col(DELETED))
    else:
        no_deletes = cdc.new_deletes(rows, keys).limit(0)
        table = cdc.scd2(rows, rows.limit(0), no_deletes, keys)
    table = table.drop(DELETED).cache()
    partition_by = [column for column, _ in source.partition_columns]
    lake.replace(SILVER, source.name, table, markers, partition_by)
    count = table.count()
    table.unpersist()
    return count


def _keep(
    lake: LakeResource,
    spark: SparkSession,
    source: SourceDeclaration,
    rows: DataFrame,
    markers: Markers,
) -> int:
    """Write the batch's valid ``rows`` to ``silver.<source>`` as its mode says; returns the
    rows written (appended, or merged)."""
    partition_by = [column for column, _ in source.partition_columns]
    merge = {"markers": markers, "partition_by": partition_by, "within_partitions": False}
    if source.mode == "append":
        kept = rows.drop(DELETED).cache()
        lake.append(SILVER, source.name, kept, partition_by, markers=markers)
        count = kept.count()
        kept.unpersist()
        return count
    if source.mode == "latest-per-key":
        newest = transforms.newest_per_key(rows, ["_kafka_key"]).toArrow()
        lake.merge(SILVER, source.name, newest, ["_kafka_key"], delete_flag=DELETED, **merge)
        return newest.num_rows
    keys = list(source.keys)
    changed = rows.select(*keys).distinct()
    deletes = _stored(lake, spark, deletes_table(source), changed, cdc.new_deletes(rows, keys))
    if source.mode == "cdc-scd1":
        newest = cdc.scd1(rows, deletes, keys).toArrow()
        lake.merge(
            SILVER, source.name, newest, keys, update_when=cdc.NEWER, delete_flag=DELETED, **merge
        )
        return newest.num_rows
    versions = _stored(lake, spark, source.name, changed, rows)
    history = cdc.scd2(rows, versions, deletes, keys).toArrow()
    lake.merge(SILVER, source.name, history, [*keys, cdc.VALID_FROM], **merge)
    return history.num_rows


def _stored(
    lake: LakeResource, spark: SparkSession, table: str, keys: DataFrame, like: DataFrame
) -> DataFrame:
    """The rows of ``silver.<table>`` whose keys are in ``keys`` (before the table exists, no
    rows, with the columns of ``like``)."""
    if not lake.exists(SILVER, table):
        return like.limit(0)
    return lake.read(spark, SILVER, table).join(keys, keys.columns, "left_semi")


def _widen_table(
    lake: LakeResource, spark: SparkSession, source: SourceDeclaration, schema: Schema
) -> None:
    """Rewrite ``silver.<source>`` with its columns in the wider types of ``schema`` (a Delta
    column's type changes only by a rewrite; the rows are the same: no data change)."""
    stored = lake.read(spark, SILVER, source.name)
    wanted = {name: types.data_type(t) for name, _, t in types.leaves(schema, source.flatten)}
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
        lake.rewrite(SILVER, source.name, stored.select(*columns), partition_by)


def _conform(lake: LakeResource, source: SourceDeclaration, rows: DataFrame) -> DataFrame:
    """``rows`` with each column the table already has in the table's type (a schema file
    edited to a narrower type does not change the table: its values are cast)."""
    table = lake.find(SILVER, source.name)
    if table is None:
        return rows
    stored = {f.name: f.dataType for f in delta.spark_schema(table).fields}
    return rows.select(
        *[
            F.col(f.name).cast(stored[f.name]).alias(f.name)
            if f.name in stored and stored[f.name] != f.dataType
            else F.col(f.name)
            for f in rows.schema.fields
        ]
    )
