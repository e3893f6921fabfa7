"""A batch of values read as JSON objects on one line each, by pyarrow's JSON reader (in C++)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as compute
import pyarrow.json as pj

pc: Any = compute  # its functions are made at import time: the type checker cannot see them


def lines(values: pa.Array) -> pa.Array | None:
    """``values`` (binary, no nulls) as text, or None when one is not a JSON object on one line
    in UTF-8."""
    try:
        text = values.cast(pa.string())  # checks UTF-8
    except pa.ArrowInvalid:
        return None
    objects = pc.and_(pc.starts_with(text, "{"), pc.ends_with(text, "}"))
    if not pc.all(objects).as_py():
        return None  # pyarrow would read a bare null as a row (or crash on it)
    if pc.any(pc.match_substring_regex(text, "[\r\n]")).as_py():
        return None  # a value on several lines
    return text


def parse(values: pa.Array, explicit: dict[str, pa.DataType]) -> pa.Table | None:
    """The JSON objects of ``values`` (binary, no nulls) as a table, one row per value, with the
    ``explicit`` types and the inferred types of any other field; None when a value is not a JSON
    object on one line in UTF-8, or does not fit its field's type."""
    return None if lines(values) is None else read_json(values, explicit)


def read_json(values: pa.Array, explicit: dict[str, pa.DataType]) -> pa.Table | None:
    """``parse`` of values known to be JSON objects on one line."""
    joined = b"\n".join(values.cast(pa.binary()).to_pylist())
    options = pj.ParseOptions(
        explicit_schema=pa.schema(list(explicit.items())), unexpected_field_behavior="infer"
    )
    read = pj.ReadOptions(use_threads=False, block_size=len(joined) + 1)
    try:
        table = pj.read_json(pa.BufferReader(joined), read_options=read, parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return table if table.num_rows == len(values) else None


def envelope_fields(order_by: str, row: pa.DataType) -> dict[str, pa.DataType]:
    """The explicit types of a Debezium envelope: ``op``, ``before``, ``after`` and the
    ``order_by`` field (an integer, as an LSN or ``ts_ms``)."""
    fields: dict[str, pa.DataType] = {"op": pa.string(), "before": row, "after": row}
    if order_by != "offset":
        path = order_by.split(".")
        kind: pa.DataType = pa.int64()
        for name in reversed(path[1:]):
            kind = pa.struct([(name, kind)])
        fields[path[0]] = kind
    return fields
