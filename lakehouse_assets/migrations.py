"""Upgrades of tables written by earlier versions of the lakehouse to this version's layout.

``lakehouse migrate`` runs them. An asset that finds one of its tables in an earlier layout
refuses to write to it, and its error names that command: nothing is converted behind the user's
back, and nothing already in the lake is lost.

- Kafka bronze tables held the key and the value as text (bytes that were not UTF-8 had been
  replaced by U+FFFD, so those original bytes are gone for good) and had no ``timestampType`` or
  ``headers``. Upgraded, every row is kept: key and value become the UTF-8 bytes of that text,
  ``timestampType`` and ``headers`` null (unknown).
- Quarantine tables held ``raw`` as text: it becomes its UTF-8 bytes, and ``raw_text`` the text.

An upgrade rewrites the table in one commit whose files are marked as no data change, so the
silver tables reading its change data feed do not take the rows again, and the streams' exactly-
once markers are kept. Run it while no run writes to the lake.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.bronze.transforms import KAFKA_BRONZE_PARTITION
from lakehouse_assets.constants import (
    BRONZE,
    KAFKA_TOPICS,
    LANDING_COLUMNS,
    QUARANTINE_SUFFIX,
    SILVER,
)
from resources import LakeResource, delta
from resources.kafka_source import HEADERS_SQL_TYPE

MIGRATE_COMMAND = "lakehouse migrate"


@dataclass(frozen=True)
class Upgrade:
    """How a table of an earlier layout is recognised and rewritten."""

    layer: str
    table: str
    text_column: str  # a column that earlier layouts hold as text and this one as bytes
    change: str  # what the upgrade does, for the user
    upgrade: Callable[[DataFrame], DataFrame]
    partition_by: tuple[str, ...] = ()


class OutdatedTableError(RuntimeError):
    """A table is in the layout of an earlier version: ``lakehouse migrate`` upgrades it."""


def _kafka_bronze(rows: DataFrame) -> DataFrame:
    return rows.select(
        F.col("key").cast("binary").alias("key"), F.col("value").cast("binary").alias("value"),
        "topic", "partition", "offset", "timestamp",
        F.lit(None).cast("int").alias("timestampType"),
        F.lit(None).cast(HEADERS_SQL_TYPE).alias("headers"),
        "ingested_at", KAFKA_BRONZE_PARTITION,
    )  # fmt: skip


def _quarantine(rows: DataFrame) -> DataFrame:
    return rows.select(
        "source", "partition", "offset",
        F.col("raw").cast("binary").alias("raw"), F.col("raw").alias("raw_text"),
        "reason", "ingested_at",
    )  # fmt: skip


UPGRADES = (
    *(
        Upgrade(BRONZE, topic, "value", "key and value as bytes, with timestampType and headers",
                _kafka_bronze, (KAFKA_BRONZE_PARTITION,))
        for topic in KAFKA_TOPICS
    ),
    *(
        Upgrade(SILVER, f"{source}{QUARANTINE_SUFFIX}", "raw", "raw as bytes, with raw_text",
                _quarantine)
        for source in (*KAFKA_TOPICS, *LANDING_COLUMNS)
    ),
)  # fmt: skip


def _outdated(lake: LakeResource, upgrade: Upgrade) -> bool:
    snapshot = lake.find(upgrade.layer, upgrade.table)
    if snapshot is None:
        return False
    schema = delta.spark_schema(snapshot)
    column = upgrade.text_column
    return column in schema.fieldNames() and schema[column].dataType.typeName() == "string"


def pending(lake: LakeResource) -> list[Upgrade]:
    """The upgrades the lake's tables need."""
    return [upgrade for upgrade in UPGRADES if _outdated(lake, upgrade)]


def require_current(lake: LakeResource, layer: str, table: str) -> None:
    """Raise ``OutdatedTableError`` when ``layer.table`` is in an earlier layout."""
    for upgrade in UPGRADES:
        if (upgrade.layer, upgrade.table) == (layer, table) and _outdated(lake, upgrade):
            raise OutdatedTableError(
                f"The table {layer}.{table} ({lake.table_uri(layer, table)}) was written by an "
                f"earlier version of the lakehouse, with {upgrade.text_column} as text. Run "
                f"`{MIGRATE_COMMAND}` once, while no run writes to the lake ({upgrade.change}; "
                "every row is kept), then run again."
            )


def migrate(spark: SparkSession, lake: LakeResource, upgrade: Upgrade) -> int:
    """Rewrite one table in this version's layout; returns its new version."""
    return delta.rewrite(
        upgrade.upgrade(lake.read(spark, upgrade.layer, upgrade.table)),
        lake.table_uri(upgrade.layer, upgrade.table),
        upgrade.partition_by,
        lake.storage_options,
        metadata={"migration": upgrade.change},
    )
