"""Upgrades of tables written by earlier versions of the lakehouse to this version's layout.

A pipeline names which of its tables earlier versions wrote in another layout, each with its
upgrade (built here), and ``lakehouse migrate`` runs them. An asset that finds its table in an
earlier layout refuses to write to it, and its error names that command: nothing is converted
behind the user's back, and nothing already in the lake is lost.

- Kafka bronze tables held the key and the value as text (bytes that were not UTF-8 had been
  replaced by U+FFFD, so those original bytes are gone for good) and had no ``timestampType`` or
  ``headers``. Upgraded, every row is kept: key and value become the UTF-8 bytes of that text,
  ``timestampType`` and ``headers`` null (unknown).
- Landing bronze tables held the CSV values as columns of text: each row becomes a ``line``, its
  values joined with commas (the original line was never kept). The silver table reading it
  must have read its current version first: it could not read the rewritten rows' old files.
- Quarantine tables held ``raw`` as text: it becomes its UTF-8 bytes, and ``raw_text`` the text.

An upgrade rewrites the table in one commit whose files are marked as no data change, so the
silver tables reading its change data feed do not take the rows again, and the streams' exactly-
once markers are kept. Run it while no run writes to the lake.

A lake of the versions before Delta Lake for Spark and Spark's Kafka source (tables written by
delta-rs, streams read by a Python Kafka source) is taken over in place:

- Every table is read by Delta Lake for Spark first (``DESCRIBE DETAIL``): its protocol and
  features are printed, and a table Delta cannot read stops the migration naming it.
- The streams keep their checkpoints (their offsets are in the form Spark's Kafka source reads).
  Each bronze table recorded its stream's batches as ``<stream>/<query id>``; Delta's streaming
  sink looks for the query id alone. The last batch is recorded again under that id, so a batch
  the table holds but the checkpoint did not mark as done (a run killed between the two) is
  skipped when the stream runs it again, not written twice.
- ``silver.users`` kept only each user's latest registration; it now keeps them all. When
  bronze holds a registration the table lacks, the table is rebuilt from bronze (a full refresh,
  recorded in the Dagster instance) and the silver tables reading it follow on their next run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakehouse_assets.constants import (
    BRONZE,
    CHECKPOINTS_DIR,
    GOLD,
    KAFKA_BRONZE_PARTITION,
    QUARANTINE_SUFFIX,
    SILVER,
    consumer_app_id,
    stream_name,
)
from lakehouse_assets.profiling.store import PROFILES
from lakehouse_assets.validation import joined_line
from resources import LakeResource, catalog, checkpoints, delta, delta_log
from resources import metastore as metastores
from resources.kafka import HEADERS_SQL_TYPE

MIGRATE_COMMAND = "lakehouse migrate"


@dataclass(frozen=True)
class Upgrade:
    """How a table of an earlier layout is recognised and rewritten."""

    layer: str
    table: str
    outdated: Callable[[StructType], bool]  # whether a schema is of the earlier layout
    earlier: str  # the earlier layout, for the user
    change: str  # what the upgrade does, for the user
    upgrade: Callable[[DataFrame], DataFrame]
    partition_by: tuple[str, ...] = ()
    # Silver tables reading this one's change feed by column names that the upgrade changes:
    # they must have consumed its current version first.
    consumers: tuple[str, ...] = ()


class OutdatedTableError(RuntimeError):
    """A table is in the layout of an earlier version: ``lakehouse migrate`` upgrades it."""


class MigrationError(RuntimeError):
    """An upgrade cannot run yet; the message says what to do first."""


def _text(column: str) -> Callable[[StructType], bool]:
    def holds_text(schema: StructType) -> bool:
        return column in schema.fieldNames() and schema[column].dataType.typeName() == "string"

    return holds_text


def _kafka_bronze(rows: DataFrame) -> DataFrame:
    return rows.select(
        F.col("key").cast("binary").alias("key"), F.col("value").cast("binary").alias("value"),
        "topic", "partition", "offset", "timestamp",
        F.lit(None).cast("int").alias("timestampType"),
        F.lit(None).cast(HEADERS_SQL_TYPE).alias("headers"),
        "ingested_at", KAFKA_BRONZE_PARTITION,
    )  # fmt: skip


def _landing_bronze(columns: tuple[str, ...]) -> Callable[[DataFrame], DataFrame]:
    def upgrade(rows: DataFrame) -> DataFrame:
        return rows.select(joined_line(columns).alias("line"), "source_file", "ingested_at")

    return upgrade


def _quarantine(rows: DataFrame) -> DataFrame:
    return rows.select(
        "source", "partition", "offset",
        F.col("raw").cast("binary").alias("raw"), F.col("raw").alias("raw_text"),
        "reason", "ingested_at",
    )  # fmt: skip


def kafka_bronze_upgrade(topic: str) -> Upgrade:
    """The upgrade of ``bronze.<topic>``, a Kafka bronze table that held key and value as text."""
    return Upgrade(
        BRONZE, topic, _text("value"), "key and value as text",
        "key and value as bytes, with timestampType and headers", _kafka_bronze,
        (KAFKA_BRONZE_PARTITION,),
    )  # fmt: skip


def landing_bronze_upgrade(source: str, columns: tuple[str, ...], consumer: str) -> Upgrade:
    """The upgrade of ``bronze.<source>``, a landing table that held the CSV ``columns`` as
    columns, read by ``silver.<consumer>``."""
    return Upgrade(
        BRONZE, source, lambda schema: "line" not in schema.fieldNames(),
        "the CSV values as columns", "each row as a line of bytes (the values joined with "
        "commas: the original line was not kept)", _landing_bronze(columns),
        consumers=(consumer,),
    )  # fmt: skip


def quarantine_upgrade(source: str) -> Upgrade:
    """The upgrade of ``silver.<source>_quarantine``, which held ``raw`` as text."""
    return Upgrade(
        SILVER, f"{source}{QUARANTINE_SUFFIX}", _text("raw"), "raw as text",
        "raw as bytes, with raw_text", _quarantine,
    )  # fmt: skip


def _outdated(lake: LakeResource, upgrade: Upgrade) -> bool:
    snapshot = lake.find(upgrade.layer, upgrade.table)
    return snapshot is not None and upgrade.outdated(delta_log.spark_schema(snapshot))


def pending(lake: LakeResource, upgrades: Sequence[Upgrade]) -> list[Upgrade]:
    """Those of ``upgrades`` the lake's tables need."""
    return [upgrade for upgrade in upgrades if _outdated(lake, upgrade)]


