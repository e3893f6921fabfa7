"""Reading a declared source's records on the executors: each value decoded (JSON, a Debezium
envelope, Avro), checked against the schema and typed, in one pass of plain Python per Arrow
batch (``mapInArrow``).

The rules are ``decoding.schema``'s. A record whose value does not fit gets a
``reason`` (quarantined); what does not fit, and every field the schema lacks, is also reported in
``_issues`` (``[[path, type], ...]`` as JSON), from which the driver grows the schema before the
batch is read again with it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import orjson
import pyarrow as pa

from lakehouse_assets.sources.decoding import avro, columnar, connect, debezium
from lakehouse_assets.sources.decoding.read_spec import ReadSpec
from lakehouse_assets.sources.decoding.schema import Type, arrow_type
from lakehouse_assets.sources.decoding.values import Misfit, convert

# Columns the reader adds to a record's typed fields.
REASON, ISSUES, OP, SEQUENCE = "reason", "_issues", "_op", "_sequence"
DELETED, SKIPPED = "_deleted", "_skipped"  # deletes its key; changes nothing
SEQUENCE_TYPE = pa.decimal128(38, 6)
ORDER_KIND = "_order_kind"  # what the order value was: long, double or timestamp (ISO text)
UNAVAILABLE = "_unavailable"  # the columns a Debezium change holds the placeholder in (or null)
TRUNCATE_REJECTED = "a truncate (op t), kept out: the declaration's 'truncate: apply' applies it"


def _slow_json(value: bytes) -> Any:
    try:
        text = value.decode()
    except UnicodeDecodeError:
        raise ValueError("not utf-8") from None
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError("malformed json") from None


class Reader:
    """Reads one record at a time with a ``ReadSpec``: decode, envelope, check, type."""

    def __init__(self, spec: ReadSpec) -> None:
        self.spec = spec
        self.leaves = spec.leaves()
        self.placeholder = debezium.Placeholder.of(spec.placeholder)
        self.avro: Any = None
        if spec.format == "avro":
            import fastavro

            self.avro = fastavro.parse_schema(json.loads(spec.avsc or "{}"))

    def decode(self, value: bytes) -> Any:
        """The value as Python data.

        Raises:
            ValueError: it does not decode (the message is the reason).
        """
        if self.avro is not None:
            return avro.decode(value, self.avro, self.spec.avro_framing)
        try:
            document = orjson.loads(value)
        except orjson.JSONDecodeError:
            document = _slow_json(value)  # orjson refuses integers beyond 64 bits
        if not isinstance(document, dict):
            raise ValueError("malformed json")
        return document

    def read(self, value: bytes | None, key: bytes | None, offset: int = 0) -> dict[str, Any]:
        """The typed fields of one record, with ``reason``, ``_issues`` and, for CDC, ``_op``,
        ``_sequence`` (the ``order_by`` field, or ``offset``), ``_deleted``."""
        spec = self.spec
        out: dict[str, Any] = {}
        issues: list[tuple[tuple[str, ...], Type | None]] = []
        try:
            if value is None:
                if spec.format == "debezium-json":
                    return {REASON: None, SKIPPED: True}  # the tombstone after a delete
                if spec.mode != "latest-per-key":
                    raise ValueError("no value (tombstone)")
                if key is None:
                    raise ValueError("null key")
                return {REASON: None, DELETED: True}
            if spec.mode == "latest-per-key" and key is None:
                raise ValueError("null key")
            row, struct = self.decode(value), None
            if spec.format == "debezium-json":
                if debezium.not_a_change(row):
                    return {REASON: None, SKIPPED: True}
                op, row, order, struct = debezium.envelope(row, spec.order_by)
                if op == debezium.TRUNCATE and not spec.truncates:
                    raise ValueError(TRUNCATE_REJECTED)
                out[OP], out[DELETED] = op, op in ("d", debezium.TRUNCATE)
                order = offset if spec.order_by == "offset" else order
                out[SEQUENCE] = debezium.sequence(order)
                out[ORDER_KIND] = debezium.order_kind(order)
            else:
                out[DELETED] = False
            if not isinstance(row, dict):
                raise ValueError("malformed json")
            if spec.format == "debezium-json":
                out[UNAVAILABLE] = self.unavailable(row)
            empty_is_null = not spec.keep_empty_strings
            if struct is not None:  # Kafka Connect's schema types the row
                converted = connect.typed_row(row, struct, spec.schema, issues, empty_is_null)
            else:
                converted = convert(row, spec.schema, (), issues, empty_is_null)
            for column, path, _ in self.leaves:
                if len(path) == 1:
                    out[column] = converted.get(column)
                    continue
                value_at: Any = converted
                for name in path:
                    value_at = value_at.get(name) if isinstance(value_at, dict) else None
                out[column] = value_at
            for key_column in spec.keys if out.get(OP) != debezium.TRUNCATE else ():
                if out.get(key_column) is None:
                    raise ValueError(f"missing key {key_column}")
            if spec.format == "debezium-json" and out[SEQUENCE] is None:
                raise ValueError(f"missing {spec.order_by}")
            out[REASON] = None
        except Misfit as misfit:
            issues.append((misfit.path, misfit.seen))
            out = {REASON: misfit.reason}
        except ValueError as error:
            out = {REASON: str(error)}
        out[ISSUES] = json.dumps([[list(p), t] for p, t in issues]) if issues else None
        return out

    def unavailable(self, row: dict[str, Any]) -> list[str] | None:
        """The columns of ``row``'s fields that hold the placeholder (taken out of ``row``), or
        None when none does."""
        fields = debezium.unavailable(row, self.placeholder)
        if not fields:
            return None
        columns = [column for column, path, _ in self.leaves if path[0] in fields]
        return columns or None


def output_fields(spec: ReadSpec) -> list[tuple[str, pa.DataType]]:
    """The columns ``read_batches`` adds to the records' own."""
    fields = [(column, arrow_type(t)) for column, _, t in spec.leaves()]
    fields += [(REASON, pa.string()), (ISSUES, pa.string()), (DELETED, pa.bool_())]
    fields += [(SKIPPED, pa.bool_())]
    if spec.format == "debezium-json":
        fields += [(OP, pa.string()), (SEQUENCE, SEQUENCE_TYPE), (ORDER_KIND, pa.string())]
        fields += [(UNAVAILABLE, pa.list_(pa.string()))]
    return fields


