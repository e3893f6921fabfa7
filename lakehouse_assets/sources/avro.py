"""Avro sources: the declared ``.avsc`` schema read, and the source's schema derived from it
instead of inferred. The values are decoded on the executors (``reader.Reader``): Avro binary
datums, framed as Confluent's serializers write them (a zero byte and a 4-byte schema id first)
unless the declaration says ``avro_framing: none``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
