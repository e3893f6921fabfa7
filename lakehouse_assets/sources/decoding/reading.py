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

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import StructField, StructType

from lakehouse_assets.constants import BRONZE, SILVER
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


def schema_path(name: str) -> tuple[str, ...]:
    """Where the schema file of source ``name`` lives, under the lake root."""
    return (SILVER, SCHEMAS_DIR, f"{name}.json")


def load_schema(lake: LakeResource, name: str) -> Schema | None:
    """The persisted schema of source ``name``, or None before the first run (or after a
    deletion, which asks for a new inference).

    Raises:
        SchemaError: the file was edited into something that is not a schema.
    """
    text = lake.read_text(*schema_path(name))
    return types.loads(text, where=lake.path(*schema_path(name))) if text else None


def reinfer_schema(lake: LakeResource, spark: SparkSession, spec: ReadSpec) -> Schema:
    """Infer the source's schema anew from the latest value per key of all of bronze, and
    replace the file with it. Columns the table has keep their types until the data widens them.
    """
    values = evolution.sample(lake.read(spark, BRONZE, spec.name), spec.sample_size)
    schema = evolution.infer(spec.using({}), values)
    lake.write_text(types.dumps(schema), *schema_path(spec.name))
    return schema


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
    lake: LakeResource, spec: ReadSpec, changes: DataFrame, carry: Sequence[str] = ()
) -> Read:
    """The batch read (checkpointed, with the ``carry`` columns) with the file's schema (the
    .avsc's for Avro; inferred on the first run), grown by what the batch shows, in which case
    the batch is read again. The grown schema is saved."""
    stored = schema = load_schema(lake, spec.name)
    if spec.avsc is not None:  # declared, not inferred: the .avsc grows the file's schema
        declared = avro.table_schema(json.loads(spec.avsc), str(spec.avro_schema))
        schema = types.evolve(schema or {}, declared)
    elif schema is None:
        schema = evolution.infer(spec.using({}), evolution.sample(changes, spec.sample_size))
    # Checkpointed, not cached: kept as rows, it costs the read and little more (caching the
    # typed rows in columns took as long again).
    typed = read_records(changes, spec.using(schema), carry).localCheckpoint(eager=True)
    grown = evolution.grow(schema, evolution.issues_of(typed))
    if grown != schema:
        typed = read_records(changes, spec.using(grown), carry).localCheckpoint(eager=True)
    if grown != stored:
        lake.write_text(types.dumps(grown), *schema_path(spec.name))
    added, widened = evolution.changes(stored or {}, grown, spec.flatten, spec.separator)
    return Read(grown, typed, inferred=stored is None and spec.avsc is None,
                added=added, widened=widened)  # fmt: skip
