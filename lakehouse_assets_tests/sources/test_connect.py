"""Debezium rows typed by their Kafka Connect schema, on hand-written envelopes (plain Python, no
Spark). Expected values come from the specifications (Kafka Connect's Decimal: base64 of the
big-endian two's complement unscaled value; Debezium's temporal types: counts since 1970 or since
midnight) and from Debezium's own output, each computed by hand in its comment."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest

from lakehouse_assets.sources.decoding import evolution
from lakehouse_assets.sources.decoding import schema as types
from lakehouse_assets.sources.decoding.read_spec import ReadSpec
from lakehouse_assets.sources.decoding.reader import Reader

UTC = dt.UTC


def field(name: str, kind: str, logical: str | None = None, **parameters: str) -> dict:
    """A field of a Connect struct schema, as JsonConverter writes it."""
    out: dict[str, Any] = {"type": kind, "optional": True, "field": name}
    if logical:
        out.update(name=logical, version=1)
    if parameters:
        out["parameters"] = {k.replace("_", "."): v for k, v in parameters.items()}
    return out


KEY = field("id", "int32")
VARIABLE = {
    "type": "struct", "optional": True, "name": "io.debezium.data.VariableScaleDecimal",
    "fields": [{"type": "int32", "field": "scale"}, {"type": "bytes", "field": "value"}],
    "field": "amount",
}  # fmt: skip


def envelope(fields: list[dict], row: dict, op: str = "u", lsn: int = 5) -> bytes:
    """A Debezium envelope with its Connect schema (schemas.enable=true)."""
    value = {"type": "struct", "optional": True, "name": "shop.public.t.Value",
             "fields": [KEY, *fields]}  # fmt: skip
    schema = {"type": "struct", "name": "shop.public.t.Envelope", "optional": False, "fields": [
        {**value, "field": "before"}, {**value, "field": "after"},
        {"type": "string", "optional": False, "field": "op"},
    ]}  # fmt: skip
    payload = {"before": row if op == "d" else None, "after": None if op == "d" else row,
               "op": op, "source": {"lsn": lsn}}  # fmt: skip
    return json.dumps({"schema": schema, "payload": payload}).encode()


def spec(schema: dict, **options: Any) -> ReadSpec:
    return ReadSpec(
        schema=schema, flatten=True, format="debezium-json", mode="cdc-scd1", keys=("id",),
        order_by="source.lsn", keep_empty_strings=True, **options,
    )  # fmt: skip


def typed(fields: list[dict], value: Any, schema: dict | None = None, **options: Any) -> dict:
    """The record ``{id: 1, x: value}`` read with its Connect schema: with the schema inferred
    from it (as a first run does) unless ``schema`` is given."""
    record = envelope(fields, {"id": 1, "x": value})
    if schema is None:
        schema = evolution.infer(spec({}, **options), [(record, b"k")])
    return {"schema": schema, **Reader(spec(schema, **options)).read(record, b"k", 0)}


CASES = [
    # numeric(12,2) 199605.94, as Debezium's PostgreSQL connector wrote it: 'ATCTEg==' is the
    # bytes 01 30 93 12 = 19960594, scale 2.
    (field("x", "bytes", "org.apache.kafka.connect.data.Decimal", scale="2",
           connect_decimal_precision="12"), "ATCTEg==", "decimal(12,2)", Decimal("199605.94")),
    # -19960594: two's complement FE CF 6C EE, base64 '/s9s7g=='.
    (field("x", "bytes", "org.apache.kafka.connect.data.Decimal", scale="2",
           connect_decimal_precision="12"), "/s9s7g==", "decimal(12,2)", Decimal("-199605.94")),
    # numeric(40,2): no Spark decimal holds 40 digits; its exact text does.
    (field("x", "bytes", "org.apache.kafka.connect.data.Decimal", scale="2",
           connect_decimal_precision="40"), "ATCTEg==", "string", "199605.94"),
    # decimal.handling.mode=string and =double: no logical type.
    (field("x", "string"), "199605.94", "string", "199605.94"),
    (field("x", "double"), 199605.94, "double", 199605.94),  # JsonConverter's names
    (field("x", "float"), 1.5, "double", 1.5),
    (field("x", "float64"), 2.5, "double", 2.5),  # Connect's own

    (field("x", "int16"), -32768, "int", -32768),
    (field("x", "int64"), 2**63 - 1, "long", 2**63 - 1),
    (field("x", "boolean"), False, "boolean", False),
    (field("x", "bytes"), "AQID", "binary", b"\x01\x02\x03"),  # 000000 010000 001000 000011
    # 2024-03-01 is 19783 days after 1970-01-01.
    (field("x", "int32", "io.debezium.time.Date"), 19783, "date", dt.date(2024, 3, 1)),
    (field("x", "int32", "org.apache.kafka.connect.data.Date"), 19783, "date",
     dt.date(2024, 3, 1)),
    # 2024-03-01T10:15:30.123456Z: 19783 * 86400 + 36930 = 1709288130 s.
    (field("x", "int64", "io.debezium.time.MicroTimestamp"), 1_709_288_130_123_456, "timestamp",
     dt.datetime(2024, 3, 1, 10, 15, 30, 123456, tzinfo=UTC)),
    (field("x", "int64", "io.debezium.time.Timestamp"), 1_709_288_130_123, "timestamp",
     dt.datetime(2024, 3, 1, 10, 15, 30, 123000, tzinfo=UTC)),
    (field("x", "int64", "org.apache.kafka.connect.data.Timestamp"), 1_709_288_130_123,
     "timestamp", dt.datetime(2024, 3, 1, 10, 15, 30, 123000, tzinfo=UTC)),
    # Spark keeps microseconds: the nanoseconds' last three digits go (floored).
    (field("x", "int64", "io.debezium.time.NanoTimestamp"), 1_709_288_130_123_456_789,
     "timestamp", dt.datetime(2024, 3, 1, 10, 15, 30, 123456, tzinfo=UTC)),
    (field("x", "int64", "io.debezium.time.MicroTimestamp"), -1, "timestamp",
     dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    (field("x", "string", "io.debezium.time.ZonedTimestamp"), "2024-03-01T10:15:30.123456Z",
     "timestamp", dt.datetime(2024, 3, 1, 10, 15, 30, 123456, tzinfo=UTC)),
    (field("x", "string", "io.debezium.time.ZonedTimestamp"), "2024-03-01T12:15:30+02:00",
     "timestamp", dt.datetime(2024, 3, 1, 10, 15, 30, tzinfo=UTC)),
    # time.precision.mode=isostring (Debezium's IsoDate, IsoTimestamp, IsoTime: ISO text, UTC).
    (field("x", "string", "io.debezium.time.IsoDate"), "2024-03-01Z", "date",
     dt.date(2024, 3, 1)),
    (field("x", "string", "io.debezium.time.IsoTimestamp"), "2024-03-01T10:15:30.123456Z",
     "timestamp", dt.datetime(2024, 3, 1, 10, 15, 30, 123456, tzinfo=UTC)),
    (field("x", "string", "io.debezium.time.IsoTime"), "10:15:30.123456Z", "string",
     "10:15:30.123456Z"),
    # 10:15:30.5 is 36930 s and 500 ms after midnight.
    (field("x", "int32", "io.debezium.time.Time"), 36_930_500, "string", "10:15:30.5"),
    (field("x", "int32", "org.apache.kafka.connect.data.Time"), 36_930_000, "string", "10:15:30"),
    (field("x", "int64", "io.debezium.time.MicroTime"), 36_930_123_456, "string",
     "10:15:30.123456"),
    (field("x", "int64", "io.debezium.time.NanoTime"), 36_930_123_456_789, "string",
     "10:15:30.123456789"),
    (field("x", "int64", "io.debezium.time.MicroTime"), 0, "string", "00:00:00"),
    (field("x", "string", "io.debezium.time.ZonedTime"), "10:15:30.123456Z", "string",
     "10:15:30.123456Z"),
    (field("x", "int32", "io.debezium.time.Year"), 2024, "int", 2024),
    (field("x", "string", "io.debezium.data.Json"), '{"a": 1}', "string", '{"a": 1}'),
    (field("x", "string", "io.debezium.data.Uuid"), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
     "string", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
    (field("x", "string", "io.debezium.data.Enum", allowed="red,green"), "red", "string", "red"),
    (field("x", "bytes", "io.debezium.data.Bits", length="8"), "pQ==", "binary", b"\xa5"),
    ({"type": "array", "optional": True, "items": {"type": "int32"}, "field": "x"}, [1, None, 3],
     ["int"], [1, None, 3]),
    # From Debezium's own PostgreSQL tests (AbstractRecordsProducerTest): timestamptz
    # '2016-11-04 13:51:30.123456+02:00' is "2016-11-04T11:51:30.123456Z"; time '24:00:00' is
    # MicroTime 86400000000; money is a Decimal of scale 2 without a precision; numeric 10.1111
    # without scale is {scale 4, value 101111 = 01 8A F7, base64 'AYr3'}.
    (field("x", "string", "io.debezium.time.ZonedTimestamp"), "2016-11-04T11:51:30.123456Z",
     "timestamp", dt.datetime(2016, 11, 4, 11, 51, 30, 123456, tzinfo=UTC)),
    (field("x", "int64", "io.debezium.time.MicroTime"), 86_400_000_000, "string", "24:00:00"),
    (field("x", "bytes", "org.apache.kafka.connect.data.Decimal", scale="2"), "ATCTEg==",
     "decimal(38,2)", Decimal("199605.94")),
    ({**VARIABLE, "field": "x"}, {"scale": 4, "value": "AYr3"}, "decimal(38,18)",
     Decimal("10.111100000000000000")),
    # A numeric without scale: {scale, value}, stored in the documented default decimal(38,18).
    ({**VARIABLE, "field": "x"}, {"scale": 2, "value": "ATCTEg=="}, "decimal(38,18)",
     Decimal("199605.940000000000000000")),
    # An hstore as a map (hstore.handling.mode=map): the JSON text its json mode sends.
    ({"type": "map", "optional": True, "keys": {"type": "string"}, "values": {"type": "string"},
      "field": "x"}, {"a": "1", "b": None}, "string", '{"a":"1","b":null}'),
]  # fmt: skip


@pytest.mark.parametrize(("connect", "value", "column", "expected"), CASES)
def test_a_connect_type_is_the_column_type_and_its_value_is_exact(
    connect: dict, value: Any, column: Any, expected: Any
) -> None:
    got = typed([connect], value)
    assert got["schema"] == {"id": "int", "x": column}
    assert (got["reason"], got["x"], type(got["x"])) == (None, expected, type(expected))


def test_a_null_of_a_new_field_still_adds_its_column_with_its_type() -> None:
    date = field("x", "int32", "io.debezium.time.Date")
    assert typed([date], None)["schema"] == {"id": "int", "x": "date"}


def test_a_variable_scale_decimal_takes_the_declared_decimal_or_is_quarantined() -> None:
    connect = {**VARIABLE, "field": "x"}
    declared = {"id": "int", "x": "decimal(20,4)"}  # an edited schema file
    assert typed([connect], {"scale": 2, "value": "ATCTEg=="}, declared)["x"] == Decimal(
        "199605.9400"
    )
    # 1e-20 (unscaled 1, 'AQ==', scale 20) has more fraction digits than decimal(38,18) holds.
    got = typed([connect], {"scale": 20, "value": "AQ=="}, {"id": "int", "x": "decimal(38,18)"})
    assert got["reason"] == "incompatible x: expected decimal(38,18), got decimal(20,20)"


def test_a_type_the_table_cannot_hold_and_an_unknown_name_have_their_reasons() -> None:
    table = {"id": "int", "x": "decimal(12,2)"}
    got = typed([field("x", "string")], "199605.94", table)
    assert got["reason"] == "incompatible x: expected decimal(12,2), got string"
    assert json.loads(got["_issues"]) == [[["x"], "string"]]
    unknown = typed([field("x", "string", "io.example.Unknown")], "a", {"id": "int", "x": "string"})
    assert unknown["reason"] == "unsupported Connect type io.example.Unknown of x"
    # Debezium's timestamptz beyond year 9999 (its tests: "+21016-11-04T06:51:30.123456Z"):
    # no Spark timestamp holds it.
    large = field("x", "string", "io.debezium.time.ZonedTimestamp")
    got = typed([large], "+21016-11-04T06:51:30.123456Z", {"id": "int", "x": "timestamp"})
    assert got["reason"] == "incompatible x: expected timestamp, got string"
    malformed = typed([{"type": "struct", "fields": [{"type": "int32"}], "field": "x"}], {})
    assert malformed["reason"] == "malformed Connect schema of x"
    wrong = typed([field("x", "int32", "io.debezium.time.Date")], "2024-03-01", {"id": "int"})
    assert wrong["reason"] == "incompatible x: expected date, got string"


def test_widened_connect_types_widen_the_column_and_others_do_not() -> None:
    # numeric(10,2) -> numeric(12,4): 8 integer digits and 4 fraction digits.
    assert types.widen("decimal(10,2)", "decimal(12,4)") == "decimal(12,4)"
    assert types.widen("decimal(12,2)", "decimal(10,2)") == "decimal(12,2)"
    assert types.widen("int", "decimal(12,2)") == "decimal(12,2)"  # 10 integer digits
    assert types.widen("long", "decimal(12,2)") == "decimal(21,2)"  # 19 integer digits
    assert types.widen("decimal(38,18)", "decimal(20,20)") is None  # 40 digits
    assert types.widen("decimal(12,2)", "double") is None
    assert types.widen("decimal(12,2)", "string") is None
    # ALTER ... TYPE bigint (int32 -> int64): a value beyond 32 bits widens the column.
    got = typed([field("x", "int64")], 2**40, {"id": "int", "x": "int"})
    assert evolution.grow({"id": "int", "x": "int"}, [(got["_issues"], 1)])["x"] == "long"


def test_a_value_wider_than_its_own_connect_type_is_refused_and_widens_the_column() -> None:
    """What no Spark column of the Connect type holds (the batch's Arrow arrays would fail and
    the source stop) gets a reason, and the schema grows to hold it on the next reading."""
    table = {"id": "int", "x": "int"}
    got = typed([field("x", "int32")], 2**31, table)  # one beyond int32's range
    assert got["reason"] == "incompatible x: expected int, got long"
    assert evolution.grow(table, [(got["_issues"], 1)])["x"] == "long"
    money = {"id": "int", "x": "decimal(12,2)"}
    # 10**13 unscaled, base64 of 09 18 4E 72 A0 00: 100000000000.00, 14 digits.
    price = field("x", "bytes", "org.apache.kafka.connect.data.Decimal", scale="2",
                  connect_decimal_precision="12")  # fmt: skip
    got = typed([price], "CRhOcqAA", money)
    assert got["reason"] == "incompatible x: expected decimal(12,2), got decimal(14,2)"
    assert evolution.grow(money, [(got["_issues"], 1)])["x"] == "decimal(14,2)"


def test_a_payload_that_is_not_an_object_has_its_reason() -> None:
    read = Reader(spec({"id": "int"})).read(b'{"schema":{"type":"struct"},"payload":null}', b"k")
    assert read["reason"] == "not a change event: its payload is not an object"


def test_schema_files_name_decimals_and_binary() -> None:
    text = '{"a": "decimal(12,2)", "b": "binary", "c": ["decimal(38,18)"]}'
    assert types.loads(text, "f") == {"a": "decimal(12,2)", "b": "binary", "c": ["decimal(38,18)"]}
    for wrong in ("decimal(39,2)", "decimal(2,3)", "decimal(0,0)", "decimal"):
        with pytest.raises(types.SchemaError):
            types.loads(json.dumps({"a": wrong}), "f")


PLACEHOLDER_BYTES = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="  # base64 of the default's bytes


def test_the_placeholder_in_its_text_and_bytes_forms_is_never_a_value() -> None:
    array = {"type": "array", "optional": True, "items": {"type": "string"}, "field": "a"}
    json_text = field("j", "string", "io.debezium.data.Json")
    fields = [field("x", "string"), field("b", "bytes"), json_text, array]
    row = {"id": 1, "x": "__debezium_unavailable_value", "b": PLACEHOLDER_BYTES,
           "j": "__debezium_unavailable_value", "a": ["__debezium_unavailable_value"]}  # fmt: skip
    record = envelope(fields, row)
    schema = evolution.infer(spec({}), [(record, b"k")])
    assert schema == {"id": "int", "x": "string", "b": "binary", "j": "string", "a": ["string"]}
    got = Reader(spec(schema)).read(record, b"k", 0)
    assert (got["x"], got["b"], got["j"], got["a"], got["reason"]) == (None,) * 5
    assert got["_unavailable"] == ["x", "b", "j", "a"]
    # A declared placeholder replaces the default, which is then a value like any other.
    # ("hex:3c746f61737465643e" names the same bytes as "<toasted>".)
    assert Reader(spec(schema, placeholder="hex:3c746f61737465643e")).placeholder.texts[0] == (
        "<toasted>"
    )
    custom = Reader(spec(schema, placeholder="<toasted>"))
    record = envelope(fields, {**row, "x": "<toasted>", "b": "PHRvYXN0ZWQ+"})  # '<toasted>'
    got = custom.read(record, b"k", 0)
    assert (got["x"], got["b"], got["j"]) == (None, None, "__debezium_unavailable_value")
    assert got["_unavailable"] == ["x", "b"]


def test_without_a_connect_schema_values_are_inferred_as_before() -> None:
    row = {"id": 1, "price": "ATCTEg==", "notes": "__debezium_unavailable_value"}
    payload = {"op": "c", "after": row, "source": {"lsn": 1}}
    record = json.dumps(payload).encode()
    schema = evolution.infer(spec({}), [(record, b"k")])
    assert schema == {"id": "long", "price": "string"}  # notes: no value, no type
    got = Reader(spec(schema)).read(record, b"k", 0)
    assert (got["price"], got["_unavailable"]) == ("ATCTEg==", None)


# The other forms of Debezium's PostgreSQL connector (UnchangedToastedPlaceholder): an int[] or
# bigint[] as the placeholder's bytes (its characters' codes: '_' is 95, 'd' 100, ...), a uuid[]
# as "b68a35a7-17ad-35b3-af2a-ae46edb4545a" and hstore as a map or its JSON text (both the
# values its tests expect: DecoderDifferences, PostgresDefaultValueConverterIT).
OTHER_FORMS = [
    ({"type": "array", "optional": True, "items": {"type": "int32"}, "field": "x"},
     [ord(c) for c in "__debezium_unavailable_value"]),
    ({"type": "array", "optional": True, "field": "x",
      "items": {"type": "string", "name": "io.debezium.data.Uuid"}},
     ["b68a35a7-17ad-35b3-af2a-ae46edb4545a"]),
    (field("x", "string", "io.debezium.data.Json"),
     '{"__debezium_unavailable_value":"__debezium_unavailable_value"}'),
    ({"type": "map", "optional": True, "keys": {"type": "string"}, "values": {"type": "string"},
      "field": "x"}, {"__debezium_unavailable_value": "__debezium_unavailable_value"}),
]  # fmt: skip


@pytest.mark.parametrize(("connect", "value"), OTHER_FORMS)
def test_the_placeholder_in_arrays_and_maps_is_never_a_value(connect: dict, value: Any) -> None:
    record = envelope([connect], {"id": 1, "x": value})
    declared = {"id": "int", "x": "string"}  # whatever the column's type: nothing is read
    got = Reader(spec(declared)).read(record, b"k", 0)
    assert (got["reason"], got["x"], got["_unavailable"]) == (None, None, ["x"])
