"""Reading a batch of JSON records in columns (pyarrow's JSON reader, in C++), when every record of
the batch reads as the record reader (``reader.Reader``) would read it: without a reason and
without an issue. Any batch that might not, the record reader reads instead, one record at a
time, so the two paths give the same rows.

Read in columns: plain and Debezium JSON objects (relational envelopes, unwrapped) whose fields
have scalar types other than dates and timestamps, or objects of them; and Debezium envelopes
with their Kafka Connect schema whose columns are scalars of any type (``connect_columns``).
What cannot fit, pyarrow refuses (a text in a number's field, a fraction in an integer's, a
number out of range) and what the schema lacks it adds to the batch's types: either way the batch
goes to the record reader, which reports them. Values that are not one-line JSON objects in
UTF-8 do too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as compute

from lakehouse_assets.sources.decoding import connect_columns, debezium, json_lines
from lakehouse_assets.sources.decoding.read_spec import ReadSpec
from lakehouse_assets.sources.decoding.schema import Type, arrow_type

pc: Any = compute  # its functions are made at import time: the type checker cannot see them

COLUMNAR_SCALARS = ("boolean", "int", "long", "double", "string")
ENVELOPE_REWRAPS = ("payload", "patch", "filter")  # wrapped or MongoDB envelopes: record reader


def readable(schema: dict[str, Type], format: str) -> bool:
    """Whether records of ``schema`` in ``format`` can be read in columns at all (Debezium
    envelopes with their Connect schema when every column is a scalar: ``connect_columns``)."""
    if format == "debezium-json" and all(isinstance(t, str) for t in schema.values()):
        return True
    return format in ("json", "debezium-json") and all(_columnar(t) for t in schema.values())


def _columnar(declared: Type) -> bool:
    if isinstance(declared, dict):
        return all(_columnar(t) for t in declared.values())
    return isinstance(declared, str) and declared in COLUMNAR_SCALARS


def conform(array: pa.Array, declared: Type, empty_is_null: bool = True) -> pa.Array | None:
    """``array`` with the type of ``declared``: fields missing from the schema dropped when they
    hold only nulls, empty strings as nulls when ``empty_is_null``; None when it holds values
    the schema lacks."""
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    if not isinstance(declared, dict):
        if array.type != arrow_type(declared):
            return None
        if declared == "string" and empty_is_null:
            return pc.if_else(pc.equal(array, ""), pa.scalar(None, pa.string()), array)
        return array
    if not pa.types.is_struct(array.type):
        return None
    names = {array.type.field(i).name for i in range(array.type.num_fields)}
    if any(array.type.field(n).type != pa.null() for n in names - set(declared)):
        return None  # a field the schema lacks, with values: the record reader reports it
    children = []
    for name, kind in declared.items():
        child = conform(pc.struct_field(array, [name]), kind, empty_is_null)
        if child is None:
            return None
        children.append(child)
    fields = [pa.field(name, arrow_type(kind)) for name, kind in declared.items()]
    return pa.StructArray.from_arrays(children, fields=fields, mask=array.is_null())


def leaf(values: pa.Array, path: Sequence[str]) -> pa.Array:
    """The values at ``path`` inside ``values`` (null where a parent is null)."""
    for name in path:
        values = pc.struct_field(values, [name])
    return values


def changes(
    table: pa.Table, schema: dict[str, Type], order_by: str, empty_is_null: bool = True
) -> tuple[pa.Array, pa.Array, pa.Array | None] | None:
    """``(op, row, order)`` of parsed Debezium envelopes (the order None when ordered by offset);
    None when any is not a relational change the record reader reads without a reason."""
    names = set(table.column_names)
    if names & set(ENVELOPE_REWRAPS) or not {"op", "before", "after"} <= names:
        return None
    op = table.column("op").combine_chunks()
    if op.null_count or not pc.all(pc.is_in(op, pa.array(debezium.OPS))).as_py():
        return None
    before = conform(table.column("before"), schema, empty_is_null)
    after = conform(table.column("after"), schema, empty_is_null)
    if before is None or after is None:
        return None
    row = pc.if_else(pc.equal(op, "d"), before, after)
    if row.null_count:
        return None  # a delete without before, a change without after
    if order_by == "offset":
        return op, row, None
    path = order_by.split(".")
    order = leaf(table.column(path[0]).combine_chunks(), path[1:])
    if order.type != pa.int64() or order.null_count:
        return None
    return op, row, order


def _placeholder_in(leaves: list[pa.Array], placeholder: str) -> bool:
    """Whether a text column holds Debezium's placeholder (in its text or base64 form)."""
    forms = pa.array(debezium.Placeholder.of(placeholder).texts)
    texts = [array for array in leaves if pa.types.is_string(array.type)]
    return any(pc.any(pc.is_in(array, value_set=forms)).as_py() for array in texts)


