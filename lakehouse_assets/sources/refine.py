"""A declared source's bronze changes into its silver table: read with the source's schema
(inferred, persisted, evolved), rejects to the quarantine table, the rest kept as the mode says.

Each write carries the transaction marker of the bronze version read, so a re-run after a crash
neither loses nor repeats a batch. The schema file is written before the tables: a crash between
leaves a schema that already describes the batch the re-run reads again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.constants import BRONZE, SILVER
from lakehouse_assets.silver.validation import REASON, kafka_quarantine
from lakehouse_assets.sources import avro, debezium, evolution, transforms, writes
from lakehouse_assets.sources import schema as types
from lakehouse_assets.sources.cdc import DELETED
from lakehouse_assets.sources.declarations import CDC_MODES, SourceDeclaration
from lakehouse_assets.sources.schema import Schema
from resources import LakeResource
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


def _avsc(source: SourceDeclaration) -> dict[str, Any]:
    return avro.read_avsc(Path(str(source.avro_schema)))


def records_of(changes: DataFrame, source: SourceDeclaration) -> DataFrame:
    """Bronze changes with their parsed value (``_variant``: a Debezium envelope's row), a
    ``reason`` when rejected, ``_deleted`` for the changes that delete their key (tombstones of a
    latest-per-key source, Debezium deletes), and ``_skipped`` for records that change nothing
    (the tombstones following Debezium deletes)."""
    tombstone = F.col("value").isNull()
    if source.format == "avro":  # the datum's JSON text is read; the bytes stay in value
        decoded = avro.decode(changes, _avsc(source), source.avro_framing)
        parsed = transforms.parse_values(decoded, column=avro.DECODED)
        parsed = parsed.withColumn(REASON, F.coalesce(F.col(avro.ERROR), F.col(REASON)))
    else:
        parsed = transforms.parse_values(changes)
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
    records = _narrow(records_of(changes, source).where(~F.col(SKIPPED))).cache()
    done = Refined()
    batch = _batch_schema(lake, spark, source, records, done, rebuild)
    checks = transforms.violations(batch.schema, source.flatten, batch.rejected_types)
    checks += _key_checks(source, batch.schema)
    checked = transforms.with_reason(records, checks)
    columns = transforms.typed_columns(batch.schema, source.flatten, empty_as_null=True)
    keep = [DELETED, *([debezium.OP, debezium.SEQUENCE] if source.mode in CDC_MODES else [])]
    # One pass reads and types every record; the typed rows (and, for rejects, the bytes and
    # coordinates the quarantine keeps) are cached for the writes that follow.
    rejects = [REASON, "topic", "partition", "offset", "ingested_at"]
    raw = F.when(F.col(REASON).isNotNull(), F.col("value")).alias("value")
    typed = transforms.refined(checked, columns, source.partition_columns, [*keep, *rejects, raw])
    done.rejected = _quarantine(lake, source, typed, markers, rebuild)
    rows = typed.where(F.col(REASON).isNull()).drop(*rejects, "value")
    if rebuild:
        done.rows = writes.replace(lake, source, rows, markers)
    elif not lake.holds(SILVER, source.name, markers):
        done.rows = writes.keep(lake, spark, source, writes.conform(lake, source, rows), markers)
    if source.mode in CDC_MODES:
        writes.record_deletes(lake, source, rows, markers, rebuild)
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
    stored = schema = load_schema(lake, source)
    if source.format == "avro":  # declared, not inferred: the .avsc grows the file's schema
        declared = avro.table_schema(_avsc(source), str(source.avro_schema))
        schema = types.evolve(schema or {}, declared)
    elif schema is None:
        schema = evolution.infer(records, source.sample_size)
        done.schema_inferred = True
    batch = evolution.for_batch(records, schema, source.flatten)
    if batch.schema != stored:
        lake.write_text(types.dumps(batch.schema), *schema_path(source))
    done.added, done.widened = batch.added, batch.widened
    if batch.widened and not rebuild and lake.exists(SILVER, source.name):
        writes.widen_table(lake, spark, source, batch.schema)
    return batch


def _narrow(records: DataFrame) -> DataFrame:
    """The columns of parsed records that the refined rows and the quarantine need."""
    unused = {"headers", "timestampType", "date", debezium.ENVELOPE, SKIPPED}
    return records.select(*[c for c in records.columns if c not in unused])


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
    table = writes.quarantine_table(source)
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
