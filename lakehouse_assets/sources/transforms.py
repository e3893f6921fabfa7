"""Pure Spark logic of the declared sources: JSON values read against a schema (typed columns, a
reason for each record that does not fit), what a batch shows about its schema, and the Kafka
and change-feed columns of the refined rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse_assets.silver.validation import NOT_UTF8, REASON
from lakehouse_assets.sources import schema as types
from lakehouse_assets.sources.schema import Schema, Type

VARIANT = "_variant"
CHANGE_TYPE = "_change_type"  # the bronze change data feed's column
DATE = r"\d{4}-\d{2}-\d{2}"
DATE_TIME = DATE + r"([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?)?)?"
INT_RANGE = (-(2**31), 2**31 - 1)
# Variant type names (``schema_of_variant``) each scalar type takes values of.
VARIANT_KINDS = {
    "boolean": ("BOOLEAN",), "int": ("BIGINT",), "long": ("BIGINT",),
    "double": ("BIGINT", "DOUBLE", "FLOAT", "DECIMAL"), "string": ("STRING",),
    "date": ("STRING",), "timestamp": ("STRING",),
}  # fmt: skip
# The refined rows' Kafka columns, from the bronze record's (the key as text).
KAFKA_COLUMNS = {
    "_kafka_key": "key", "_kafka_topic": "topic", "_kafka_partition": "partition",
    "_kafka_offset": "offset", "_kafka_timestamp": "timestamp",
}  # fmt: skip


def json_path(path: Sequence[str]) -> str:
    """A variant path to a field, every name in brackets (names may hold dots or spaces)."""
    parts = [f"['{name}']" if "'" not in name else f'["{name}"]' for name in path]
    return "$" + "".join(parts)


def sql_path(path: Sequence[str]) -> str:
    """``json_path(path)`` as it is written inside a SQL string literal."""
    return json_path(path).replace("'", "\\'")


def value_at(path: Sequence[str], column: str = VARIANT) -> Column:
    """The variant value at ``path`` (SQL null when absent)."""
    return F.expr(f"variant_get({column}, '{sql_path(path)}')")


def type_at(path: Sequence[str], column: str = VARIANT) -> Column:
    """The variant type name of the value at ``path`` (``VOID`` for a JSON null)."""
    return F.expr(f"schema_of_variant(variant_get({column}, '{sql_path(path)}'))")


def typed_at(path: Sequence[str], spark_type: str, column: str = VARIANT) -> Column:
    """The value at ``path`` as ``spark_type`` (null when absent or not convertible)."""
    return F.expr(f"try_variant_get({column}, '{sql_path(path)}', '{spark_type}')")


def parse_values(records: DataFrame, column: str = "value") -> DataFrame:
    """Records with ``_variant``, their JSON value, and a ``reason`` when it is not a JSON object
    in UTF-8 (null otherwise)."""
    text = F.col(column).cast("string")
    parsed = records.withColumn(VARIANT, F.try_parse_json(text))
    is_object = F.expr(f"schema_of_variant({VARIANT})").startswith("OBJECT")
    reason = (
        F.when(~F.is_valid_utf8(text), F.lit(NOT_UTF8))
        .when(F.col(VARIANT).isNull() | ~is_object, F.lit("malformed json"))
    )  # fmt: skip
    return parsed.withColumn(REASON, reason)


# ----- what a batch shows ------------------------------------------------------------------------
def observe(records: DataFrame, schema: Schema, flatten: bool) -> dict[str, Any]:
    """One pass over the valid records of a batch: the merged type of their values (``seen``),
    and the paths of ``int`` fields holding a value beyond 32 bits and of ``date`` fields holding
    a date-time (both widen)."""
    valid = records.where(F.col(REASON).isNull())
    scalar = [(p, t) for _, p, t in types.leaves(schema, flatten=True) if t in ("int", "date")]
    checks = [
        F.max(_beyond_int(path) if kind == "int" else _date_time_only(path)).alias(f"c{i}")
        for i, (path, kind) in enumerate(scalar)
    ]
    row = valid.agg(F.expr(f"schema_of_variant_agg({VARIANT})").alias("seen"), *checks).first()
    seen = types.observed(row["seen"]) if row and row["seen"] else None
    widened = [p for i, (p, _) in enumerate(scalar) if row and row[f"c{i}"]]
    return {"seen": seen, "widened": widened}


def _beyond_int(path: Sequence[str]) -> Column:
    value = typed_at(path, "bigint")
    return (type_at(path) == "BIGINT") & ~value.between(*INT_RANGE)


def _date_time_only(path: Sequence[str]) -> Column:
    text = typed_at(path, "string")
    return (type_at(path) == "STRING") & ~text.rlike(f"^{DATE}$") & text.rlike(f"^{DATE_TIME}$")


def types_at(records: DataFrame, path: Sequence[str]) -> list[tuple[str, int]]:
    """The variant types of the values at ``path`` in the valid records, with their counts,
    most frequent first (for fields whose values have several types)."""
    valid = records.where(F.col(REASON).isNull())
    counts = valid.groupBy(type_at(path).alias("t")).count().where(F.col("t").isNotNull())
    return [(row["t"], row["count"]) for row in counts.orderBy(F.desc("count"), "t").collect()]


def mixed_paths(seen: Type | None, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths whose values have several types in the batch (arrays count as one value)."""
    if not isinstance(seen, dict):
        return []
    paths = []
    for name, value in seen.items():
        if value == types.MIXED or (isinstance(value, list) and types._has_mixed(value)):
            paths.append((*prefix, name))
        elif isinstance(value, dict):
            paths.extend(mixed_paths(value, (*prefix, name)))
    return paths


