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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakehouse_assets.constants import (
    BRONZE,
    KAFKA_BRONZE_PARTITION,
    QUARANTINE_SUFFIX,
    SILVER,
    consumer_app_id,
)
from lakehouse_assets.validation import joined_line
from resources import LakeResource, delta, delta_log
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