def require_current(lake: LakeResource, upgrade: Upgrade | None) -> None:
    """Raise ``OutdatedTableError`` when ``upgrade``'s table is in its earlier layout (None: a
    table no earlier version wrote in another layout, nothing to ask).

    Raises:
        OutdatedTableError: the table needs ``lakehouse migrate``.
    """
    if upgrade is not None and _outdated(lake, upgrade):
        layer, table = upgrade.layer, upgrade.table
        raise OutdatedTableError(
            f"The table {layer}.{table} ({lake.table_uri(layer, table)}) was written by an "
            f"earlier version of the lakehouse ({upgrade.earlier}). Run "
            f"`{MIGRATE_COMMAND}` once, while no run writes to the lake ({upgrade.change}; "
            "every row is kept), then run again."
        )


def _readers(lake: LakeResource, source: tuple[str, str]) -> dict[tuple[str, str], int]:
    """``{(silver table, app id): version read}`` of every silver table that recorded reading
    ``source`` (a consumer's table and its quarantine share the consumer's app id)."""
    tables = lake.tables(SILVER)
    readers = {}
    for table in tables:
        app_ids = [consumer_app_id(consumer, source) for consumer in tables]
        for app_id, consumed in lake.committed_versions(SILVER, table, app_ids).items():
            if consumed is not None:
                readers[(table, app_id)] = consumed
    return readers


def migrate(spark: SparkSession, lake: LakeResource, upgrade: Upgrade) -> int:
    """Rewrite one table in this version's layout; returns its new version.

    Raises:
        MigrationError: a consumer has not read the table's current version yet.
    """
    version = lake.version(upgrade.layer, upgrade.table)
    source = (upgrade.layer, upgrade.table)
    readers = _readers(lake, source)
    listed = {(c, consumer_app_id(c, source)): None for c in upgrade.consumers}
    for (table, _), consumed in {**listed, **readers}.items():
        if version is not None and (consumed is None or consumed < version):
            raise MigrationError(
                f"silver.{table} has not yet read {upgrade.layer}.{upgrade.table} up to its "
                f"version {version}, and could not read the rows the upgrade rewrites. "
                f"Materialize silver.{table} first (this version reads the earlier layout), "
                f"then run `{MIGRATE_COMMAND}` again."
            )
    rows = upgrade.upgrade(lake.read(spark, upgrade.layer, upgrade.table))
    rewritten = lake.replace(upgrade.layer, upgrade.table, rows, partition_by=upgrade.partition_by)
    # The rewrite is a data change in Delta (its schema changes): every silver table that had
    # read every row it holds is marked as having read it. (No run writes meanwhile.)
    for table, app_id in readers:
        delta.commit_markers(spark, lake.table_uri(SILVER, table), {app_id: rewritten})
    return rewritten


