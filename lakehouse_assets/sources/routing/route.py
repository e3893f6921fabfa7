"""A ``route-by-type`` source's batch of change notices into the lake: each document read from the
store (in bulk, on the executors), typed with its table's schema, enriched with its user's
location, and merged into ``silver.<domain>_<topic>_<type>`` by id; deletes and moves applied.

Order of writes: the routed tables, then the quarantine, then the document index, which records
the bronze version consumed. Each write carries that version's marker, so a re-run after a crash
skips what was written and neither loses nor repeats a notice.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_type
from pyspark.sql.types import StructField, StructType

from lakehouse_assets.constants import SILVER
from lakehouse_assets.refinement.step import write_quarantine
from lakehouse_assets.refinement.step_asset import StepRun
from lakehouse_assets.sources.declaration.model import SourceDeclaration
from lakehouse_assets.sources.declaration.routing import Routing
from lakehouse_assets.sources.decoding import schema as types
from lakehouse_assets.sources.decoding.reader import SKIPPED
from lakehouse_assets.sources.decoding.reading import read_growing
from lakehouse_assets.sources.routing import documents, notices
from lakehouse_assets.sources.writing import transforms
from lakehouse_assets.sources.writing.writes import widen_table
from lakehouse_assets.validation import REASON, kafka_quarantine
from resources import LakeResource
from resources.delta import Markers
from resources.delta_merge import later

INDEX_SUFFIX, LOCATIONS_SUFFIX = "_documents", "_locations"
MONTH = "month"
USER = "_user"
# What a routed table keeps of its notice besides the document's fields.
CARRY = [notices.SEQUENCE]


def index_table(source: SourceDeclaration) -> str:
    """The document index: where each document is, as of which notice."""
    return f"{source.name}{INDEX_SUFFIX}"


def locations_table(source: SourceDeclaration) -> str:
    """The location hierarchy (silver), and its bronze stream of location records."""
    return f"{source.name}{LOCATIONS_SUFFIX}"


@dataclass
class RoutedTable:
    """One routed table written by a batch."""

    table: str
    partition: str  # <domain>/<topic>/<type>
    rows: int = 0  # documents upserted
    deleted: int = 0  # documents deleted (or moved away)
    added: list[str] = field(default_factory=list)


@dataclass
class Routed:
    """What one run did with a batch of change notices."""

    read: int = 0
    rejected: int = 0  # notices and documents quarantined
    filtered: int = 0  # notices of domains or types not kept
    missing: int = 0  # documents the store no longer has (deleted meanwhile): skipped
    lookups: int = 0  # queries to the document store
    tables: list[RoutedTable] = field(default_factory=list)

    def metadata(self) -> dict[str, Any]:
        return {
            "notices_read": self.read,
            "records_rejected": self.rejected,
            "notices_filtered": self.filtered,
            "documents_missing": self.missing,
            "document_store_queries": self.lookups,
            "tables_written": len(self.tables),
        }


def update_locations(
    lake: LakeResource, source: SourceDeclaration, records: DataFrame, markers: Markers
) -> int:
    """Merge the newest valid record of each location among ``records`` into the hierarchy;
    the invalid ones go to the source's quarantine with their reason. Returns how many."""
    hierarchy = routing_of(source).locations
    if hierarchy is None:
        raise ValueError(f"{source.name} declares no location hierarchy")
    read = notices.locations(records, hierarchy.levels).localCheckpoint(eager=True)
    rejected = _quarantine(lake, source, [kafka_quarantine(read)], markers)
    table = locations_table(source)
    if not lake.holds(SILVER, table, markers):
        latest = notices.newest_locations(read).localCheckpoint()
        lake.merge(SILVER, table, latest, ["location_id"], markers=markers)
    return rejected


