"""How a declared source's bronze batch is read: with the source's schema (its file's; the .avsc's
for Avro; inferred from the newest records on the first run), grown by what the batch shows and
saved, its records decoded on the executors (``reader.read_batches``).

The schema file is written before any table: a crash after it leaves a schema that already
describes the batch the re-run reads again.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import StructField, StructType

from lakehouse_assets.constants import BRONZE, SILVER
from lakehouse_assets.sources.declaration.model import CDC_MODES, SourceDeclaration
from lakehouse_assets.sources.decoding import avro, evolution
from lakehouse_assets.sources.decoding import schema as types
from lakehouse_assets.sources.decoding.read_spec import ReadSpec
from lakehouse_assets.sources.decoding.reader import output_fields, read_batches
from lakehouse_assets.sources.decoding.schema import Schema
from resources import LakeResource

SCHEMAS_DIR = "_schemas"  # <root>/silver/_schemas/<source>.json, beside the silver tables
# The bronze columns the reader reads or carries (the change feed's kind of change included).
READ_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "ingested_at",
                "_change_type")  # fmt: skip


@dataclass(frozen=True)
class Read:
    """A batch read: the schema it was read with, its records, and what the batch changed of
    the schema."""

    schema: Schema
    records: DataFrame  # checkpointed: the typed columns, reason, _issues, ... (``read_records``)
    inferred: bool  # the schema was inferred from this batch (the first run)
    added: list[str]  # leaf columns the batch added
    widened: list[str]  # leaf columns the batch widened


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
        keep_values=rejects_after_reading(source),
    )  # fmt: skip


def rejects_after_reading(source: SourceDeclaration) -> bool:
    """Whether a record the reader accepts may still go to the quarantine, which keeps its
    bytes: by a ``drop`` expectation, or (``cdc-scd2``) by an order value of another kind than
    ``valid_from`` holds."""
    drops = any(expectation.on_violation == "drop" for expectation in source.expectations)
    return drops or source.mode == "cdc-scd2"


def _avsc(source: SourceDeclaration) -> dict[str, Any]:
    return avro.read_avsc(Path(str(source.avro_schema)))


def read_records(changes: DataFrame, spec: ReadSpec, carry: Sequence[str] = ()) -> DataFrame:
    """Bronze changes read on the executors (``reader.read_batches``): the typed columns of the
    schema, ``reason``, ``_issues``, ``_deleted``, ``_skipped`` (and ``_op``, ``_sequence`` for
    Debezium), the value's bytes kept for rejected records only (for every record when
    ``spec.keep_values``); and the ``carry`` columns."""
    read = [*READ_COLUMNS, *carry]
    narrow = changes.select(*[c for c in read if c in changes.columns])
    added = StructType(
        [StructField(name, from_arrow_type(kind)) for name, kind in output_fields(spec)]
    )
    schema = StructType([*narrow.schema.fields, *added.fields])
    return narrow.mapInArrow(functools.partial(read_batches, spec=spec), schema)


def read_growing(
    lake: LakeResource, source: SourceDeclaration, changes: DataFrame, carry: Sequence[str] = ()
) -> Read:
    """The batch read (checkpointed, with the ``carry`` columns) with the file's schema (the
    .avsc's for Avro; inferred on the first run), grown by what the batch shows, in which case
    the batch is read again. The grown schema is saved."""
    stored = schema = load_schema(lake, source)
    if source.format == "avro":  # declared, not inferred: the .avsc grows the file's schema
        declared = avro.table_schema(_avsc(source), str(source.avro_schema))
        schema = types.evolve(schema or {}, declared)
    elif schema is None:
        values = evolution.sample(changes, source.sample_size)
        schema = evolution.infer(read_spec(source, {}), values)
    # Checkpointed, not cached: kept as rows, it costs the read and little more (caching the
    # typed rows in columns took as long again).
    typed = read_records(changes, read_spec(source, schema), carry).localCheckpoint(eager=True)
    grown = evolution.grow(schema, evolution.issues_of(typed))
    if grown != schema:
        typed = read_records(changes, read_spec(source, grown), carry).localCheckpoint(eager=True)
    if grown != stored:
        lake.write_text(types.dumps(grown), *schema_path(source))
    added, widened = evolution.changes(stored or {}, grown, source.flatten, source.separator)
    return Read(grown, typed, inferred=stored is None and source.format != "avro",
                added=added, widened=widened)  # fmt: skip