@dataclass
class Columns:
    """A batch read in columns: the schema's leaves (in ``ReadSpec.leaves`` order) and what the
    record reader adds (``op``, the integer ``sequence`` and its kind for Debezium)."""

    leaves: list[pa.Array]
    deleted: pa.Array
    skipped: pa.Array
    op: pa.Array | None = None
    sequence: pa.Array | None = None
    order_kind: pa.Array | None = None  # "long" where there is a sequence: read as integers


def read(batch: pa.RecordBatch, spec: ReadSpec) -> Columns | None:
    """The batch's records read in columns, or None if the record reader must read them."""
    values, keys = batch.column("value"), batch.column("key")
    present = values.is_valid()
    tombstones = values.null_count
    if spec.mode == "latest-per-key" and keys.null_count:
        return None  # a null key: quarantined
    if tombstones and spec.format == "json" and spec.mode != "latest-per-key":
        return None  # no value: quarantined
    schema = spec.schema
    records = values.filter(present) if tombstones else values
    op = order = None
    if spec.format == "debezium-json" and connect_columns.wrapped(records):
        read = connect_columns.changes(records, spec)
        if read is None:
            return None
        op, row, order = read
    elif not all(_columnar(t) for t in schema.values()):
        return None  # dates, decimals, ...: the Connect schema types them, else the record reader
    elif spec.format == "debezium-json":
        explicit = {name: arrow_type(kind) for name, kind in schema.items()}
        row = pa.struct(list(explicit.items()))
        table = json_lines.parse(records, json_lines.envelope_fields(spec.order_by, row))
        read = None if table is None else changes(table, schema, spec.order_by,
                                                  not spec.keep_empty_strings)  # fmt: skip
        if read is None:
            return None
        op, row, order = read
    else:
        table = json_lines.parse(records, {name: arrow_type(kind) for name, kind in schema.items()})
        if table is None:
            return None
        columns = [column.combine_chunks() for column in table.columns]
        struct = pa.StructArray.from_arrays(columns, table.column_names)
        row = conform(struct, schema, not spec.keep_empty_strings)
        if row is None:
            return None
    leaves = [leaf(row, path) for _, path, _ in spec.leaves()]
    if spec.format == "debezium-json" and _placeholder_in(leaves, spec.placeholder):
        return None  # the record reader takes placeholders out of the rows
    named = dict(zip([column for column, _, _ in spec.leaves()], leaves, strict=True))
    if any(named[key].null_count for key in spec.keys):
        return None  # a missing key: quarantined
    if tombstones:  # rows back in place, null where the value was
        positions = pc.subtract(pc.cumulative_sum(present.cast(pa.int64())), 1)
        where = pc.if_else(present, positions, pa.scalar(None, pa.int64()))
        leaves = [pc.take(array, where) for array in leaves]
        op, order = (None if a is None else pc.take(a, where) for a in (op, order))
    absent = pc.invert(present)
    if spec.format == "debezium-json":
        deleted = pc.fill_null(pc.equal(op, "d"), False)
        if order is None:  # ordered by offset
            order = pc.if_else(present, batch.column("offset"), pa.scalar(None, pa.int64()))
        kind = pc.if_else(order.is_valid(), pa.scalar("long"), pa.scalar(None, pa.string()))
        return Columns(leaves, deleted, skipped=absent, op=op, sequence=order, order_kind=kind)
    no = pa.array([False] * len(values))
    return Columns(leaves, deleted=absent if spec.mode == "latest-per-key" else no, skipped=no)
