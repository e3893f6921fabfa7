"""Debezium change events (pure Spark): the envelope of each Kafka record, with or without the
``schema``/``payload`` wrapper, reduced to its operation, its row and its order.

Relational connectors carry the row in ``after`` (``c``, ``u``, ``r``) and ``before`` (``d``).
MongoDB connectors carry documents as JSON text: ``after`` (inserts, snapshots, and updates when
the full document is captured), ``patch`` (updates: a replacement document) and ``filter``
(updates and deletes: the document's ``_id``). A tombstone (a record without a value) follows a
delete for log compaction: it changes nothing and is skipped.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.silver.validation import REASON
from lakehouse_assets.sources.transforms import VARIANT, sql_path

ENVELOPE = "_envelope"
OP = "_op"
SEQUENCE = "_sequence"
TOMBSTONE = "_tombstone"
PATCH = "_patch"
OPS = ("c", "u", "d", "r")
SEQUENCE_TYPE = "decimal(38,6)"
OFFSET = "offset"


def _get(column: str, path: str, kind: str | None = None) -> Column:
    if kind is None:
        return F.expr(f"variant_get({column}, '{path}')")
    return F.expr(f"try_variant_get({column}, '{path}', '{kind}')")


# MongoDB extended JSON (as its connector writes documents) to plain JSON values, in order:
# ObjectId as its hex text, numbers and dates as numbers (dates: epoch milliseconds).
EXTENDED_JSON = (
    (r'\{\s*"\$oid"\s*:\s*("[0-9a-fA-F]*")\s*\}', "$1"),
    (r'\{\s*"\$number(Long|Int|Double|Decimal)"\s*:\s*"([-+0-9.eE]+)"\s*\}', "$2"),
    (r'\{\s*"\$date"\s*:\s*([-0-9]+|"[^"]*")\s*\}', "$1"),
)


def _document(column: str, path: str) -> Column:
    """The object at ``path``: as it is, or parsed from the (extended) JSON text MongoDB puts
    there; SQL null when absent or JSON null."""
    value = _get(column, path)
    text = _get(column, path, "string")
    for pattern, replacement in EXTENDED_JSON:
        text = F.regexp_replace(text, pattern, replacement)
    kind = F.expr(f"schema_of_variant(variant_get({column}, '{path}'))")
    return F.when(kind == "STRING", F.try_parse_json(text)).when(kind != "VOID", value)


def _present(column: str, path: str) -> Column:
    kind = F.expr(f"schema_of_variant(variant_get({column}, '{path}'))")
    return kind.isNotNull() & (kind != "VOID")


def sequence(order_by: str) -> Column:
    """The order of a change: the Kafka offset, or the number (or ISO date-time, as
    microseconds) at ``order_by``, a dotted path into the envelope."""
    if order_by == OFFSET:
        return F.col("offset").cast(SEQUENCE_TYPE)
    path = sql_path(order_by.split("."))
    as_time = F.unix_micros(_get(ENVELOPE, path, "timestamp")).cast(SEQUENCE_TYPE)
    return F.coalesce(_get(ENVELOPE, path, SEQUENCE_TYPE), as_time)


def changes(records: DataFrame, order_by: str) -> DataFrame:
    """Parsed records (``transforms.parse_values``) as changes: ``_op`` (c, u, d, r), the row in
    ``_variant`` (what the schema reads), the envelope in ``_envelope``, the order in
    ``_sequence``, ``_tombstone`` for records without a value, and a ``reason`` for envelopes
    that are not changes this reads (a MongoDB partial update among them: ``$set``/``$unset``
    patches need the document they apply to; capture full documents instead)."""
    wrapped = _present(VARIANT, "$.schema") & _present(VARIANT, "$.payload")
    framed = (
        records.withColumn(
            ENVELOPE, F.when(wrapped, _get(VARIANT, "$.payload")).otherwise(F.col(VARIANT))
        )
        .withColumn(OP, _get(ENVELOPE, "$.op", "string"))
        .withColumn(PATCH, _document(ENVELOPE, "$.patch"))
    )
    op = F.col(OP)
    partial = _present(PATCH, '$["$set"]') | _present(PATCH, '$["$unset"]')
    old = F.coalesce(_document(ENVELOPE, "$.before"), _document(ENVELOPE, "$.filter"))
    new = F.coalesce(_document(ENVELOPE, "$.after"), F.when(~partial, F.col(PATCH)))
    tombstone = F.col("value").isNull()
    reason = (
        F.when(tombstone, F.lit(None))
        .when(F.col(REASON).isNotNull(), F.col(REASON))
        .when(op.isNull(), F.lit("not a change event: no op"))
        .when(~op.isin(*OPS), F.concat(F.lit("unsupported op "), op))
        .when(F.col(VARIANT).isNull() & (op == "d"), F.lit("delete without before"))
        .when(F.col(VARIANT).isNull() & partial, F.lit("partial update ($set/$unset)"))
        .when(F.col(VARIANT).isNull(), F.lit("change without after"))
        .when(F.col(SEQUENCE).isNull(), F.lit(f"missing {order_by}"))
    )  # fmt: skip
    return (
        framed.withColumn(VARIANT, F.when(op == "d", old).otherwise(new))
        .withColumn(SEQUENCE, sequence(order_by))
        .withColumn(TOMBSTONE, tombstone)
        .withColumn(REASON, reason)
        .drop(PATCH)
    )
