"""The rules of a declared source across its fields, checked once each field is valid by itself
(``declaration_files`` reports them with the file and line)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from lakehouse_assets.sources.declaration.errors import named_twice
from lakehouse_assets.sources.declaration.expectations import expectation_errors
from lakehouse_assets.sources.declaration.fields import field_errors
from lakehouse_assets.sources.declaration.model import (
    CDC_MODES,
    LANDING,
    OFFSET,
    ROUTE,
    SourceDeclaration,
)
from lakehouse_assets.sources.declaration.routing import routing_errors


def rule_errors(declaration: SourceDeclaration) -> Iterator[tuple[str, str]]:
    """Rules across fields, as ``(field, message)``."""
    if declaration.format == LANDING:
        if declaration.topic is not None or declaration.topic_pattern is not None:
            yield "topic", "a csv source reads the files of landing/<name>/: leave out the topic"
    elif (declaration.topic is None) == (declaration.topic_pattern is None):
        yield "topic", "set exactly one of 'topic' and 'topic_pattern'"
    if declaration.mode in CDC_MODES:
        if declaration.format != "debezium-json":
            yield "format", f"mode {declaration.mode} reads Debezium envelopes: 'debezium-json'"
        if not declaration.keys:
            yield "keys", f"mode {declaration.mode} needs the key columns of the rows"
    if declaration.truncate == "apply" and declaration.mode not in CDC_MODES:
        yield "truncate", "'apply' empties a table of keyed changes: mode cdc-scd1 or cdc-scd2"
    if declaration.mode == "latest-per-key" and declaration.keys and not declaration.fields:
        yield "keys", "latest-per-key keys rows by the Kafka key: leave 'keys' out"
    yield from _columns_once(declaration)
    if declaration.fields:
        yield from field_errors(
            declaration.fields, declaration.format, declaration.mode, declaration.keys,
            bool(declaration.partition_by), declaration.order_by == OFFSET,
        )  # fmt: skip
    elif declaration.format == LANDING:
        yield "fields", "a csv source declares its fields, in file order"
    if declaration.mode == "latest-per-key" and declaration.order_by != OFFSET:
        yield "order_by", "latest-per-key keeps the record of highest offset: leave out 'order_by'"
    if (declaration.format == "avro") != (declaration.avro_schema is not None):
        yield "avro_schema", "an avro source names its .avsc file (and only an avro source)"
    elif declaration.avro_schema is not None:
        from lakehouse_assets.sources.decoding.avro import AvroSchemaError, read_avsc, table_schema

        try:
            table_schema(read_avsc(Path(declaration.avro_schema)), declaration.avro_schema)
        except AvroSchemaError as error:
            yield "avro_schema", str(error)
    yield from routing_errors(
        declaration.mode == ROUTE, declaration.routing, declaration.format, declaration.keys,
        declaration.partition_by,
    )  # fmt: skip
    if declaration.expectations and declaration.mode == ROUTE:
        yield "expectations", "a route-by-type source writes a table per type: no expectations"
    yield from expectation_errors(
        declaration.expectations, declaration.record_columns, declaration.table_columns
    )
    if declaration.mode == "append" and declaration.order_by != OFFSET:
        yield "order_by", "an append source keeps every record: 'order_by' does not apply"


def _columns_once(declaration: SourceDeclaration) -> Iterator[tuple[str, str]]:
    """The lists of columns that name one twice (``date(at)`` is the column ``at_date``)."""
    partitions = [column for column, _ in declaration.partition_columns]
    for field, columns in (("keys", declaration.keys), ("partition_by", partitions)):
        twice = named_twice(columns)
        if twice is not None:
            yield field, twice
