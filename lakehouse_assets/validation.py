"""Pure validation of raw bronze records, for every pipeline: typed fields, a reason for each
rejected record, and the rows of the quarantine table it goes to.

The first failing rule, in the order the fields are declared, is the reason (the fitness
pipeline's rules are in ``docs/fitness_pipeline.md``). A record with a reason goes to its source's
quarantine table.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

Kind = Literal["integer", "number", "string"]
REASON = "reason"
NOT_UTF8 = "not utf-8"
TOMBSTONE = "no value (tombstone)"  # a Kafka record without a value
HEX_PREFIX = "hex:"  # raw_text of bytes that are not UTF-8 text
# Spark SQL types the fields are read as: epoch seconds keep their microseconds as decimals.
SQL_TYPE = {"integer": "bigint", "number": "decimal(20,6)", "string": "string"}
# What each column of a quarantine table holds (its column schema in the Dagster UI).
QUARANTINE = {
    "source": "Where the record came from: the Kafka topic, or the landing file.",
    "partition": "The record's Kafka partition (null for a landing file's line).",
    "offset": "The record's Kafka offset (null for a landing file's line).",
    "raw": "The rejected record as it came: the Kafka value's bytes, or the line's bytes.",
    "raw_text": "`raw` shown readably: its text when the bytes are UTF-8, else `hex:` and the "
    "bytes in hex.",
    "reason": "Why the record was rejected: the first rule it breaks (e.g. `missing user_id`, "
    "`wrong type heartrate`, `malformed json`, `not utf-8`).",
    "ingested_at": "When bronze ingested the record (UTC).",
}
# The columns in which replays of earlier versions marked a quarantine's records, kept in the
# quarantines they marked (``refinement.replay``).
REPLAYED = {
    "replayed_by": "The run id of the replay that brought the record into the table (null: the "
    "record is open).",
    "replayed_at": "When that replay ran (UTC).",
}
QUARANTINE_AND_REPLAYS = {**QUARANTINE, **REPLAYED}


@dataclass(frozen=True)
class JsonField:
    """A field of a JSON record: its name, path, kind, whether required, and allowed values;
    ``empty_is_null``: an empty string is no value (NULL, and missing when required)."""

    name: str
    kind: Kind
    required: bool = True
    allowed: tuple[str, ...] = ()
    path: str | None = None
    empty_is_null: bool = False

    @property
    def json_path(self) -> str:
        return self.path or f"$.{self.name}"


def _variant_type(path: str) -> Column:
    return F.expr(f"schema_of_variant(variant_get(_variant, '{path}'))")


def _has_kind(variant_type: Column, field: JsonField) -> Column:
    number = variant_type.isin("BIGINT", "DOUBLE", "FLOAT") | variant_type.startswith("DECIMAL")
    if field.kind == "integer":
        # The variant holds an integer beyond a bigint as a decimal (as it holds 3.0) or, beyond
        # 38 digits, a double (as 1e3): the record's text tells a JSON integer apart.
        return (variant_type == "BIGINT") | (number & _integer_text(field))
    if field.kind == "number":
        return number
    return variant_type == "STRING"


def _integer_text(field: JsonField) -> Column:
    """Whether the field's value is written as a JSON integer: digits, no fraction or exponent."""
    written = F.get_json_object(_text(F.col("value")), field.json_path)
    return written.rlike("^-?[0-9]+$")


def _text(raw: Column) -> Column:
    """Bytes as a string, byte for byte (not checked: see ``F.is_valid_utf8``)."""
    return raw.cast("string")


def readable(raw: Column) -> Column:
    """Bytes shown readably: the text when they are UTF-8, else ``hex:`` and their hex digits."""
    text = _text(raw)
    return F.when(F.is_valid_utf8(text), text).otherwise(
        F.concat(F.lit(HEX_PREFIX), F.lower(F.hex(raw)))
    )


def _json_checks(fields: Sequence[JsonField]) -> list[tuple[Column, str]]:
    is_object = F.expr("schema_of_variant(_variant)").startswith("OBJECT")
    checks = [
        (~F.is_valid_utf8(_text(F.col("value"))), NOT_UTF8),
        (F.col("_variant").isNull() | ~is_object, "malformed json"),
    ]
    for field in fields:
        variant_type = _variant_type(field.json_path)
        present = variant_type.isNotNull() & (variant_type != "VOID")
        if field.empty_is_null:
            present &= F.coalesce(_as_text(field) != "", F.lit(True))
        right_kind = _has_kind(variant_type, field)
        if field.required:
            checks.append((~present, f"missing {field.name}"))
        checks.append((present & ~right_kind, f"wrong type {field.name}"))
        # A number of the right kind that its column cannot hold (beyond a bigint or a
        # decimal(20,6), at either end).
        checks.append((present & right_kind & _typed(field).isNull(), f"out of range {field.name}"))
        if field.allowed:
            checks.append(
                (
                    present & right_kind & ~_as_text(field).isin(*field.allowed),
                    f"unknown {field.name}",
                )
            )
    return checks


def _typed(field: JsonField) -> Column:
    """The field's value as its column's type (null when absent or when the type cannot hold
    it)."""
    return F.expr(f"try_variant_get(_variant, '{field.json_path}', '{SQL_TYPE[field.kind]}')")