# ----- reading records against the schema --------------------------------------------------------
def violations(schema: Schema, flatten: bool, rejected_types: dict[tuple[str, ...], list[str]]):
    """``(condition, reason)`` per rule a record's value must meet to fit ``schema``.

    Args:
        rejected_types: for fields kept whole (arrays, objects not flattened), the variant
            types seen in the batch that the field's type does not accept.
    """
    checks: list[tuple[Column, Column]] = []
    for path in types.nodes(schema) if flatten else ():
        kind = type_at(path)
        misfit = _present(kind) & ~kind.startswith("OBJECT")
        checks.append((misfit, _reason(path, "an object", kind)))
    for _, path, declared in types.leaves(schema, flatten):
        kind = type_at(path)
        if isinstance(declared, str):
            misfit = _present(kind) & ~_fits(path, declared, kind)
        else:
            misfit = kind.isin(*rejected_types.get(path, [])) if path in rejected_types else None
        if misfit is not None:
            expected = declared if isinstance(declared, str) else types.spark_type(declared)
            checks.append((misfit, _reason(path, expected, kind)))
    return checks


def _present(kind: Column) -> Column:
    return kind.isNotNull() & (kind != "VOID")


def _fits(path: Sequence[str], declared: str, kind: Column) -> Column:
    names = VARIANT_KINDS[declared]
    fits = kind.isin(*names) | (kind.startswith("DECIMAL") if "DECIMAL" in names else F.lit(False))
    text = typed_at(path, "string")
    if declared == "int":
        fits = fits & typed_at(path, "bigint").between(*INT_RANGE)
    elif declared == "date":
        fits = fits & text.rlike(f"^{DATE}$") & typed_at(path, "date").isNotNull()
    elif declared == "timestamp":
        fits = fits & text.rlike(f"^{DATE_TIME}$") & typed_at(path, "timestamp").isNotNull()
    return fits


def _reason(path: Sequence[str], expected: str, kind: Column) -> Column:
    prefix = f"incompatible {'.'.join(path)}: expected {expected}, got "
    return F.concat(F.lit(prefix), F.lower(kind))


def with_reason(records: DataFrame, checks: list[tuple[Column, Column]]) -> DataFrame:
    """``records`` whose ``reason`` is the first failing check's (an earlier reason stays)."""
    failure = F.coalesce(F.col(REASON), *[F.when(cond, reason) for cond, reason in checks])
    return records.withColumn(REASON, failure)


def typed_columns(schema: Schema, flatten: bool, empty_as_null: bool) -> list[Column]:
    """The columns of a record read with ``schema`` (strings ``''`` as null if asked)."""
    columns = []
    for name, path, declared in types.leaves(schema, flatten):
        value = typed_at(path, types.spark_type(declared))
        if empty_as_null and declared == "string":
            value = F.nullif(value, F.lit(""))
        columns.append(value.alias(name))
    return columns


def refined(
    records: DataFrame,
    columns: list[Column],
    partitions: Sequence[tuple[str, str | None]],
    keep: Sequence[str | Column] = (),
) -> DataFrame:
    """The refined rows: the typed columns, the Kafka coordinates as ``_kafka_*``, the bronze
    change feed's kind of change as ``_raw_change_type``, derived partition columns, and the
    ``keep`` columns of ``records`` as they are."""
    meta = [F.col(source).alias(name) for name, source in KAFKA_COLUMNS.items()]
    meta[0] = F.col("key").cast("string").alias("_kafka_key")
    if CHANGE_TYPE in records.columns:
        meta.append(F.col(CHANGE_TYPE).alias("_raw_change_type"))
    rows = records.select(*columns, *meta, *keep)
    for column, source in partitions:
        if source is not None:
            rows = rows.withColumn(column, F.to_date(F.col(source)))
    return rows


def newest_per_key(rows: DataFrame, keys: Sequence[str], order: Sequence[str] = ()) -> DataFrame:
    """The newest row of each key: the highest ``order`` values, then the highest Kafka offset."""
    ranking = [F.desc(column) for column in (*order, "_kafka_offset")]
    newest = Window.partitionBy(*keys).orderBy(*ranking)
    return rows.withColumn("_rank", F.row_number().over(newest)).where("_rank = 1").drop("_rank")
