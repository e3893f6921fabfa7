"""Debezium envelopes with their Kafka Connect schema read in columns (plain Python and pyarrow, no
Spark): the rows a batch gives, computed by hand from the specifications (each in its comment),
and every batch the columns cannot read going to the record reader, whose rows it gives."""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from lakehouse_assets.sources.decoding import columnar
from lakehouse_assets.sources.decoding.read_spec import ReadSpec
from lakehouse_assets.sources.decoding.reader import read_batches
from lakehouse_assets_tests.sources.test_columnar import batch, one_at_a_time, rows
from lakehouse_assets_tests.sources.test_connect import field

UTC = dt.UTC
FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    field("name", "string"), field("score", "double"), field("big", "int64"),
    field("ok", "boolean"), field("doc", "string", "io.debezium.data.Json"),
    field("price", "bytes", "org.apache.kafka.connect.data.Decimal", scale="2",
          connect_decimal_precision="12"),
    field("born", "int32", "io.debezium.time.Date"),
    field("seen", "int64", "io.debezium.time.MicroTimestamp"),
    field("sent", "int64", "org.apache.kafka.connect.data.Timestamp"),
    field("nanos", "int64", "io.debezium.time.NanoTimestamp"),
    field("zoned", "string", "io.debezium.time.ZonedTimestamp"),
    field("opens", "int64", "io.debezium.time.MicroTime"),
    field("raw", "bytes"),
]  # fmt: skip
SCHEMA = {
    "id": "int", "name": "string", "score": "double", "big": "long", "ok": "boolean",
    "doc": "string", "price": "decimal(12,2)", "born": "date", "seen": "timestamp",
    "sent": "timestamp", "nanos": "timestamp", "zoned": "timestamp", "opens": "string",
    "raw": "binary",
}  # fmt: skip
ROW = {
    "id": 1, "name": "ann", "score": 2, "big": 2**40, "ok": True, "doc": '{"a":1}',
    "price": base64.b64encode((-12345).to_bytes(2, "big", signed=True)).decode(),  # "z8c="
    "born": 19000, "seen": 1_700_000_000_123_456, "sent": 1_700_000_000_123, "nanos": -1500,
    "zoned": "2024-03-01T10:15:30.5+05:30", "opens": 36_000_123_456, "raw": "AQI=",
}  # fmt: skip
# ROW as the record reader types it, worked out by hand:
EXPECTED = {
    "id": 1, "name": "ann", "score": 2.0, "big": 2**40, "ok": True, "doc": '{"a":1}',
    "price": Decimal("-123.45"),  # 0xCFC7 is -12345 in two's complement; scale 2
    "born": dt.date(2022, 1, 8),  # 19000 days after 1970-01-01
    "seen": dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=UTC),  # 1.7e9 s is that instant
    "sent": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC),  # milliseconds
    "nanos": dt.datetime(1969, 12, 31, 23, 59, 59, 999998, tzinfo=UTC),  # -1.5 us, floored
    "zoned": dt.datetime(2024, 3, 1, 4, 45, 30, 500000, tzinfo=UTC),  # 10:15:30.5 at +05:30
    "opens": "10:00:00.123456",  # 36,000 s and 123,456 us after midnight
    "raw": b"\x01\x02",
}  # fmt: skip


def envelope(row: dict | None = None, op: str = "u", lsn: int = 7, fields: list | None = None,
             compact: bool = True, name: str = "shop.public.t.Value") -> bytes:  # fmt: skip
    """An envelope as JsonConverter writes it (compact, the schema first)."""
    value = {"type": "struct", "optional": True, "name": name, "fields": fields or FIELDS}
    schema = {"type": "struct", "optional": False, "name": "shop.public.t.Envelope", "fields": [
        {**value, "field": "before"}, {**value, "field": "after"},
        {"type": "struct", "field": "source", "optional": False,
         "fields": [{"type": "int64", "optional": False, "field": "lsn"}]},
        {"type": "string", "optional": False, "field": "op"},
    ]}  # fmt: skip
    row = ROW if row is None else row
    payload = {"before": row if op == "d" else None, "after": None if op == "d" else row,
               "source": {"lsn": lsn}, "op": op, "ts_ms": 1}  # fmt: skip
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps({"schema": schema, "payload": payload}, separators=separators).encode()


def spec(**options: Any) -> ReadSpec:
    return ReadSpec(**{"schema": SCHEMA, "flatten": False, "format": "debezium-json",
                       "mode": "cdc-scd1", "keys": ("id",), "order_by": "source.lsn",
                       **options})  # fmt: skip


def read(records: pa.RecordBatch, read_spec: ReadSpec) -> list[dict]:
    return rows(next(read_batches(iter([records]), read_spec)))


