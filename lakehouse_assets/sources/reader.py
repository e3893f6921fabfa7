"""Reading a declared source's records on the executors: each value decoded (JSON, a Debezium
envelope, Avro), checked against the schema and typed, in one pass of plain Python per Arrow
batch (``mapInArrow``).

The rules are ``lakehouse_assets.sources.schema``'s. A record whose value does not fit gets a
``reason`` (quarantined); what does not fit, and every field the schema lacks, is also reported in
``_issues`` (``[[path, type], ...]`` as JSON), from which the driver grows the schema before the
batch is read again with it.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa

from lakehouse_assets.sources import schema as types
from lakehouse_assets.sources.schema import Schema, Type

DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
DATE_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?)?)?"
)
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
OPS = ("c", "u", "d", "r")
CONFLUENT_HEADER = 5
# Columns the reader adds to a record's typed fields.
REASON, ISSUES, OP, SEQUENCE = "reason", "_issues", "_op", "_sequence"
DELETED, SKIPPED = "_deleted", "_skipped"  # deletes its key; changes nothing
SEQUENCE_TYPE = pa.decimal128(38, 6)
MICRO = decimal.Decimal("0.000001")


class Misfit(Exception):
    """A value that does not fit its field's type."""

    def __init__(self, path: tuple[str, ...], expected: Type, seen: Type | None) -> None:
        super().__init__(path)
        self.path, self.expected, self.seen = path, expected, seen

    @property
    def reason(self) -> str:
        expected = self.expected if isinstance(self.expected, str) else describe(self.expected)
        return f"incompatible {'.'.join(self.path)}: expected {expected}, got {describe(self.seen)}"


@dataclass(frozen=True)
class ReadSpec:
    """What the executors need to read a source's records: plain values, pickled to them."""

    schema: Schema
    flatten: bool
    format: str  # json | debezium-json | avro
    mode: str
    keys: tuple[str, ...] = ()
    order_by: str = "offset"
    avsc: str | None = None  # the Avro schema, JSON
    avro_framing: str = "confluent"

    def leaves(self) -> list[tuple[str, tuple[str, ...], Type]]:
        return list(types.leaves(self.schema, self.flatten))


# ----- types of Python values --------------------------------------------------------------------
def observed(value: Any) -> Type | None:
    """The type of a decoded JSON value (None for null); arrays of several types: ``variant``."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "long" if INT64[0] <= value <= INT64[1] else "double"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        fields = {k: observed(v) for k, v in value.items()}
        return {k: v for k, v in fields.items() if v is not None}
    element: Type | None = None
    for item in value:
        seen = observed(item)
        if seen is not None:
            element = seen if element is None else (types.widen(element, seen) or types.MIXED)
    return [] if element is None else [element]


def describe(value: Type | None) -> str:
    """A type as a reason names it: ``object<value: long>``, ``array<string>``."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "object<" + ", ".join(f"{k}: {describe(v)}" for k, v in value.items()) + ">"
    return f"array<{describe(value[0]) if value else 'unknown'}>"


def convert(value: Any, declared: Type, path: tuple[str, ...], issues: list) -> Any:
    """``value`` as a column of type ``declared`` holds it.

    Raises:
        Misfit: it does not fit (the caller quarantines the record).
    """
    if value is None or value == "":  # empty strings are nulls
        return None
    if isinstance(declared, dict):
        if not isinstance(value, dict):
            raise Misfit(path, declared, observed(value))
        out = {}
        for name, item in value.items():
            kind = declared.get(name)
            if kind is None:
                if item is not None:
                    issues.append(((*path, name), observed(item)))  # a new field
            elif item is None or item == "":
                out[name] = None
            elif kind == "string" and type(item) is str:  # the common case, first
                out[name] = item
            else:
                out[name] = convert(item, kind, (*path, name), issues)
        return out
    if isinstance(declared, list):
        if not isinstance(value, list):
            raise Misfit(path, declared, observed(value))
        if not declared:
            if any(item is not None for item in value):
                raise Misfit(path, declared, observed(value))
            return value
        inner: list = []
        try:
            items = [convert(item, declared[0], path, inner) for item in value]
        except Misfit:
            raise Misfit(path, declared, observed(value)) from None
        if inner:  # new fields in the elements: the array's type grows as a whole
            issues.append((path, observed(value)))
        return items
    return _scalar(value, declared, path)


