"""Kafka Connect schemas (``JsonConverter`` with ``schemas.enable=true``, Debezium's default) as
the types of a Debezium row: each field's Connect type, its primitive and its logical or semantic
name, is a column type of ``decoding.schema`` (``column_type``), and its value in JSON is
decoded to the Python value of that type (``decode``). The table is in docs/sources.md.

Invariants: a value is decoded exactly as its Connect type defines it (a decimal never passes
through a float; a timestamp is UTC); a name this module does not know, on a primitive type, is
refused with its reason (the record is quarantined), never read as its primitive; a struct of any
name is a nested column.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
from collections.abc import Callable
from typing import Any

from lakehouse_assets.sources.decoding import schema as types
from lakehouse_assets.sources.decoding.schema import Schema, Type
from lakehouse_assets.sources.decoding.values import Misfit, decimal_type, fit, observed, timestamp

# A numeric without scale (io.debezium.data.VariableScaleDecimal) is stored in this type unless
# the schema file names another: 20 integer and 18 fraction digits, Spark's widest precision.
VARIABLE_SCALE_DEFAULT = "decimal(38,18)"
VARIABLE_SCALE = "io.debezium.data.VariableScaleDecimal"
DECIMAL = "org.apache.kafka.connect.data.Decimal"
# JsonConverter's type names ("float", "double"), and Connect's own for its FLOAT32 and FLOAT64.
PRIMITIVES: dict[str, Type] = {
    "int8": "int", "int16": "int", "int32": "int", "int64": "long", "float": "double", "double":
    "double", "float32": "double", "float64": "double", "boolean": "boolean", "string": "string",
    "bytes": "binary",
}  # fmt: skip
EPOCH_DAY = dt.date(1970, 1, 1)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# A time of day (no Spark type holds one) as its ISO text in these units per second.
TIMES = {
    "org.apache.kafka.connect.data.Time": 1_000, "io.debezium.time.Time": 1_000,
    "io.debezium.time.MicroTime": 1_000_000, "io.debezium.time.NanoTime": 1_000_000_000,
}  # fmt: skip
# An instant as units per second since 1970 (a timestamp without time zone: its wall clock in UTC).
TIMESTAMPS = {
    "org.apache.kafka.connect.data.Timestamp": 1_000, "io.debezium.time.Timestamp": 1_000,
    "io.debezium.time.MicroTimestamp": 1_000_000, "io.debezium.time.NanoTimestamp": 1_000_000_000,
}  # fmt: skip
DATES = ("org.apache.kafka.connect.data.Date", "io.debezium.time.Date")
TEXTS = (
    "io.debezium.data.Json", "io.debezium.data.Uuid", "io.debezium.data.Enum",
    "io.debezium.data.EnumSet", "io.debezium.data.Xml", "io.debezium.data.Ltree",
    "io.debezium.time.ZonedTime", "io.debezium.time.Interval", "io.debezium.time.IsoTime",
)  # fmt: skip
ZONED = ("io.debezium.time.ZonedTimestamp", "io.debezium.time.IsoTimestamp")  # ISO, an offset
ISO_DATE = "io.debezium.time.IsoDate"  # time.precision.mode=isostring: '2024-03-01Z' (UTC)
OTHERS: dict[str, Type] = {
    ZONED[0]: "timestamp", ZONED[1]: "timestamp", ISO_DATE: "date", "io.debezium.time.Year": "int",
    "io.debezium.data.Bits": "binary", "io.debezium.time.MicroDuration": "long",
}  # fmt: skip


def row_schema(envelope_schema: Any, field: str) -> dict[str, Any] | None:
    """The Connect schema of an envelope's ``before`` or ``after`` row, when it is a struct (a
    MongoDB document is JSON text: None, and so is a schema without the field)."""
    fields = envelope_schema.get("fields") if isinstance(envelope_schema, dict) else None
    for candidate in fields if isinstance(fields, list) else ():
        if isinstance(candidate, dict) and candidate.get("field") == field:
            return candidate if candidate.get("type") == "struct" else None
    return None


def column_type(field: dict[str, Any], path: tuple[str, ...]) -> Type:
    """The column type of values of the Connect schema ``field``.

    Raises:
        ValueError: a type or name this does not read (the message is the reason).
    """
    kind, name = field.get("type"), field.get("name")
    if kind == "struct" and name != VARIABLE_SCALE:
        members = field.get("fields") or []
        return {f["field"]: column_type(f, (*path, f["field"])) for f in members}
    if kind == "array":
        return [column_type(field.get("items") or {}, path)]
    if kind == "map":
        return "string"  # its JSON text, as hstore.handling.mode=json sends an hstore
    if name is None and kind in PRIMITIVES:
        return PRIMITIVES[kind]
    if name == DECIMAL:
        parameters = field.get("parameters") or {}
        scale = int(parameters.get("scale", 0))
        precision = int(parameters.get("connect.decimal.precision", types.MAX_PRECISION))
        # Beyond Spark's 38 digits no decimal holds every value: the exact text does.
        return types.decimal(precision, scale) if precision <= types.MAX_PRECISION else "string"
    if name == VARIABLE_SCALE:
        return VARIABLE_SCALE_DEFAULT
    if name in DATES:
        return "date"
    if name in TIMESTAMPS:
        return "timestamp"
    if name in TIMES or name in TEXTS:
        return "string"
    if name in OTHERS:
        return OTHERS[name]
    raise ValueError(f"unsupported Connect type {name or kind} of {'.'.join(path)}")


def decode(value: Any, field: dict[str, Any], path: tuple[str, ...]) -> Any:
    """``value`` (as JSON holds it) as the Python value of ``column_type(field)``.

    Raises:
        Misfit: the value is not one of its Connect type.
    """
    if value is None:
        return None
    kind, name = field.get("type"), field.get("name")
    try:
        if kind == "struct" and name != VARIABLE_SCALE:
            members = {f["field"]: f for f in field.get("fields") or []}
            return {k: decode(v, members[k], (*path, k)) for k, v in value.items() if k in members}
        if kind == "array":
            return [decode(item, field.get("items") or {}, path) for item in value]
        if kind == "map":  # compact, as Debezium writes hstore's JSON text
            return json.dumps(_mapping(value), separators=(",", ":"), ensure_ascii=False)
        return _scalar(value, kind, name, field.get("parameters") or {})
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError, binascii.Error):
        expected = _safe_type(field, path)
        seen = observed(value) if not isinstance(value, str) else "string"
        raise Misfit(path, expected, seen) from None


def _mapping(value: Any) -> Any:
    """A Connect map as JSON holds it: an object (string keys) or ``[[key, value], ...]``."""
    if not isinstance(value, dict | list):
        raise TypeError(value)
    return value


def _safe_type(field: dict[str, Any], path: tuple[str, ...]) -> Type:
    try:
        return column_type(field, path)
    except ValueError:
        return str(field.get("name") or field.get("type"))


def _scalar(value: Any, kind: Any, name: Any, parameters: dict[str, Any]) -> Any:
    if name == DECIMAL:
        number = _decimal(value, int(parameters.get("scale", 0)))
        wide = int(parameters.get("connect.decimal.precision", 0)) > types.MAX_PRECISION
        return format(number, "f") if wide else number  # plain text: see column_type
    if name == VARIABLE_SCALE:
        return _decimal(value["value"], int(value["scale"]))
    if name in DATES:
        return EPOCH_DAY + dt.timedelta(days=_integer(value))
    if name in TIMESTAMPS:
        micros = _integer(value) * 1_000_000 // TIMESTAMPS[name]  # nanoseconds: floored
        return EPOCH + dt.timedelta(microseconds=micros)
    if name in TIMES:
        return time_of_day(_integer(value), TIMES[name])
    if name in ZONED:
        return timestamp(_text(value)).astimezone(dt.UTC)
    if name == ISO_DATE:
        text = _text(value)
        if text[10:] not in ("", "Z", "+00:00"):
            raise ValueError(text)
        return dt.date.fromisoformat(text[:10])
    return _PRIMITIVE_READERS[str(kind)](value)


def _decimal(value: Any, scale: int) -> decimal.Decimal:
    """A Connect decimal: the base64 of its unscaled value's big-endian two's complement bytes
    (or a JSON number, with the converter's ``decimal.format=NUMERIC``)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return decimal.Decimal(repr(value) if isinstance(value, float) else value)
    unscaled = int.from_bytes(base64.b64decode(_text(value), validate=True), "big", signed=True)
    return decimal.Decimal(f"{unscaled}E-{scale}")  # from text: exact at any precision


def time_of_day(count: int, per_second: int) -> str:
    """``count`` units since midnight as ``HH:MM:SS[.fraction]``, the fraction without trailing
    zeros (as PostgreSQL prints a time)."""
    seconds, fraction = divmod(count, per_second)
    if seconds < 0:
        raise ValueError("a time before midnight")
    hours, rest = divmod(seconds, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    digits = len(str(per_second)) - 1
    decimals = f"{fraction:0{digits}d}".rstrip("0")
    return f"{text}.{decimals}" if decimals else text


def _exactly(kind: type) -> Callable[[Any], Any]:
    """A reader of JSON values of exactly ``kind`` (a bool is no int)."""

    def read(value: Any) -> Any:
        if type(value) is not kind:
            raise TypeError(value)
        return value

    return read


_integer, _text, _boolean = _exactly(int), _exactly(str), _exactly(bool)


def _width(bits: int) -> Callable[[Any], int]:
    """A reader of integers of ``bits`` (Spark's int holds 32, its long 64): wider is refused."""

    def read(value: Any) -> int:
        if not -(2 ** (bits - 1)) <= _integer(value) < 2 ** (bits - 1):
            raise OverflowError(value)
        return value

    return read


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(value)
    return float(value)


_PRIMITIVE_READERS: dict[str, Callable[[Any], Any]] = {
    "int8": _width(32), "int16": _width(32), "int32": _width(32), "int64": _width(64),
    "float": _number, "double": _number, "float32": _number, "float64": _number,
    "boolean": _boolean, "string": _text,
    "bytes": lambda value: base64.b64decode(_text(value), validate=True),
}  # fmt: skip


def typed_row(
    row: dict[str, Any],
    struct: dict[str, Any],
    declared: Schema,
    issues: list,
    empty_is_null: bool,
) -> dict[str, Any]:
    """The fields of ``row`` typed by their Connect schema (``struct``) and held as the columns of
    ``declared`` hold them. A field ``declared`` lacks is reported in ``issues`` with its type,
    even while its value is null (the schema adds the column).

    Raises:
        Misfit: a value whose type the column does not hold (say a column made ``int`` by an
            earlier schema, now ``string``), or not of its own Connect type.
        ValueError: a field the schema lacks, or of a type this does not read.
    """
    fields = {f.get("field"): f for f in struct.get("fields") or [] if isinstance(f, dict)}
    out: dict[str, Any] = {}
    misfits: list[Misfit] = []
    for name, value in row.items():
        field = fields.get(name)
        if field is None:
            raise ValueError(f"field {name} is not in the envelope's schema")
        try:
            seen = column_type(field, (name,))
        except (KeyError, TypeError, AttributeError):
            raise ValueError(f"malformed Connect schema of {name}") from None
        column = declared.get(name)
        try:
            decoded = decode(value, field, (name,))
            if empty_is_null and decoded == "":
                decoded = None
            if column is None:
                issues.append(((name,), seen))
            elif field.get("name") == VARIABLE_SCALE and isinstance(decoded, decimal.Decimal):
                out[name] = fit(decoded, column, decimal_type(decoded), (name,))  # its digits
            else:
                out[name] = fit(decoded, column, seen, (name,))
        except Misfit as misfit:
            misfits.append(misfit)
    # Every field is reported, so that one reading grows the schema by all of them; the first
    # misfit is the record's reason (its caller reports it).
    if misfits:
        issues.extend((m.path, m.seen) for m in misfits[1:])
        raise misfits[0]
    return out
