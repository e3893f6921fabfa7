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
OPS = ("c", "u", "d", "r")
SEQUENCE_TYPE = "decimal(38,6)"
OFFSET = "offset"


def _get(column: str, path: str, kind: str | None = None) -> Column:
    if kind is None:
        return F.expr(f"variant_get({column}, '{path}')")
    return F.expr(f"try_variant_get({column}, '{path}', '{kind}')")


def _document(column: str, path: str) -> Column:
    """The object at ``path``: as it is, or parsed from the JSON text MongoDB puts there."""
    value = _get(column, path)
    text = _get(column, path, "string")
    is_text = F.expr(f"schema_of_variant(variant_get({column}, '{path}'))") == "STRING"
    return F.when(is_text, F.try_parse_json(text)).otherwise(value)


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
    that are not changes."""
    wrapped = _present(VARIANT, "$.schema") & _present(VARIANT, "$.payload")
    framed = records.withColumn(
        ENVELOPE, F.when(wrapped, _get(VARIANT, "$.payload")).otherwise(F.col(VARIANT))
    ).withColumn(OP, _get(ENVELOPE, "$.op", "string"))
    op = F.col(OP)
    old = F.coalesce(_document(ENVELOPE, "$.before"), _document(ENVELOPE, "$.filter"))
    new = F.coalesce(_document(ENVELOPE, "$.after"), _document(ENVELOPE, "$.patch"))
    row = F.when(op == "d", old).otherwise(new)
    tombstone = F.col("value").isNull()
    reason = (
        F.when(tombstone, F.lit(None))
        .when(F.col(REASON).isNotNull(), F.col(REASON))
        .when(op.isNull(), F.lit("not a change event: no op"))
        .when(~op.isin(*OPS), F.concat(F.lit("unsupported op "), op))
        .when(F.col(VARIANT).isNull() & (op == "d"), F.lit("delete without before"))
        .when(F.col(VARIANT).isNull(), F.lit("change without after"))
        .when(F.col(SEQUENCE).isNull(), F.lit(f"missing {order_by}"))
    )  # fmt: skip
    return (
        framed.withColumn(VARIANT, row)
        .withColumn(SEQUENCE, sequence(order_by))
        .withColumn(TOMBSTONE, tombstone)
        .withColumn(REASON, reason)
    )