def route(
    run: StepRun,
    source: SourceDeclaration,
    store_url: str,
    register: Callable[[list[str]], None] = lambda partitions: None,
) -> Routed:
    """Apply the notices among the run's changes (bronze rows) to the routed tables and the
    index; ``register`` learns the partition keys of the tables written before they are."""
    lake, spark, changes, markers = run.lake, run.spark, run.changes.rows, run.markers
    routing = routing_of(source)
    done = Routed()
    read = notices.notices(changes, routing, source.order_by).localCheckpoint(eager=True)
    valid = read.where(F.col(REASON).isNull())
    kept = notices.allowed(valid, routing)
    totals = read.agg(F.count(F.lit(1)).alias("read"), F.count(REASON).alias("invalid"))
    counts = totals.crossJoin(kept.agg(F.count(F.lit(1)).alias("kept"))).first()  # one query
    assert counts is not None  # aggregations without grouping have one row each
    done.read, done.filtered = counts["read"], counts["read"] - counts["invalid"] - counts["kept"]
    planned = notices.plan(notices.newest(kept), _index(lake, spark, source)).localCheckpoint()
    fetched = _fetch(planned.where(~F.col(notices.DELETED)), routing, store_url)
    found = fetched.where(F.col(documents.DOCUMENT).isNotNull())
    counts = fetched.agg(F.sum(documents.LOOKUPS), F.count_if(F.col(documents.DOCUMENT).isNull()))
    done.lookups, done.missing = (int(value or 0) for value in counts.first() or (0, 0))
    removals: dict[str, list[str]] = {}  # per table, the ids to delete there
    for table, document_id in notices.deletes(planned).collect():
        removals.setdefault(table, []).append(document_id)
    rejects = [kafka_quarantine(read)]
    targets = _targets(found, removals)
    register([partition for _, partition, _ in targets if partition])
    ancestors = _ancestors(lake, spark, source)
    for table, partition, kind in targets:
        written = RoutedTable(table, partition)
        docs = found.where(F.col(notices.TABLE) == table)
        gone = removals.get(table, [])
        rejected = _write_table(lake, source, kind, docs, gone, ancestors, markers, written)
        rejects += [rejected] if rejected is not None else []
        done.tables.append(written)
    done.rejected = _quarantine(lake, source, rejects, markers)
    missing = fetched.where(F.col(documents.DOCUMENT).isNull()).select(notices.ID)
    index = notices.index_rows(planned.join(missing, notices.ID, "left_anti")).localCheckpoint()
    lake.merge(
        SILVER, index_table(source), index, [notices.ID], markers=markers,
        update_when=later(notices.SEQUENCE),
    )  # fmt: skip
    return done


def routing_of(source: SourceDeclaration) -> Routing:
    """The source's routing block.

    Raises:
        ValueError: the source is not a route-by-type source.
    """
    if source.routing is None:
        raise ValueError(f"{source.name} is not a route-by-type source")
    return source.routing


def _index(lake: LakeResource, spark: SparkSession, source: SourceDeclaration) -> DataFrame:
    if lake.exists(SILVER, index_table(source)):
        return lake.read(spark, SILVER, index_table(source))
    columns = f"{notices.ID} string, {notices.TABLE} string, {notices.SEQUENCE} decimal(38,6)"
    return spark.createDataFrame([], columns)


def _fetch(upserts: DataFrame, routing: Routing, store_url: str) -> DataFrame:
    """``upserts`` with their documents read from the store (checkpointed: one read)."""
    tables = {kind: declared.table for kind, declared in routing.documents.items()}
    read = functools.partial(
        documents.read_documents, url=store_url, tables=tables, kind_column=notices.KIND,
        id_column=notices.ID,
    )  # fmt: skip
    added = [StructField(name, from_arrow_type(kind)) for name, kind in documents.output_fields()]
    schema = StructType([*upserts.schema.fields, *added])
    return upserts.mapInArrow(read, schema).localCheckpoint(eager=True)


def _targets(found: DataFrame, removals: dict[str, list[str]]) -> list[tuple[str, str, str | None]]:
    """``(table, partition key, document kind)`` of each table the batch writes to, by name."""
    seen = found.select(notices.TABLE, notices.DOMAIN, "topic", notices.TYPE, notices.KIND)
    written = {row[0]: (f"{row[1]}/{row[2]}/{row[3]}", row[4]) for row in seen.distinct().collect()}
    for table in removals:
        written.setdefault(table, ("", None))
    return [(table, *written[table]) for table in sorted(written)]


