"""Avro sources: each value decoded with the declared ``.avsc`` schema (fastavro, on the
executors) into the JSON text the rest of a declared source reads, and the source's schema
derived from the ``.avsc`` instead of inferred.

Values are Avro binary datums, framed as Confluent's serializers write them (a zero byte and
a 4-byte schema id first) unless the declaration says ``avro_framing: none``. A value that does
not decode is quarantined with the decoder's reason.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import functools
import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from lakehouse_assets.sources.schema import Schema, Type

DECODED = "_decoded"  # the datum as JSON text
ERROR = "_avro_error"
CONFLUENT_HEADER = 5  # magic byte 0, then the schema id (4 bytes, big-endian)
# Avro primitive types as the schema's types (bytes as base64 text, floats as doubles).
PRIMITIVES = {"boolean": "boolean", "int": "int", "long": "long", "float": "double",
              "double": "double", "string": "string", "bytes": "string"}  # fmt: skip
LOGICAL = {"date": "date", "timestamp-millis": "timestamp", "timestamp-micros": "timestamp",
           "local-timestamp-millis": "timestamp", "local-timestamp-micros": "timestamp",
           "decimal": "double", "uuid": "string", "time-millis": "string",
           "time-micros": "string"}  # fmt: skip


class AvroSchemaError(ValueError):
    """An ``.avsc`` file that cannot be read, or that uses a type a table cannot hold."""


def read_avsc(path: Path) -> dict[str, Any]:
    """The Avro schema in ``path`` (a record).

    Raises:
        AvroSchemaError: the file is missing, not JSON, or not a valid Avro record schema.
    """
    import fastavro
    from fastavro.schema import SchemaParseException

    try:
        avsc = json.loads(path.read_text())
        fastavro.parse_schema(avsc)
    except (OSError, ValueError, SchemaParseException) as error:
        raise AvroSchemaError(f"{path}: not a valid Avro schema: {error}") from None
    if not isinstance(avsc, dict) or avsc.get("type") != "record":
        raise AvroSchemaError(f"{path}: the top-level Avro type must be a record")
    return avsc


def table_schema(avsc: dict[str, Any], where: str) -> Schema:
    """The declared source's schema of an Avro record schema.

    Raises:
        AvroSchemaError: a union of several non-null types, or a map.
    """
    schema = _type(avsc, where, {})
    assert isinstance(schema, dict)
    return schema


def _type(avro: Any, where: str, named: dict[str, Type]) -> Type:
    if isinstance(avro, list):  # a union: [null, X] is a nullable X
        others = [t for t in avro if t != "null"]
        if len(others) != 1:
            raise AvroSchemaError(f"{where}: unions of several types are not supported: {avro}")
        return _type(others[0], where, named)
    if isinstance(avro, str):
        if avro in PRIMITIVES:
            return PRIMITIVES[avro]
        if avro in named:
            return named[avro]
        raise AvroSchemaError(f"{where}: unknown Avro type {avro!r}")
    kind, logical = avro.get("type"), avro.get("logicalType")
    if logical in LOGICAL:
        return LOGICAL[logical]
    if kind == "record":
        fields = {
            f["name"]: _type(f["type"], f"{where}.{f['name']}", named) for f in avro["fields"]
        }
        named[avro["name"]] = fields
        return fields
    if kind == "array":
        return [_type(avro["items"], f"{where}[]", named)]
    if kind in ("enum", "fixed"):
        return "string"
    if kind == "map":
        raise AvroSchemaError(f"{where}: Avro maps are not supported")
    return _type(kind, where, named)


def decode(records: DataFrame, avsc: dict[str, Any], framing: str) -> DataFrame:
    """``records`` with ``_decoded``, the JSON text of each value's datum (null when it does not
    decode, with the reason in ``_avro_error``)."""
    decoded = [StructField(DECODED, BinaryType()), StructField(ERROR, StringType())]
    schema = StructType([*records.schema.fields, *decoded])
    decoder = functools.partial(_decode_batches, schema=json.dumps(avsc), framing=framing)
    return records.mapInArrow(decoder, schema)


def _decode_batches(
    batches: Iterator[pa.RecordBatch], schema: str, framing: str
) -> Iterator[pa.RecordBatch]:
    import fastavro

    parsed = fastavro.parse_schema(json.loads(schema))
    for batch in batches:
        decoded, errors = [], []
        for value in batch.column("value").to_pylist():
            text, error = _decode(value, parsed, framing) if value is not None else (None, None)
            decoded.append(text)
            errors.append(error)
        yield pa.RecordBatch.from_arrays(
            [*batch.columns, pa.array(decoded, pa.binary()), pa.array(errors, pa.string())],
            [*batch.schema.names, DECODED, ERROR],
        )


def _decode(value: bytes, parsed: Any, framing: str) -> tuple[bytes | None, str | None]:
    import fastavro

    if framing == "confluent":
        if len(value) < CONFLUENT_HEADER or value[0] != 0:
            return None, "not avro: no Confluent header (magic byte 0 and a schema id)"
        value = value[CONFLUENT_HEADER:]
    stream = io.BytesIO(value)
    try:
        datum = fastavro.schemaless_reader(stream, parsed, None)
    except Exception as error:  # fastavro raises many kinds on bad input
        return None, f"not avro: {type(error).__name__}: {error}"
    if stream.tell() != len(value):
        return None, f"not avro: {len(value) - stream.tell()} bytes left after the datum"
    return json.dumps(datum, default=_json_value).encode(), None


@functools.singledispatch
def _json_value(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


@_json_value.register
def _(value: dt.date) -> str:  # datetimes too (a subclass): ISO 8601
    return value.isoformat()


@_json_value.register
def _(value: decimal.Decimal) -> float:
    return float(value)


@_json_value.register
def _(value: bytes) -> str:
    return base64.b64encode(value).decode()


@_json_value.register
def _(value: dt.time) -> str:
    return value.isoformat()


@_json_value.register
def _(value: uuid.UUID) -> str:
    return str(value)