def _scalar(value: Any, declared: str, path: tuple[str, ...]) -> Any:
    kind = type(value)
    if declared == "string" and kind is str:
        return value
    if declared in ("long", "int") and kind is int:
        low, high = INT32 if declared == "int" else INT64
        if low <= value <= high:
            return value
    elif declared == "double" and kind in (int, float):
        return float(value)
    elif declared == "boolean" and kind is bool:
        return value
    elif declared == "date" and kind is str and DATE.fullmatch(value):
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            pass
    elif declared == "timestamp" and kind is str and DATE_TIME.fullmatch(value):
        try:
            return _timestamp(value)
        except ValueError:
            pass
    raise Misfit(path, declared, observed(value) if kind is not str else _text_kind(value))


def _text_kind(value: str) -> str:
    """Text as an observed type: ``timestamp`` for a date-time (a ``date`` field widens)."""
    return "timestamp" if DATE_TIME.fullmatch(value) and not DATE.fullmatch(value) else "string"


def _timestamp(text: str) -> dt.datetime:
    moment = dt.datetime.fromisoformat(text.replace(" ", "T", 1))
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


# ----- decoding ----------------------------------------------------------------------------------
def _extended(document: dict[str, Any]) -> Any:
    """MongoDB extended JSON as plain values: ObjectId as its hex text, numbers, dates as epoch
    milliseconds (or their ISO text)."""
    if len(document) == 1:
        ((name, value),) = document.items()
        if name == "$oid":
            return value
        if name in ("$numberLong", "$numberInt"):
            return int(value)
        if name in ("$numberDouble", "$numberDecimal"):
            return float(value)
        if name == "$date":
            return value
    return document


def _document(value: Any) -> Any:
    """An envelope's row: as it is, or parsed from MongoDB's extended JSON text."""
    if isinstance(value, str):
        return json.loads(value, object_hook=_extended)
    return value


def _envelope(value: dict[str, Any], order_by: str) -> tuple[str, Any, Any]:
    """``(op, row, sequence)`` of a Debezium change event.

    Raises:
        ValueError: not a change this reads (the message is the reason).
    """
    if "schema" in value and "payload" in value:
        value = value["payload"]
    op = value.get("op")
    if op is None:
        raise ValueError("not a change event: no op")
    if op not in OPS:
        raise ValueError(f"unsupported op {op}")
    if op == "d":
        row = _document(value.get("before")) or _document(value.get("filter"))
        if row is None:
            raise ValueError("delete without before")
    else:
        row = _document(value.get("after"))
        if row is None:
            patch = _document(value.get("patch"))
            if isinstance(patch, dict) and any(k.startswith("$") for k in patch):
                raise ValueError("partial update ($set/$unset)")
            row = patch
        if row is None:
            raise ValueError("change without after")
    sequence = value
    for name in order_by.split("."):
        sequence = sequence.get(name) if isinstance(sequence, dict) else None
    return op, row, sequence


def _sequence(value: Any) -> decimal.Decimal | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return decimal.Decimal(value)
    if isinstance(value, float):
        return decimal.Decimal(value).quantize(MICRO)
    if isinstance(value, str):
        try:
            micros = int(_timestamp(value).timestamp() * 1_000_000)
        except ValueError:
            return None
        return decimal.Decimal(micros)
    return None


def _slow_json(value: bytes) -> Any:
    try:
        text = value.decode()
    except UnicodeDecodeError:
        raise ValueError("not utf-8") from None
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError("malformed json") from None


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return str(value)  # uuid


