"""Debezium envelopes with their Kafka Connect schema (``JsonConverter``'s ``{"schema": ...,
"payload": ...}``, Debezium's default) read in columns. The text before ``"payload"`` is the
schema: each distinct one of a batch is read once. What follows is the payload, parsed by
pyarrow's JSON reader (C++) with the types the schema gives its row; each column is then decoded
by its Connect type, in Arrow where the type is a plain number, a date or an epoch timestamp,
else value by value with the record reader's own ``connect.decode``.

A batch is read here only if every record is read as the record reader reads it: every
schema of the batch gives each of its fields exactly the column's type (``connect.column_type``),
and all of them the same fields; every row holds only those fields, every value parses with its
Connect type, fits its column and is not the connector's placeholder; every record is a change
with its row, its keys and its order value. Any other batch (a new column, a truncate, a
heartbeat, anything malformed) goes to the record reader, which quarantines, grows the schema or
fills as it always has.
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as compute

from lakehouse_assets.sources.decoding import connect, debezium
from lakehouse_assets.sources.decoding.json_lines import envelope_fields, lines, read_json
from lakehouse_assets.sources.decoding.read_spec import ReadSpec
from lakehouse_assets.sources.decoding.schema import Schema, arrow_type
from lakehouse_assets.sources.decoding.values import Misfit

pc: Any = compute  # its functions are made at import time: the type checker cannot see them

WRAPPED = b'{"schema"'  # how JsonConverter begins an envelope with its schema
# Where the schema ends: a cut inside it (a key "payload" in it) leaves invalid JSON on each side.
PAYLOAD = r',\s*"payload"\s*:'
MOST_SCHEMAS = 8  # distinct schemas in one batch beyond which the record reader reads it
# The parse types of Connect's primitives (bytes as their base64 text); a named type is parsed
# as its primitive.
WIRE = {
    kind: pa.string() if column == "binary" else arrow_type(column)
    for kind, column in connect.PRIMITIVES.items()
}
# Named types whose value is the primitive itself, by primitive.
IDENTICAL = {
    "string": connect.TEXTS, "int32": ("io.debezium.time.Year",),
    "int64": ("io.debezium.time.MicroDuration",),
}  # fmt: skip
EPOCH_UNITS = {name: 1_000_000 // per for name, per in connect.TIMESTAMPS.items() if per <= 10**6}
DAYS = (-719_162, 2_932_896)  # the dates Python holds (years 1 to 9999), as days since 1970
MICROS = (-62_135_596_800_000_000, 253_402_300_799_999_999)  # its instants, in microseconds


def wrapped(values: pa.Array) -> bool:
    """Whether the first of ``values`` (binary, no nulls) is an envelope with its schema."""
    first = values[:1].to_pylist()
    return bool(first) and first[0].startswith(WRAPPED)


def changes(
    values: pa.Array, spec: ReadSpec
) -> tuple[pa.Array, pa.StructArray, pa.Array | None] | None:
    """``(op, row, order)`` of envelopes with their schema (binary, no nulls), the row in the
    columns of ``spec.schema`` (the order None when ordered by offset); None when the record
    reader must read them."""

    text = lines(values)
    if text is None:
        return None
    parts = pc.split_pattern_regex(text, PAYLOAD, max_splits=1)
    if not pc.all(pc.equal(pc.list_value_length(parts), 2)).as_py():
        return None
    described = fields(pc.list_element(parts, 0), spec.schema)
    if described is None:
        return None
    # What follows the schema, but the envelope's closing brace: the payload, if nothing else.
    payloads = pc.utf8_slice_codeunits(pc.list_element(parts, 1), 0, -1)
    payload = parse(payloads, parse_type(described), spec.order_by)
    if payload is None:
        return None
    op = payload.field("op")
    if op.null_count or not pc.all(pc.is_in(op, pa.array(debezium.OPS))).as_py():
        return None
    wire = pc.if_else(pc.equal(op, "d"), payload.field("before"), payload.field("after"))
    if wire.null_count:
        return None  # a delete without before, a change without after
    columns = []
    for name, declared in spec.schema.items():
        if name not in described:
            columns.append(pa.nulls(len(values), arrow_type(declared)))
            continue
        column = decode(pc.struct_field(wire, [name]), described[name], declared, spec)
        if column is None:
            return None
        columns.append(column)
    row = pa.StructArray.from_arrays(columns, list(spec.schema))
    if spec.order_by == "offset":
        return op, row, None
    order: Any = payload
    for name in spec.order_by.split("."):
        order = pc.struct_field(order, [name])
    return (op, row, order) if not order.null_count else None


def fields(heads: pa.Array, schema: Schema) -> dict[str, dict[str, Any]] | None:
    """The Connect schemas of the row's fields (by name) that every envelope shares, each
    exactly of its column's type in ``schema``; None if the envelopes do not share one such set,
    or one is not a change event. ``heads`` are the envelopes' texts before their payload."""
    distinct = pc.unique(heads)
    if len(distinct) > MOST_SCHEMAS:
        return None
    shared = None
    for head in distinct.to_pylist():
        described = _row_fields(head, schema)
        if described is None or (shared is not None and described != shared):
            return None
        shared = described
    return shared