def _as_text(field: JsonField) -> Column:
    """The field's value read as text (null when absent)."""
    return F.expr(f"try_variant_get(_variant, '{field.json_path}', 'string')")


def first_failure(checks: Sequence[tuple[Column, str]]) -> Column:
    """The message of the first check whose condition is true, else null."""
    return F.coalesce(*[F.when(condition, F.lit(message)) for condition, message in checks])


def parse_json(
    records: DataFrame, fields: Sequence[JsonField], extra: Sequence[tuple[Column, str]] = ()
) -> DataFrame:
    """Kafka bronze rows with each field typed and a ``reason`` (null when the record is valid).

    Args:
        records: bronze rows with ``value`` (the JSON as UTF-8 bytes, or text in tables of
            earlier versions) and the Kafka coordinates; a column named like a field is kept as
            ``record_<name>``.
        fields: the fields to read, in the order their rules apply.
        extra: further ``(condition, reason)`` rules over the typed fields, applied last.
    """
    for field in fields:  # e.g. the JSON "timestamp" meets the Kafka record's timestamp
        if field.name in records.columns:
            records = records.withColumnRenamed(field.name, f"record_{field.name}")
    parsed = records.withColumn("_variant", F.try_parse_json(_text(F.col("value"))))
    typed = []
    for f in fields:
        value = _typed(f)
        if f.empty_is_null and f.kind == "string":
            value = F.nullif(value, F.lit(""))
        typed.append(value.alias(f.name))
    with_fields = parsed.select("*", *typed)
    checks = [*_json_checks(fields), *extra]
    return with_fields.withColumn(REASON, first_failure(checks)).drop("_variant")


def joined_line(columns: Sequence[str]) -> Column:
    """The bytes of a CSV line rebuilt from text ``columns`` (bronze landing tables of earlier
    versions kept the values, not the line): the values joined with commas, nulls as empty."""
    return F.concat_ws(",", *[F.coalesce(F.col(c), F.lit("")) for c in columns]).cast("binary")


def parse_csv(rows: DataFrame, columns: Sequence[str], numeric: Collection[str]) -> DataFrame:
    """Landing lines parsed as CSV, by position: header and blank lines dropped, numeric columns
    as integers, the line's bytes as ``raw``, and a ``reason`` (null when valid).

    Args:
        rows: bronze landing rows: ``line`` (bytes), or, in tables of earlier versions, the
            columns as text.
        columns: the file's columns, in file order (the order their rules apply); all required.
        numeric: those that must be integers.
    """
    if "line" not in rows.columns:  # an earlier layout: the line is rebuilt from its values
        rows = rows.withColumn("line", joined_line(columns)).drop(*columns)
    text = _text(F.col("line"))
    squeezed = F.lower(F.regexp_replace(text, "[\\s\ufeff]", ""))  # spaces, byte order mark
    lines = rows.where((squeezed != ",".join(columns)) & (F.trim(text) != ""))
    fields = F.from_csv(text, ", ".join(f"`{c}` string" for c in columns))
    parsed = lines.select("*", *[fields[c].alias(c) for c in columns])
    checks = [(~F.is_valid_utf8(text), NOT_UTF8)]
    for column in columns:
        value = F.trim(F.col(column))
        checks.append((value.isNull() | (value == ""), f"missing {column}"))
        if column in numeric:
            unfit, integer = value.try_cast("bigint").isNull(), value.rlike("^[+-]?[0-9]+$")
            checks.append((unfit & ~integer, f"wrong type {column}"))
            checks.append((unfit, f"out of range {column}"))  # an integer beyond a bigint
    checked = parsed.withColumn(REASON, first_failure(checks)).withColumnRenamed("line", "raw")
    return checked.select(
        *[F.trim(F.col(c)).try_cast("bigint").alias(c) if c in numeric else c for c in columns],
        *[c for c in checked.columns if c not in columns],
    )


def valid(parsed: DataFrame) -> DataFrame:
    """The records that passed every rule, without the ``reason`` column."""
    return parsed.where(F.col(REASON).isNull()).drop(REASON, "raw")


def kafka_quarantine(parsed: DataFrame) -> DataFrame:
    """Rejected Kafka records in the quarantine shape: coordinates, the value's bytes as
    delivered and shown readably, reason."""
    raw = F.col("value").cast("binary")
    return parsed.where(F.col(REASON).isNotNull()).select(
        F.col("topic").alias("source"), "partition", "offset",
        raw.alias("raw"), readable(raw).alias("raw_text"), REASON, "ingested_at",
    )  # fmt: skip


def csv_quarantine(parsed: DataFrame) -> DataFrame:
    """Rejected landing rows in the quarantine shape: file, the row's bytes and text, reason."""
    return parsed.where(F.col(REASON).isNotNull()).select(
        F.col("source_file").alias("source"),
        F.lit(None).cast("int").alias("partition"),
        F.lit(None).cast("long").alias("offset"),
        "raw",
        readable(F.col("raw")).alias("raw_text"),
        REASON,
        "ingested_at",
    )