class Reader:
    """Reads one record at a time with a ``ReadSpec``: decode, envelope, check, type."""

    def __init__(self, spec: ReadSpec) -> None:
        self.spec = spec
        self.leaves = spec.leaves()
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
            return self._avro(value)
        try:
            document = orjson.loads(value)
        except orjson.JSONDecodeError:
            document = _slow_json(value)  # orjson refuses integers beyond 64 bits
        if not isinstance(document, dict):
            raise ValueError("malformed json")
        return document

    def _avro(self, value: bytes) -> Any:
        import fastavro

        if self.spec.avro_framing == "confluent":
            if len(value) < CONFLUENT_HEADER or value[0] != 0:
                raise ValueError("not avro: no Confluent header (magic byte 0 and a schema id)")
            value = value[CONFLUENT_HEADER:]
        stream = io.BytesIO(value)
        try:
            datum = fastavro.schemaless_reader(stream, self.avro, None)
        except Exception as error:  # fastavro raises many kinds on bad input
            raise ValueError(f"not avro: {type(error).__name__}: {error}") from None
        if stream.tell() != len(value):
            raise ValueError(f"not avro: {len(value) - stream.tell()} bytes left after the datum")
        return json.loads(json.dumps(datum, default=_json_value))  # dates and bytes as text

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
            row = self.decode(value)
            if spec.format == "debezium-json":
                op, row, sequence = _envelope(row, spec.order_by)
                out[OP], out[DELETED] = op, op == "d"
                out[SEQUENCE] = _sequence(offset if spec.order_by == "offset" else sequence)
            else:
                out[DELETED] = False
            if not isinstance(row, dict):
                raise ValueError("malformed json")
            converted = convert(row, spec.schema, (), issues)
            for column, path, _ in self.leaves:
                if len(path) == 1:
                    out[column] = converted.get(column)
                    continue
                value_at: Any = converted
                for name in path:
                    value_at = value_at.get(name) if isinstance(value_at, dict) else None
                out[column] = value_at
            for key_column in spec.keys:
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


def arrow_type(declared: Type) -> pa.DataType:
    """The Arrow type of a column of type ``declared``."""
    if isinstance(declared, str):
        return {
            "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(),
            "double": pa.float64(), "string": pa.string(), "date": pa.date32(),
            "timestamp": pa.timestamp("us", tz="UTC"),
        }[declared]  # fmt: skip
    if isinstance(declared, dict):
        return pa.struct([(name, arrow_type(t)) for name, t in declared.items()])
    return pa.list_(arrow_type(declared[0]) if declared else pa.string())


def output_fields(spec: ReadSpec) -> list[tuple[str, pa.DataType]]:
    """The columns ``read_batches`` adds to the records' own."""
    fields = [(column, arrow_type(t)) for column, _, t in spec.leaves()]
    fields += [(REASON, pa.string()), (ISSUES, pa.string()), (DELETED, pa.bool_())]
    fields += [(SKIPPED, pa.bool_())]
    if spec.format == "debezium-json":
        fields += [(OP, pa.string()), (SEQUENCE, SEQUENCE_TYPE)]
    return fields


def read_batches(batches: Iterator[pa.RecordBatch], spec: ReadSpec) -> Iterator[pa.RecordBatch]:
    """``mapInArrow``'s function: each batch with the columns of ``output_fields`` added; the
    ``value`` bytes kept only for the records with a reason (the quarantine keeps them)."""
    reader = Reader(spec)
    fields = output_fields(spec)
    for batch in batches:
        values = batch.column("value").to_pylist()
        keys = batch.column("key").to_pylist()
        offsets = batch.column("offset").to_pylist()
        rows = [reader.read(*record) for record in zip(values, keys, offsets, strict=True)]
        kept = [v if row[REASON] is not None else None for v, row in zip(values, rows, strict=True)]
        columns = {name: batch.column(name) for name in batch.schema.names}
        columns["value"] = pa.array(kept, pa.binary())  # in its place: Spark reads by position
        for name, kind in fields:
            default = False if name in (DELETED, SKIPPED) else None
            columns[name] = pa.array([row.get(name, default) for row in rows], kind)
        yield pa.RecordBatch.from_pydict(columns)
