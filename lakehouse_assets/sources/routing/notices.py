"""Pure Spark logic of a ``route-by-type`` source (``declaration.routing``): change notices read
and checked, filtered to the allowed domains and types, the newest notice of each document, what
it does to the lake given the document index, and the location hierarchy.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, BooleanType, StringType, StructField, StructType

from lakehouse_assets.sources.declaration.routing import DELETED_SUFFIX, Routing
from lakehouse_assets.validation import REASON, TOMBSTONE

OFFSET = "offset"
# The fields of a change notice the lakehouse reads (others are ignored).
NOTICE = StructType(
    [
        StructField("document_id", StringType()),
        StructField("document_type", StringType()),
        StructField("document_subtype", StringType()),
        StructField("domain", StringType()),
        StructField("is_deletion", BooleanType()),
    ]
)
LOCATION = StructType(
    [
        StructField("location_id", StringType()),
        StructField("location_type", StringType()),
        StructField("parent_location_id", StringType()),
        StructField("user_ids", ArrayType(StringType())),
    ]
)
# The document index (silver.<source>_documents): where each document is, as of which notice.
ID, TABLE, DOMAIN, TYPE, KIND = "_id", "_table", "_domain", "_type", "_kind"
DELETED, SEQUENCE = "_deleted", "_sequence"
KAFKA = ["topic", "partition", OFFSET, "timestamp", "ingested_at"]


def sequence_of(order_by: str) -> Column:
    """A notice's place in its document's history: the ``order_by`` field of the value (a
    number, or an ISO date-time as epoch seconds), or the Kafka offset."""
    if order_by == OFFSET:
        return F.col(OFFSET).cast("decimal(38,6)")
    text = F.get_json_object(F.col("value").cast("string"), f"$.{order_by}")
    seconds = F.unix_micros(F.try_to_timestamp(text)).cast("decimal(38,6)") / 1_000_000
    return F.coalesce(text.try_cast("decimal(38,6)"), seconds.cast("decimal(38,6)"))


def notices(changes: DataFrame, routing: Routing, order_by: str) -> DataFrame:
    """Bronze change records read as notices: ``_id``, ``_kind`` (the document type without
    ``-Deleted``), ``_domain``, ``_type``, ``_deleted``, ``_sequence``, the Kafka columns, and
    ``reason`` (null when the notice is valid)."""
    text = F.col("value").cast("string")
    notice = F.from_json(text, NOTICE)
    document_type = notice["document_type"]
    kind = F.regexp_replace(document_type, f"{DELETED_SUFFIX}$", "")
    deleted = document_type.endswith(DELETED_SUFFIX) | F.coalesce(
        notice["is_deletion"], F.lit(False)
    )
    subtype = F.nullif(notice["document_subtype"], F.lit(""))
    kinds = list(routing.documents)
    reason = (
        F.when(F.col("value").isNull(), TOMBSTONE)
        .when(F.get_json_object(text, "$").isNull(), "malformed json")
        .when(F.coalesce(notice["document_id"], F.lit("")) == "", "missing document_id")
        .when(notice["domain"].isNull(), "missing domain")
        .when(document_type.isNull(), "missing document_type")
        .when(
            ~kind.isin(kinds),
            F.concat(F.lit("document_type "), document_type, F.lit(f" is not one of {kinds}")),
        )
        .when(~deleted & subtype.isNull(), "missing document_subtype")
        .when(sequence_of(order_by).isNull(), f"missing {order_by}")
    )
    return changes.select(
        *KAFKA,
        "key",
        "value",
        notice["document_id"].alias(ID),
        kind.alias(KIND),
        notice["domain"].alias(DOMAIN),
        F.when(subtype.isNotNull(), F.regexp_extract(subtype, r"([^/]*)/*$", 1)).alias(TYPE),
        deleted.alias(DELETED),
        sequence_of(order_by).alias(SEQUENCE),
        reason.alias(REASON),
    )


def allowed(valid: DataFrame, routing: Routing) -> DataFrame:
    """The notices of the allowed domains and types (a hard delete names no type: it is kept,
    and deletes only a document the lake holds, which was allowed)."""
    kept = valid
    if routing.domains:
        kept = kept.where(F.col(DOMAIN).isin(list(routing.domains)))
    if routing.types:
        kept = kept.where(F.col(TYPE).isin(list(routing.types)) | F.col(TYPE).isNull())
    return kept


def newest(valid: DataFrame) -> DataFrame:
    """The newest notice of each document: the highest ``_sequence``, then the highest offset
    (a delete and an upsert of one document in one batch: the later wins)."""
    order = Window.partitionBy(ID).orderBy(F.desc(SEQUENCE), F.desc(OFFSET))
    return valid.withColumn("_rank", F.row_number().over(order)).where("_rank = 1").drop("_rank")


def table_column() -> Column:
    """``<domain>_<topic>_<type>`` in lower case, other characters than ``[a-z0-9_]`` as ``_``
    (``routing.table_name`` on columns)."""
    name = F.lower(F.concat_ws("_", F.col(DOMAIN), F.col("topic"), F.col(TYPE)))
    return F.regexp_replace(name, "[^a-z0-9_]", "_")


def plan(latest: DataFrame, index: DataFrame) -> DataFrame:
    """What each document's newest notice does, given the index (``_id``, ``_table``,
    ``_sequence``, ...): only notices newer than the index's count. Adds ``_table`` (where the
    document goes; for a delete, where it is) and ``_stored_table`` (where it is now, if
    elsewhere: a move deletes it there)."""
    stored = index.select(
        F.col(ID), F.col(TABLE).alias("_stored_table"), F.col(SEQUENCE).alias("_stored_sequence")
    )
    joined = latest.join(stored, ID, "left")
    newer = joined.where(
        F.col("_stored_sequence").isNull() | (F.col(SEQUENCE) > F.col("_stored_sequence"))
    )
    target = F.when(F.col(TYPE).isNotNull(), table_column()).otherwise(F.col("_stored_table"))
    moved_from = F.when(F.col("_stored_table") != target, F.col("_stored_table"))
    return (
        newer.withColumn(TABLE, target)
        .withColumn("_stored_table", moved_from)
        .drop("_stored_sequence")
    )


def index_rows(planned: DataFrame) -> DataFrame:
    """The index rows of planned notices (a delete of a document the lake never held too: a
    late older upsert must not bring it in)."""
    return planned.select(ID, TABLE, DOMAIN, TYPE, DELETED, SEQUENCE, F.col(OFFSET).alias(
        "_kafka_offset"), F.col("topic").alias("_kafka_topic"))  # fmt: skip


def deletes(planned: DataFrame) -> DataFrame:
    """``(_table, _id)`` of every row to delete: deleted documents where the lake holds them,
    and moved documents where they were."""
    removed = planned.where(F.col(DELETED) & F.col(TABLE).isNotNull()).select(TABLE, ID)
    moved = planned.where(F.col("_stored_table").isNotNull()).select(
        F.col("_stored_table").alias(TABLE), ID
    )
    return removed.unionByName(moved)


def locations(records: DataFrame, levels: Sequence[str]) -> DataFrame:
    """Bronze location records read: ``location_id``, ``location_type``,
    ``parent_location_id``, ``user_ids``, the Kafka columns, ``value`` and ``reason`` (null when
    the record is valid: a JSON object of the four fields alone, with a ``location_id`` and a
    ``location_type`` among ``levels``). Tombstones are left out."""
    text = F.col("value").cast("string")
    known = [field.name for field in LOCATION.fields]
    keys = F.json_object_keys(text)
    unknown = F.array_except(keys, F.array(*[F.lit(name) for name in known]))
    location = F.from_json(text, LOCATION)
    kind = location["location_type"]
    reason = (
        F.when(keys.isNull(), "malformed json")
        .when(
            F.size(unknown) > 0,
            F.concat(
                F.lit("unknown field "),
                F.array_join(unknown, ", "),
                F.lit(f" (a location has {', '.join(known)})"),
            ),
        )
        .when(F.coalesce(location["location_id"], F.lit("")) == "", "missing location_id")
        .when(
            kind.isNull() | ~kind.isin(*levels),
            F.concat(
                F.lit("location_type "),
                F.coalesce(kind, F.lit("null")),
                F.lit(f" is not one of {list(levels)}"),
            ),
        )
    )
    return (
        records.where(F.col("value").isNotNull())
        .select(location.alias("location"), *KAFKA, "value", reason.alias("reason"))
        .select("location.*", *KAFKA, "value", "reason")
    )


def newest_locations(read: DataFrame) -> DataFrame:
    """The newest valid record of each location (by offset) among ``locations``' rows."""
    valid = read.where(F.col("reason").isNull())
    order = Window.partitionBy("location_id").orderBy(F.desc(OFFSET))
    latest = valid.withColumn("_rank", F.row_number().over(order)).where("_rank = 1")
    return latest.select(*[field.name for field in LOCATION.fields])


