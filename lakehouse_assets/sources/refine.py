"""A declared source's bronze changes into its silver table: read with the source's schema
(inferred, persisted, evolved), rejects to the quarantine table, the rest kept as the mode says.

Each write carries the transaction marker of the bronze version read, so a re-run after a crash
neither loses nor repeats a batch. The schema file is written before the tables: a crash between
leaves a schema that already describes the batch the re-run reads again.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import StructField, StructType

from lakehouse_assets.constants import BRONZE, SILVER
from lakehouse_assets.refinement.step import write_quarantine
from lakehouse_assets.sources import avro, cdc, debezium, evolution, transforms, writes
from lakehouse_assets.sources import schema as types
from lakehouse_assets.sources.declarations import CDC_MODES, SourceDeclaration
from lakehouse_assets.sources.read_spec import ReadSpec
from lakehouse_assets.sources.reader import (
    DELETED,
    OP,
    ORDER_KIND,
    SEQUENCE,
    SKIPPED,
    UNAVAILABLE,
    output_fields,
    read_batches,
)
from lakehouse_assets.sources.schema import Schema
from lakehouse_assets.validation import REASON, kafka_quarantine
from resources import LakeResource
from resources.delta import Markers

SCHEMAS_DIR = "_schemas"  # <root>/silver/_schemas/<source>.json, beside the silver tables
# The bronze columns the reader reads or carries (the change feed's kind of change included).
READ_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "ingested_at",
                "_change_type")  # fmt: skip


@dataclass
class Refined:
    """What one run did to a declared source's silver tables."""

    read: int = 0
    rows: int = 0
    rejected: int = 0
    schema_inferred: bool = False
    added: list[str] = field(default_factory=list)
    widened: list[str] = field(default_factory=list)
    unavailable: list[str] = field(default_factory=list)  # held Debezium's placeholder somewhere
    truncates: int = 0  # Debezium truncates applied
    skipped: int = 0  # records that change no row: tombstones, heartbeats, transaction markers
    waiting: bool = False  # no valid record yet: the batch is read again with the next (``_waits``)
    merged: DataFrame | None = None  # the rows a merge took (``writes.keep``)

    def metadata(self) -> dict[str, Any]:
        return {
            "records_read": self.read,
            "waiting_for_keys": self.waiting,
            "rows_written": self.rows,
            "schema_inferred": self.schema_inferred,
            "columns_added": ", ".join(self.added) or "-",
            "columns_widened": ", ".join(self.widened) or "-",
            "columns_unavailable": ", ".join(self.unavailable) or "-",
            "truncates_applied": self.truncates,
            "records_skipped": self.skipped,
        }


def _waits(source: SourceDeclaration, columns: Sequence[str]) -> bool:
    """Whether the batch waits, written nowhere, to be read again with the next one: a CDC
    source's batch before any valid record has shown its schema the key columns (the batch
    then holds no valid row: no record, only rejects). Its rejects reach the quarantine with
    the first batch that has the keys, once. (A ``cdc-scd2`` source's batch without a valid
    record before its table exists waits too: ``writes.validity``.)"""
    return source.mode in CDC_MODES and not set(source.keys) <= set(columns)


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
    values = evolution.sample(lake.read(spark, BRONZE, source.name), source.sample_size)
    schema = evolution.infer(read_spec(source, {}), values)
    lake.write_text(types.dumps(schema), *schema_path(source))
    return schema


def read_spec(source: SourceDeclaration, schema: Schema) -> ReadSpec:
    """What the executors need to read the source's records with ``schema``."""
    avsc = json.dumps(_avsc(source)) if source.format == "avro" else None
    return ReadSpec(
        schema=schema, flatten=source.flatten, format=source.format, mode=source.mode,
        keys=source.keys if source.mode in CDC_MODES else (), order_by=source.order_by,
        avsc=avsc, avro_framing=source.avro_framing, separator=source.separator,
        keep_empty_strings=source.keeps_empty_strings,
        placeholder=source.unavailable_value_placeholder, truncates=source.truncate == "apply",
    )  # fmt: skip


def _avsc(source: SourceDeclaration) -> dict[str, Any]:
    return avro.read_avsc(Path(str(source.avro_schema)))


