"""The executors' reading of one record, on hand-written values (plain Python, no Spark)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

from lakehouse_assets.sources.decoding.read_spec import ReadSpec
from lakehouse_assets.sources.decoding.reader import TRUNCATE_REJECTED, Reader
from lakehouse_assets.sources.decoding.values import observed
from lakehouse_assets.sources.writing import cdc

SCHEMA = {
    "id": "long", "n": "int", "day": "date", "at": "timestamp", "who": {"name": "string"},
    "tags": ["string"], "ok": "boolean", "x": "double",
}  # fmt: skip


def read(value: object, schema=SCHEMA, **spec) -> dict:
    options = {"flatten": True, "format": "json", "mode": "append", **spec}
    text = value if isinstance(value, bytes) or value is None else json.dumps(value).encode()
    return Reader(ReadSpec(schema=schema, **options)).read(text, b"k", 7)


def test_observed_types() -> None:
    assert observed({"a": 1, "b": 1.5, "c": "x", "d": True, "e": None, "f": [1, 2.5], "g": []}) == {
        "a": "long", "b": "double", "c": "string", "d": "boolean", "f": ["double"], "g": [],
    }  # fmt: skip
    assert observed([1, "a"]) == ["variant"]
    assert observed(2**70) == "double"


def test_a_record_that_fits_is_typed_and_flattened() -> None:
    got = read({"id": 1, "n": 2, "day": "2026-01-02", "at": "2026-01-02T03:04:05Z",
                "who": {"name": ""}, "tags": ["a"], "ok": False, "x": 3})  # fmt: skip
    assert got == {
        "id": 1, "n": 2, "day": dt.date(2026, 1, 2),
        "at": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), "who_name": None, "tags": ["a"],
        "ok": False, "x": 3.0, "reason": None, "_issues": None, "_deleted": False,
    }  # fmt: skip


def test_kept_empty_strings_are_values_and_fit_only_strings() -> None:
    kept = {"keep_empty_strings": True}
    got = read({"id": 1, "who": {"name": ""}, "tags": ["", "b"]}, **kept)
    assert (got["who_name"], got["tags"], got["reason"]) == ("", ["", "b"], None)
    assert read({"id": ""}, **kept)["reason"] == "incompatible id: expected long, got string"
    assert read({"id": ""})["id"] is None  # the default: an empty string is a null


@pytest.mark.parametrize(
    ("value", "reason", "issues"),
    [
        ({"id": "7"}, "incompatible id: expected long, got string", [[["id"], "string"]]),
        ({"n": 2**31}, "incompatible n: expected int, got long", [[["n"], "long"]]),
        ({"day": "2026-01-02T10:00"}, "incompatible day: expected date, got timestamp",
         [[["day"], "timestamp"]]),
        ({"who": "ann"}, "incompatible who: expected object<name: string>, got string",
         [[["who"], "string"]]),
        ({"tags": [1]}, "incompatible tags: expected array<string>, got array<long>",
         [[["tags"], ["long"]]]),
        ({"ok": 1}, "incompatible ok: expected boolean, got long", [[["ok"], "long"]]),
        ({"id": 1.5}, "incompatible id: expected long, got double", [[["id"], "double"]]),
        ({"id": 1, "new": {"a": 1}}, None, [[["new"], {"a": "long"}]]),
        (b"\xff\xfe", "not utf-8", None),
        (b"[1]", "malformed json", None),
        (b"{", "malformed json", None),
        (None, "no value (tombstone)", None),
    ],
)  # fmt: skip
def test_what_does_not_fit_is_the_reason_and_an_issue(value, reason, issues) -> None:
    got = read(value)
    assert got["reason"] == reason
    assert (json.loads(got["_issues"]) if got["_issues"] else None) == issues


ROW = {"id": "long", "name": "string"}
CDC = {"format": "debezium-json", "mode": "cdc-scd1", "keys": ("id",), "order_by": "source.lsn"}


@pytest.mark.parametrize(
    ("envelope", "expected"),
    [
        ({"schema": {}, "payload": {"op": "r", "after": {"id": 1, "name": "a"},
                                    "source": {"lsn": 5}}},
         {"_op": "r", "_deleted": False, "_sequence": Decimal(5), "id": 1, "name": "a"}),
        ({"op": "d", "before": {"id": 1}, "after": None, "source": {"lsn": 6}},
         {"_op": "d", "_deleted": True, "_sequence": Decimal(6), "id": 1, "name": None}),
        ({"op": "c", "after": '{"id": {"$numberLong": "2"}, "name": "m"}', "source": {"lsn": 7}},
         {"_op": "c", "_deleted": False, "_sequence": Decimal(7), "id": 2, "name": "m"}),
        ({"op": "d", "filter": '{"id": {"$numberLong": "3"}}', "source": {"lsn": 8}},
         {"_op": "d", "_deleted": True, "_sequence": Decimal(8), "id": 3, "name": None}),
    ],
)  # fmt: skip
def test_debezium_envelopes(envelope, expected) -> None:
    got = read(envelope, ROW, **CDC)
    assert {k: got[k] for k in expected} == expected
    assert got["reason"] is None


@pytest.mark.parametrize(
    ("envelope", "reason"),
    [
        ({"after": {"id": 1}}, "not a change event: no op"),
        ({"op": "x", "after": {"id": 1}, "source": {"lsn": 1}}, "unsupported op x"),
        ({"op": "t", "source": {"lsn": 1}}, TRUNCATE_REJECTED),  # not declared applied
        ({"status": "BEGIN", "ts_ms": 1}, "not a change event: no op"),  # no transaction id
        ({"op": "d", "before": None, "source": {"lsn": 1}}, "delete without before"),
        ({"op": "u", "patch": '{"$set": {"name": "b"}}', "filter": '{"id": 1}',
          "source": {"lsn": 1}}, "partial update ($set/$unset)"),
        ({"op": "c", "after": None, "source": {"lsn": 1}}, "change without after"),
        ({"op": "c", "after": {"name": "x"}, "source": {"lsn": 1}}, "missing key id"),
        ({"op": "c", "after": {"id": 1}, "source": {}}, "missing source.lsn"),
    ],
)  # fmt: skip
def test_envelopes_that_are_not_changes_get_their_reason(envelope, reason) -> None:
    assert read(envelope, ROW, **CDC)["reason"] == reason


def test_an_applied_truncate_is_a_delete_of_no_key_at_its_sequence() -> None:
    truncate = {"op": "t", "ts_ms": 1, "source": {"lsn": 9, "table": "t"}}
    got = read(truncate, ROW, **CDC, truncates=True)
    expected = {"reason": None, "_op": "t", "_deleted": True, "_sequence": Decimal(9), "id": None}
    assert {k: got[k] for k in expected} == expected
    assert read({"op": "t", "source": {}}, ROW, **CDC, truncates=True)["reason"] == (
        "missing source.lsn"
    )


HEARTBEAT = "io.debezium.connector.common.Heartbeat"
TRANSACTION = "io.debezium.connector.common.TransactionMetadataValue"


@pytest.mark.parametrize(
    "message",
    [
        {"ts_ms": 1764547200000},  # a heartbeat
        {"schema": {"type": "struct", "name": HEARTBEAT}, "payload": {"ts_ms": 1764547200000}},
        {"status": "BEGIN", "id": "571:53195829", "ts_ms": 1, "event_count": None,
         "data_collections": None},
        {"status": "END", "id": "571:53195829", "ts_ms": 1, "event_count": 2,
         "data_collections": [{"data_collection": "public.t", "event_count": 2}]},
        {"schema": {"type": "struct", "name": TRANSACTION},
         "payload": {"status": "END", "id": "1", "ts_ms": 1}},
        {"op": "m", "ts_ms": 1, "source": {"lsn": 3}, "message": {"prefix": "p", "content": ""}},
        {"schema": {"type": "struct", "name": "io.debezium.connector.common.Notification"},
         "payload": {"id": "n1", "aggregate_type": "Initial Snapshot", "type": "STARTED"}},
    ],
)  # fmt: skip
def test_the_connectors_messages_that_change_no_row_are_skipped(message) -> None:
    assert read(message, ROW, **CDC) == {"reason": None, "_skipped": True}


@pytest.mark.parametrize(
    ("lsn", "sequence", "kind"),
    [
        (7, Decimal(7), "long"),
        (7.25, Decimal("7.250000"), "double"),
        ("2026-11-01T00:00:01Z", Decimal(1_793_491_201_000_000), "timestamp"),  # epoch micros
    ],
)
def test_an_order_value_is_a_sequence_of_its_kind(lsn, sequence, kind) -> None:
    got = read({"op": "c", "after": {"id": 1}, "source": {"lsn": lsn}}, ROW, **CDC)
    assert (got["_sequence"], got["_order_kind"]) == (sequence, kind)


@pytest.mark.parametrize(
    ("kinds", "validity"),
    [
        ({"long"}, "bigint"),
        ({"long", "double"}, "double"),
        ({"timestamp"}, "timestamp"),
        ({"timestamp", "long"}, "decimal(38,6)"),  # the sequence itself
    ],
)
def test_valid_from_takes_the_type_of_the_order_values(kinds, validity) -> None:
    assert cdc.validity_type(kinds) == validity


def test_a_debezium_tombstone_is_skipped_and_ordering_by_offset_uses_the_offset() -> None:
    assert read(None, ROW, **CDC)["_skipped"] is True
    by_offset = {**CDC, "order_by": "offset"}
    got = read({"op": "c", "after": {"id": 1}}, ROW, **by_offset)
    assert got["_sequence"] == Decimal(7)