# ----- lakes of the delta-rs era -----------------------------------------------------------------
LAYERS = (BRONZE, SILVER, GOLD, PROFILES)


def table_protocols(spark: SparkSession, lake: LakeResource) -> list[str]:
    """``layer.table: reader N, writer N, features`` of every table, as Delta Lake for Spark reads
    it (one ``DESCRIBE DETAIL`` each).

    Raises:
        MigrationError: Delta Lake for Spark cannot read a table.
    """
    described = []
    for layer in LAYERS:
        for table in lake.tables(layer):
            uri = lake.table_uri(layer, table)
            try:
                detail = spark.sql(f"DESCRIBE DETAIL {delta.table_name(uri)}").first()
            except Exception as error:
                raise MigrationError(
                    f"Delta Lake for Spark cannot read {layer}.{table} ({uri}): {error}"
                ) from error
            assert detail is not None
            features = ", ".join(detail["tableFeatures"] or []) or "no table features"
            described.append(
                f"{layer}.{table}: reader {detail['minReaderVersion']}, writer "
                f"{detail['minWriterVersion']}, {features}"
            )
    return described


def carry_stream_markers(spark: SparkSession, lake: LakeResource) -> dict[str, int]:
    """Record each bronze table's last batch of the earlier version's stream under the app id
    Delta's streaming sink uses (the query id alone); returns ``{table: batch}`` recorded."""
    carried = {}
    for table in lake.tables(BRONZE):
        query_id = checkpoints.query_id(
            lake.spark_path(CHECKPOINTS_DIR, stream_name(BRONZE, table))
        )
        snapshot = lake.find(BRONZE, table)
        if query_id is None or snapshot is None:
            continue
        earlier = snapshot.transaction_version(f"{stream_name(BRONZE, table)}/{query_id}")
        current = snapshot.transaction_version(query_id)
        if earlier is not None and (current is None or current < earlier):
            delta.commit_markers(spark, lake.table_uri(BRONZE, table), {query_id: earlier})
            carried[table] = earlier
    return carried


def relocate_schemas(metastore: str, lake: LakeResource) -> list[tuple[str, str, str]]:
    """Keep the lake's schemas in a PostgreSQL ``metastore`` in the lake's warehouse folder
    (``resources.catalog.warehouse``), where a version before it let Spark put them in the
    working directory of the first application on the metastore; returns (schema, old, new) of
    each moved (``resources.metastore.relocate_schemas``). An embedded metastore is one
    machine's: its schemas stay where they are."""
    if not metastores.is_postgres(metastore):
        return []
    warehouse = catalog.warehouse(lake.spark_path())
    schemas = [catalog.schema_name(lake.schema_prefix, layer) for layer in LAYERS]
    locations = {schema: f"{warehouse}/{schema}.db" for schema in schemas}
    return metastores.relocate_schemas(metastore, locations, default=warehouse)


def register_tables(spark: SparkSession, lake: LakeResource) -> list[str]:
    """Register every table of the lake in the catalog (``LakeResource.register``); returns
    their names.

    Raises:
        MigrationError: a table's name is registered for another location or cannot be a name,
            or a name registered for a table of this lake whose folder holds no table any more.
    """
    names = []
    for layer in LAYERS:
        tables = lake.tables(layer)
        for table in tables:
            try:
                lake.register(spark, layer, table)
            except (catalog.CatalogClash, catalog.InvalidTableName) as error:
                raise MigrationError(str(error)) from error
            names.append(lake.table_name(layer, table))
        schema = catalog.schema_name(lake.schema_prefix, layer)
        for name, found in catalog.schema_tables(spark, schema).items():
            here = catalog.same_location(found.location, lake.spark_path(layer, name))
            if here and name not in tables:
                raise MigrationError(
                    f"{schema}.{name} is registered for {found.location}, which holds no Delta "
                    f"table any more: restore the table, or drop the name (DROP TABLE "
                    f"{schema}.{name}), then run `{MIGRATE_COMMAND}` again."
                )
    return names