def read_records(changes: DataFrame, spec: ReadSpec, carry: Sequence[str] = ()) -> DataFrame:
    """Bronze changes read on the executors (``reader.read_batches``): the typed columns of the
    schema, ``reason``, ``_issues``, ``_deleted``, ``_skipped`` (and ``_op``, ``_sequence`` for
    Debezium), the value's bytes kept for rejected records only; and the ``carry`` columns."""
    read = [*READ_COLUMNS, *carry]
    narrow = changes.select(*[c for c in read if c in changes.columns])
    added = StructType(
        [StructField(name, from_arrow_type(kind)) for name, kind in output_fields(spec)]
    )
    schema = StructType([*narrow.schema.fields, *added.fields])
    return narrow.mapInArrow(functools.partial(read_batches, spec=spec), schema)


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
    done = Refined()
    schema, typed = read_growing(lake, source, changes, done)
    done.read, fill, done.truncates, done.skipped = _batch_facts(typed, source)
    if done.widened and not rebuild and lake.exists(SILVER, source.name):
        writes.widen_table(lake, spark, source, schema)
    columns = [column for column, _, _ in types.leaves(schema, source.flatten, source.separator)]
    waits = _waits(source, columns)
    validity = None
    if source.mode == "cdc-scd2" and not waits:
        validity = writes.validity(lake, source, typed, rebuild)
        waits = validity is None  # no order value yet to type valid_from by
    if waits:
        done.waiting = True
        return done
    if validity is not None:
        typed = _order_of_another_kind(typed, source.order_by, validity)
    done.rejected = write_quarantine(lake, source.name, kafka_quarantine(typed), markers, rebuild)
    valid = typed.where(F.col(REASON).isNull() & ~F.col(SKIPPED))
    fill = done.unavailable = [column for column in fill if column in columns]
    keep = [DELETED, *([OP, SEQUENCE] if source.mode in CDC_MODES else [])]
    rows = transforms.refined(valid, columns, source.partition_columns, [*keep, *_listed(fill)])
    deleting = rows
    if source.truncate == "apply":
        truncates = done.truncates > 0
        rows, deleting = writes.apply_truncates(lake, spark, source, rows, truncates, rebuild)
    if rebuild:
        done.rows = writes.replace(lake, source, rows, markers, validity, fill)
    elif not lake.holds(SILVER, source.name, markers):
        conformed = writes.conform(lake, source, rows)
        done.rows, done.merged = writes.keep(
            lake, spark, source, conformed, markers, validity, fill
        )
    if source.mode in CDC_MODES:
        writes.record_deletes(lake, source, deleting, markers, rebuild)
    return done


def _batch_facts(typed: DataFrame, source: SourceDeclaration) -> tuple[int, list[str], int, int]:
    """The records read and, for CDC, the columns some of them hold Debezium's placeholder in,
    the truncates read and the records skipped: one query (the rows are checkpointed)."""
    if source.mode not in CDC_MODES:
        return typed.count(), [], 0, 0
    listed = F.array_distinct(F.flatten(F.collect_set(UNAVAILABLE)))
    truncates = F.count(F.when(F.col(OP) == debezium.TRUNCATE, True))
    skipped = F.count(F.when(F.col(SKIPPED), True))
    facts = [F.count(F.lit(1)), listed, truncates, skipped]
    row = typed.agg(*[fact.alias(f"_{n}") for n, fact in enumerate(facts)]).first()
    assert row is not None  # an aggregate without grouping has one row
    return row[0], sorted(row[1] or []), row[2], row[3]


def _listed(fill: Sequence[str]) -> list[str]:
    """The placeholders' column, kept while some column needs filling (else the plans of the
    writes are those of a batch without placeholders)."""
    return [UNAVAILABLE] if fill else []


def _order_of_another_kind(typed: DataFrame, order_by: str, validity: str) -> DataFrame:
    """``typed`` with a reason for each record whose order value ``valid_from`` of type
    ``validity`` cannot hold (say a date-time where it holds integers)."""
    kind = F.col(ORDER_KIND)
    other = F.col(REASON).isNull() & ~F.col(SKIPPED) & ~cdc.holds(validity, kind)
    reason = F.concat(F.lit(f"{order_by} is a "), kind, F.lit(f"; valid_from holds {validity}"))
    return typed.withColumn(REASON, F.when(other, reason).otherwise(F.col(REASON)))


def read_growing(
    lake: LakeResource,
    source: SourceDeclaration,
    changes: DataFrame,
    done: Refined,
    carry: Sequence[str] = (),
) -> tuple[Schema, DataFrame]:
    """The schema the batch is read with and the records read with it (checkpointed, with the
    ``carry`` columns): the file's schema (the .avsc's for Avro; inferred on the first run),
    grown by what the batch shows, in which case the batch is read again. The grown schema is
    saved."""
    stored = schema = load_schema(lake, source)
    if source.format == "avro":  # declared, not inferred: the .avsc grows the file's schema
        declared = avro.table_schema(_avsc(source), str(source.avro_schema))
        schema = types.evolve(schema or {}, declared)
    elif schema is None:
        values = evolution.sample(changes, source.sample_size)
        schema = evolution.infer(read_spec(source, {}), values)
        done.schema_inferred = True
    # Checkpointed, not cached: kept as rows, it costs the read and little more (caching the
    # typed rows in columns took as long again).
    typed = read_records(changes, read_spec(source, schema), carry).localCheckpoint(eager=True)
    grown = evolution.grow(schema, evolution.issues_of(typed))
    if grown != schema:
        typed = read_records(changes, read_spec(source, grown), carry).localCheckpoint(eager=True)
    if grown != stored:
        lake.write_text(types.dumps(grown), *schema_path(source))
    done.added, done.widened = evolution.changes(
        stored or {}, grown, source.flatten, source.separator
    )
    return grown, typed