def _write_table(
    lake: LakeResource,
    source: SourceDeclaration,
    kind: str | None,
    docs: DataFrame,
    gone: list[str],
    ancestors: DataFrame | None,
    markers: Markers,
    written: RoutedTable,
) -> DataFrame | None:
    """Merge a table's documents and the deletes of the ids ``gone``; returns its rejected
    documents (quarantine shape)."""
    table_source = source.model_copy(update={"name": written.table})
    schema = f"{notices.ID} string, {notices.DELETED} boolean"
    deletes = docs.sparkSession.createDataFrame([(id_, True) for id_ in gone], schema)
    written.deleted = len(gone)
    if kind is None:  # deletes only
        if lake.exists(SILVER, written.table) and not lake.holds(SILVER, written.table, markers):
            _merge(lake, source, written.table, deletes, markers)
        return None
    as_changes = docs.select(
        *notices.KAFKA, F.col(notices.ID).cast("binary").alias("key"),
        F.col(documents.DOCUMENT).alias("value"), *CARRY,
    )  # fmt: skip
    read = read_growing(lake, table_source.read_spec(), as_changes, CARRY)
    schema, typed = read.schema, read.records
    written.added = read.added
    if read.widened and lake.exists(SILVER, written.table):  # before the merge: no casts
        widen_table(lake, typed.sparkSession, table_source, schema)
    valid = typed.where(F.col(REASON).isNull() & ~F.col(SKIPPED))
    columns = [c for c, _, _ in types.leaves(schema, True, source.separator) if c != notices.ID]
    rows = _enriched(source, kind, transforms.refined(valid, columns, [], CARRY), ancestors)
    if not lake.holds(SILVER, written.table, markers):
        upserts = rows.withColumn(notices.DELETED, F.lit(False)).localCheckpoint()
        written.rows = upserts.count()
        changes = upserts.unionByName(deletes, allowMissingColumns=True)
        _merge(lake, source, written.table, changes, markers)
    return kafka_quarantine(typed)


def _merge(
    lake: LakeResource, source: SourceDeclaration, table: str, changes: DataFrame, markers: Markers
) -> None:
    partition_by = [column for column, _ in source.partition_columns]
    lake.merge(
        SILVER, table, changes, [notices.ID], markers=markers, delete_flag=notices.DELETED,
        partition_by=partition_by, within_partitions=False,
    )  # fmt: skip


def _ancestors(
    lake: LakeResource, spark: SparkSession, source: SourceDeclaration
) -> DataFrame | None:
    """Each user's location ids (``notices.user_ancestors``; checkpointed: computed once per
    batch), or None without a location hierarchy."""
    locations = routing_of(source).locations
    if locations is None or not lake.exists(SILVER, locations_table(source)):
        return None
    hierarchy = lake.read(spark, SILVER, locations_table(source))
    return notices.user_ancestors(hierarchy, locations.levels).localCheckpoint(eager=True)


def _enriched(
    source: SourceDeclaration, kind: str, rows: DataFrame, ancestors: DataFrame | None
) -> DataFrame:
    """``rows`` with ``_id``, ``month`` (the first day of the month of the kind's date field)
    and the location ids of the document's user (nulls without a location)."""
    routing = routing_of(source)
    declared = routing.documents[kind]
    rows = rows.withColumn(notices.ID, F.col("_kafka_key"))
    month_column = declared.month_from.replace(".", source.separator)
    month = F.trunc(F.try_to_timestamp(F.col(f"`{month_column}`")), "month").cast("date")
    rows = rows.withColumn(
        MONTH, month if month_column in rows.columns else F.lit(None).cast("date")
    )
    if routing.locations is None:
        return rows
    levels = routing.locations.columns
    user_column = (declared.user_from or "").replace(".", source.separator)
    user = F.col(f"`{user_column}`").cast("string") if user_column in rows.columns else F.lit(None)
    rows = rows.withColumn(USER, user.cast("string"))
    if ancestors is not None:
        return rows.join(ancestors, USER, "left").drop(USER)
    return rows.drop(USER).select("*", *[F.lit(None).cast("string").alias(c) for c in levels])


def _quarantine(
    lake: LakeResource, source: SourceDeclaration, rejects: list[DataFrame], markers: Markers
) -> int:
    """Append the batch's rejected notices and documents; returns how many."""
    return write_quarantine(
        lake, source.name, functools.reduce(DataFrame.unionByName, rejects), markers
    )
