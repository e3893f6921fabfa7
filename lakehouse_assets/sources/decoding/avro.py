"""Avro sources: the declared ``.avsc`` schema read, the source's schema derived from it
instead of inferred, and each value decoded (on the executors, by ``reader.Reader``): Avro
binary datums, framed as Confluent's serializers write them (a zero byte and a 4-byte schema
id first) unless the declaration says ``avro_framing: none``."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
from pathlib import Path
from typing import Any

from lakehouse_assets.sources.decoding.schema import Schema, Type

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


def decode(value: bytes, parsed: Any, framing: str) -> Any:
    """The datum of a value, as the JSON data it reads as (dates, times and decimals as text
    or numbers, bytes as base64); ``parsed``: the ``.avsc`` after ``fastavro.parse_schema``.

    Raises:
        ValueError: the value does not decode (the message is the reason).
    """
    import fastavro

    if framing == "confluent":
        if len(value) < CONFLUENT_HEADER or value[0] != 0:
            raise ValueError("not avro: no Confluent header (magic byte 0 and a schema id)")
        value = value[CONFLUENT_HEADER:]
    stream = io.BytesIO(value)
    try:
        datum = fastavro.schemaless_reader(stream, parsed, None)
    except Exception as error:  # fastavro raises many kinds on bad input
        raise ValueError(f"not avro: {type(error).__name__}: {error}") from None
    if stream.tell() != len(value):
        raise ValueError(f"not avro: {len(value) - stream.tell()} bytes left after the datum")
    return json.loads(json.dumps(datum, default=_json_value))


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return str(value)  # uuid