def user_ancestors(hierarchy: DataFrame, levels: Sequence[str]) -> DataFrame:
    """Per user: ``_user`` and ``<level>_id`` of the user's location and each ancestor, by
    location type (null where the hierarchy has no location of that type)."""
    nodes = hierarchy.select("location_id", "location_type", "parent_location_id")
    steps = nodes.select(
        F.col("location_id").alias("_origin"),
        F.col("location_id").alias("_at"),
        F.col("location_type").alias("_at_type"),
        F.col("parent_location_id").alias("_parent"),
    )
    reached = steps
    for _ in range(len(levels)):  # a path is at most as long as the levels
        parents = nodes.select(
            F.col("location_id").alias("_parent"),
            F.col("location_id").alias("_at"),
            F.col("location_type").alias("_at_type"),
            F.col("parent_location_id").alias("_next"),
        )
        steps = (
            steps.select("_origin", "_parent")
            .join(parents, "_parent")
            .select("_origin", "_at", "_at_type", F.col("_next").alias("_parent"))
        )
        reached = reached.unionByName(steps)
    by_type = reached.groupBy("_origin").pivot("_at_type", list(levels)).agg(F.first("_at"))
    ids = by_type.select("_origin", *[F.col(level).alias(f"{level}_id") for level in levels])
    users = hierarchy.select(
        F.col("location_id").alias("_origin"), F.explode("user_ids").alias("_user")
    )
    return users.join(ids, "_origin").drop("_origin").dropDuplicates(["_user"])