def read_batches(batches: Iterator[pa.RecordBatch], spec: ReadSpec) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``'s function: each batch with the columns of ``output_fields`` added; the
    ``value`` bytes kept only for the records with a reason (the quarantine keeps them), or for
    every record with ``spec.keep_values``. A batch is read in columns when it can be
    (``columnar``), else one record at a time."""
    reader = Reader(spec)
    fields = output_fields(spec)
    in_columns = columnar.readable(spec.schema, spec.format)
    for batch in batches:
        columns = {name: batch.column(name) for name in batch.schema.names}
        read = columnar.read(batch, spec) if in_columns else None
        if read is None:
            columns.update(_read_records(reader, batch, fields))
        else:
            columns.update(_read_columns(read, batch, spec, fields))
        yield pa.RecordBatch.from_pydict(columns)


def _read_records(
    reader: Reader, batch: pa.RecordBatch, fields: list[tuple[str, pa.DataType]]
) -> dict[str, pa.Array]:
    values = batch.column("value").to_pylist()
    keys = batch.column("key").to_pylist()
    offsets = batch.column("offset").to_pylist()
    rows = [reader.read(*record) for record in zip(values, keys, offsets, strict=True)]
    keep = [reader.spec.keep_values or row[REASON] is not None for row in rows]
    kept = [value if k else None for value, k in zip(values, keep, strict=True)]
    columns = {"value": pa.array(kept, pa.binary())}  # in its place: Spark reads by position
    for name, kind in fields:
        default = False if name in (DELETED, SKIPPED) else None
        columns[name] = pa.array([row.get(name, default) for row in rows], kind)
    return columns


def _read_columns(
    read: columnar.Columns,
    batch: pa.RecordBatch,
    spec: ReadSpec,
    fields: list[tuple[str, pa.DataType]],
) -> dict[str, pa.Array]:
    rows = batch.num_rows
    # No record has a reason: its value is kept only for a drop expectation's quarantine.
    kept = batch.column("value") if spec.keep_values else pa.nulls(rows, pa.binary())
    columns = {"value": kept}
    for (column, _, _), values in zip(spec.leaves(), read.leaves, strict=True):
        columns[column] = values
    columns[REASON], columns[ISSUES] = pa.nulls(rows, pa.string()), pa.nulls(rows, pa.string())
    columns[DELETED], columns[SKIPPED] = read.deleted, read.skipped
    if spec.format == "debezium-json":
        columns[OP], columns[SEQUENCE] = read.op, read.sequence
        columns[ORDER_KIND] = read.order_kind
        columns[UNAVAILABLE] = pa.nulls(rows, pa.list_(pa.string()))  # no placeholder: columnar
    return {name: columns[name].cast(kind) for name, kind in [("value", pa.binary()), *fields]}