def test_a_batch_with_connect_schemas_is_read_in_columns_typed_as_connect_defines() -> None:
    deleted = {**ROW, "id": 2, "name": "", "price": None}
    records = batch([envelope(), None, envelope(deleted, op="d", lsn=9)])  # a tombstone between
    assert columnar.read(records, spec()) is not None
    common = {"value": None, "reason": None, "_issues": None, "_unavailable": None}
    first = {**EXPECTED, **common, "_op": "u", "_sequence": Decimal(7), "_order_kind": "long",
             "_deleted": False, "_skipped": False}  # fmt: skip
    tombstone = {name: None for name in first} | {"_deleted": False, "_skipped": True}
    second = {
        **first,
        "id": 2,
        "name": None,
        "price": None,
        "_op": "d",
        "_sequence": Decimal(9),
        "_deleted": True,
    }  # "" is null; fmt: skip
    assert read(records, spec()) == [first, tombstone, second]
    kept = spec(keep_empty_strings=True)
    assert [r["name"] for r in read(records, kept)] == ["ann", None, ""]


def test_a_batch_of_deletes_only_and_one_of_tombstones_only() -> None:
    deletes = batch([envelope({**ROW, "id": 3}, op="d", lsn=4), envelope(op="d", lsn=5)])
    assert columnar.read(deletes, spec()) is not None
    read_deletes = [
        (r["id"], r["_op"], r["_deleted"], r["_sequence"]) for r in read(deletes, spec())
    ]
    assert read_deletes == [(3, "d", True, Decimal(4)), (1, "d", True, Decimal(5))]
    tombstones = batch([None, None])
    assert [(r["_skipped"], r["reason"]) for r in read(tombstones, spec())] == [(True, None)] * 2


def test_spaced_json_and_schemas_that_differ_only_in_names_are_read_in_columns() -> None:
    records = batch([envelope(compact=False), envelope(name="shop.public.t.Value2")])
    assert columnar.read(records, spec()) is not None
    assert [r["price"] for r in read(records, spec())] == [Decimal("-123.45")] * 2


def _edited(value: bytes, **payload: Any) -> bytes:
    document = json.loads(value)
    document["payload"].update(payload)
    return json.dumps(document, separators=(",", ":")).encode()


def _without(name: str) -> list[dict]:
    return [f for f in FIELDS if f["field"] != name]


PLACEHOLDER_BYTES = base64.b64encode(b"__debezium_unavailable_value").decode()
THIRTEEN_DIGITS = base64.b64encode((10**13).to_bytes(6, "big", signed=True)).decode()
ODD = {
    "placeholder": {**ROW, "name": "__debezium_unavailable_value"},
    "placeholder in bytes": {**ROW, "raw": PLACEHOLDER_BYTES},
    "decimal beyond its precision": {**ROW, "price": THIRTEEN_DIGITS},
    "decimal as a number": {**ROW, "price": 1.5},
    "text in an integer": {**ROW, "big": "5"},
    "fraction in an integer": {**ROW, "big": 1.5},
    "integer beyond 32 bits": {**ROW, "id": 2**31},
    "no key": {**ROW, "id": None},
    "date beyond year 9999": {**ROW, "born": 3_000_000},
    "zoned timestamp not ISO": {**ROW, "zoned": "yesterday"},
    "time before midnight": {**ROW, "opens": -1},
    "not base64": {**ROW, "raw": "not base64!"},
}


@pytest.mark.parametrize("odd", list(ODD))
def test_a_batch_with_an_odd_value_gets_the_record_readers_rows(odd: str) -> None:
    records = batch([envelope(), envelope(ODD[odd])])
    assert columnar.read(records, spec()) is None
    assert read(records, spec()) == one_at_a_time(records, spec())


@pytest.mark.parametrize(
    "odd",
    [
        envelope({**ROW, "extra": 1}, fields=[*FIELDS, field("extra", "int32")]),  # a new column
        envelope(fields=[*_without("big"), field("big", "int32")]),  # a narrower type
        envelope(fields=[*_without("zoned"), field("zoned", "string", "io.debezium.time.X")]),
        envelope({k: v for k, v in ROW.items() if k != "raw"}, fields=_without("raw")),  # fewer
        envelope(op="t"), envelope(op="x"), envelope(lsn=None),  # type: ignore[arg-type]
        _edited(envelope(op="d"), before=None),  # a delete without its row
        _edited(envelope(), after={**ROW, "extra": 1}),  # a field its Connect schema lacks
        _edited(envelope(), after={**ROW, "extra": None}),
        envelope()[:-1] + b',"after":1}',  # something after the payload
        b'{"schema":{"type":"struct","name":"io.debezium.connector.common.Heartbeat"},'
        b'"payload":{"ts_ms":1}}',
        b'{"schema":{"type":"struct"},"payload":null}',
        json.dumps({"op": "u", "after": ROW, "source": {"lsn": 1}}).encode(),  # unwrapped
        envelope()[:-1] + b" ",
    ],
)  # fmt: skip
def test_a_batch_with_an_odd_envelope_gets_the_record_readers_rows(odd: bytes) -> None:
    records = batch([envelope(), odd])
    truncating = spec(truncates=True)
    assert columnar.read(records, truncating) is None
    assert read(records, truncating) == one_at_a_time(records, truncating)


def test_only_scalar_columns_are_read_in_columns() -> None:
    assert columnar.readable(SCHEMA, "debezium-json")
    assert not columnar.readable({**SCHEMA, "tags": ["string"]}, "debezium-json")
    assert not columnar.readable({**SCHEMA, "at": {"x": "long"}}, "debezium-json")
    assert not columnar.readable(SCHEMA, "json")  # plain JSON has no Connect schema