def _row_fields(head: str, schema: Schema) -> dict[str, dict[str, Any]] | None:
    try:
        document = orjson.loads(head + "}")
    except orjson.JSONDecodeError:
        return None
    envelope = document.get("schema") if isinstance(document, dict) else None
    if len(document) != 1 or not isinstance(envelope, dict):
        return None  # a heartbeat's or another message's schema has no row: None below
    after, before = connect.row_schema(envelope, "after"), connect.row_schema(envelope, "before")
    if after is None or before is None or after.get("fields") != before.get("fields"):
        return None
    described: dict[str, dict[str, Any]] = {}
    for field in after.get("fields") or []:
        name = field.get("field") if isinstance(field, dict) else None
        if not isinstance(name, str) or field.get("type") not in WIRE:
            return None
        try:
            if connect.column_type(field, (name,)) != schema.get(name):
                return None
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        described[name] = field
    return described


def parse_type(described: dict[str, dict[str, Any]]) -> pa.DataType:
    """The row's Arrow type as the payload holds it (decimals, bytes as base64 text)."""
    return pa.struct([(name, WIRE[field["type"]]) for name, field in described.items()])


def parse(payloads: pa.Array, row: pa.DataType, order_by: str) -> pa.StructArray | None:
    """``payloads`` (JSON objects on one line, no nulls) with ``op``, ``before``, ``after`` of
    type ``row`` and the ``order_by`` field (an integer); None when one does not parse with
    those types, or a row holds a field ``row`` lacks (the record reader refuses it)."""

    explicit = envelope_fields(order_by, row)
    table = read_json(payloads, explicit)
    if table is None:
        return None
    rows_as_parsed = (table.schema.field(name).type for name in ("before", "after"))
    if any(kind != row for kind in rows_as_parsed):
        return None
    return pa.StructArray.from_arrays(
        [table.column(name).combine_chunks() for name in explicit], list(explicit)
    )


def decode(
    values: pa.Array, field: dict[str, Any], declared: Any, spec: ReadSpec
) -> pa.Array | None:
    """The column of type ``declared`` of ``values`` (as the payload holds them) of the Connect
    schema ``field``; None when one does not decode, does not fit, or is the placeholder."""
    if pa.types.is_string(values.type):
        forms = pa.array(debezium.Placeholder.of(spec.placeholder).texts)
        if pc.any(pc.is_in(values, value_set=forms)).as_py():
            return None
    kind, name, target = field["type"], field.get("name"), arrow_type(declared)
    try:
        if kind != "bytes" and (name is None or name in IDENTICAL.get(kind, ())):
            decoded = values.cast(target)
        elif name in connect.DATES:
            decoded = values.cast(pa.date32()) if _within(values, DAYS) else None
        elif name in EPOCH_UNITS:
            micros = pc.multiply_checked(values, EPOCH_UNITS[name])
            instants = micros.cast(pa.timestamp("us", tz="UTC"))
            decoded = instants if _within(micros, MICROS) else None
        else:
            decoded = pa.array(_each(values, field), target)  # as the record reader decodes
    except (Misfit, ValueError, TypeError, OverflowError, pa.ArrowNotImplementedError):
        return None  # pyarrow's ArrowInvalid is a ValueError
    if decoded is None:
        return None
    if declared == "string" and not spec.keep_empty_strings:
        decoded = pc.if_else(pc.equal(decoded, ""), pa.scalar(None, pa.string()), decoded)
    return decoded


def _within(values: pa.Array, bounds: tuple[int, int]) -> bool:
    low, high = pc.min_max(values).values()
    return low.as_py() is None or (bounds[0] <= low.as_py() and high.as_py() <= bounds[1])


def _each(values: pa.Array, field: dict[str, Any]) -> list[Any]:
    path = (str(field.get("field")),)
    return [connect.decode(value, field, path) for value in values.to_pylist()]
