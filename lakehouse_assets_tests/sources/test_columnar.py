"""Batches read in columns (plain Python and pyarrow, no Spark): the rows they give, written by
hand, and every batch the columns cannot read going to the record reader, whose rows it gives."""

from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa
import pytest

from lakehouse_assets.sources.decoding import columnar
from lakehouse_assets.sources.decoding.read_spec import ReadSpec
from lakehouse_assets.sources.decoding.reader import Reader, output_fields, read_batches

SCHEMA = {"id": "long", "n": "int", "who": {"name": "string"}, "ok": "boolean", "x": "double"}
CLEAN = {"id": 1, "n": 2, "who": {"name": "ann"}, "ok": True, "x": 1.5}
ENVELOPE = {"op": "u", "before": None, "after": {"id": 5, "n": 1}, "source": {"lsn": 90}}


def batch(values: list, keys: list | None = None) -> pa.RecordBatch:
    raw = [v if isinstance(v, bytes) or v is None else json.dumps(v).encode() for v in values]
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array(keys or [b"k"] * len(raw), pa.binary()),
            "value": pa.array(raw, pa.binary()),
            "offset": pa.array(range(10, 10 + len(raw)), pa.int64()),
        }
    )


def spec(**options) -> ReadSpec:
    return ReadSpec(**{"schema": SCHEMA, "flatten": True, "format": "json", "mode": "append",
                       **options})  # fmt: skip


def rows(read: pa.RecordBatch) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in ("key", "offset")} for r in read.to_pylist()]


def one_at_a_time(records: pa.RecordBatch, read_spec: ReadSpec) -> list[dict]:
    """What the record reader makes of each record, as ``read_batches`` lays it out."""
    reader, out = Reader(read_spec), []
    columns = [records.column(name).to_pylist() for name in ("value", "key", "offset")]
    for value, key, offset in zip(*columns, strict=True):
        row = reader.read(value, key, offset)
        laid = {"value": value if row["reason"] is not None else None}
        for name, _ in output_fields(read_spec):
            laid[name] = row.get(name, False if name in ("_deleted", "_skipped") else None)
        out.append(laid)
    return out


def test_a_clean_batch_is_read_in_columns_as_the_specification_types_it() -> None:
    records = batch([CLEAN, {"id": 2, "who": None, "x": 3}, {"id": 3, "who": {"name": ""},
                     "ok": False, "gone": None}])  # fmt: skip
    assert columnar.read(records, spec()) is not None
    common = {"value": None, "reason": None, "_issues": None, "_deleted": False, "_skipped": False}
    assert rows(next(read_batches(iter([records]), spec()))) == [
        {"id": 1, "n": 2, "who_name": "ann", "ok": True, "x": 1.5, **common},
        {"id": 2, "n": None, "who_name": None, "ok": None, "x": 3.0, **common},  # int to double
        {"id": 3, "n": None, "who_name": None, "ok": False, "x": None, **common},  # "" is null
    ]


def test_kept_empty_strings_are_read_in_columns_as_values() -> None:
    records = batch([{"id": 1, "who": {"name": ""}}, {"id": 2, "who": {"name": None}}])
    kept = spec(keep_empty_strings=True)
    assert columnar.read(records, kept) is not None
    assert [r["who_name"] for r in rows(next(read_batches(iter([records]), kept)))] == ["", None]


def test_objects_stay_objects_without_flattening() -> None:
    records = batch([{"id": 1, "who": {"name": ""}}, {"id": 2}])
    read = rows(next(read_batches(iter([records]), spec(flatten=False))))
    assert [(r["id"], r["who"]) for r in read] == [(1, {"name": None}), (2, None)]


@pytest.mark.parametrize(
    "odd",
    [
        b"null", b"[1]", b'"x"', b"", b" {}", b'{"id": 1}\n{"id": 2}', b'{\n"id": 1}',
        b'{"id": 1}\r', b"\xff{}", b'{"id": 1} {"id": 2}', b'{"id": 1, "id": 2}',
        {"id": "7"}, {"id": 1.5}, {"id": 2**63}, {"n": 2**31}, {"ok": 1}, {"x": "1.5"},
        {"who": "ann"}, {"who": {"name": 1}}, {"who": {"name": "a", "age": 3}}, {"new": 1},
        {"new": []}, {"id": ""}, None,
    ],
)  # fmt: skip
def test_a_batch_with_one_odd_record_gets_the_record_readers_rows(odd) -> None:
    records = batch([CLEAN, odd, CLEAN])
    assert columnar.read(records, spec()) is None
    assert rows(next(read_batches(iter([records]), spec()))) == one_at_a_time(records, spec())


def test_debezium_changes_in_columns() -> None:
    deleted = {"op": "d", "before": {"id": 6}, "after": None, "source": {"lsn": 91}}
    records = batch([ENVELOPE, None, deleted])  # a tombstone after the delete
    cdc = spec(format="debezium-json", mode="cdc-scd1", keys=("id",), order_by="source.lsn")
    assert columnar.read(records, cdc) is not None
    columns = ("id", "n", "_op", "_sequence", "_order_kind", "_deleted", "_skipped", "reason")
    got = [{k: r[k] for k in columns} for r in rows(next(read_batches(iter([records]), cdc)))]
    assert got == [
        {"id": 5, "n": 1, "_op": "u", "_sequence": Decimal(90), "_order_kind": "long",
         "_deleted": False, "_skipped": False, "reason": None},
        {"id": None, "n": None, "_op": None, "_sequence": None, "_order_kind": None,
         "_deleted": False, "_skipped": True, "reason": None},
        {"id": 6, "n": None, "_op": "d", "_sequence": Decimal(91), "_order_kind": "long",
         "_deleted": True, "_skipped": False, "reason": None},
    ]  # fmt: skip
    by_offset = spec(format="debezium-json", mode="cdc-scd1", keys=("id",))
    sequences = [r["_sequence"] for r in rows(next(read_batches(iter([records]), by_offset)))]
    assert sequences == [Decimal(10), None, Decimal(12)]  # the Kafka offsets


@pytest.mark.parametrize(
    "odd",
    [
        {"schema": {}, "payload": ENVELOPE},  # wrapped
        {"op": "u", "after": None, "patch": '{"id": 5}', "source": {"lsn": 1}},  # MongoDB
        {**ENVELOPE, "op": "x"}, {**ENVELOPE, "op": None}, {**ENVELOPE, "source": {}},
        {**ENVELOPE, "source": {"lsn": "90"}}, {**ENVELOPE, "after": None},
        {**ENVELOPE, "after": {"n": 1}},  # no key
        {"op": "d", "before": None, "after": None, "source": {"lsn": 1}},
        {**ENVELOPE, "after": '{"id": 5}'},
    ],
)  # fmt: skip
def test_envelopes_the_columns_cannot_read_get_the_record_readers_rows(odd) -> None:
    records = batch([ENVELOPE, odd])
    cdc = spec(format="debezium-json", mode="cdc-scd1", keys=("id",), order_by="source.lsn")
    assert columnar.read(records, cdc) is None
    assert rows(next(read_batches(iter([records]), cdc))) == one_at_a_time(records, cdc)


def test_latest_per_key_tombstones_delete_and_null_keys_go_to_the_record_reader() -> None:
    mirror = spec(mode="latest-per-key")
    records = batch([CLEAN, None])
    assert [r["_deleted"] for r in rows(next(read_batches(iter([records]), mirror)))] == [
        False, True,
    ]  # fmt: skip
    keyless = batch([CLEAN, CLEAN], keys=[b"k", None])
    assert columnar.read(keyless, mirror) is None


def test_dates_timestamps_arrays_and_avro_are_read_one_record_at_a_time() -> None:
    one_at_a_time = ({"day": "date"}, {"at": "timestamp"}, {"tags": []}, {"o": {"d": "date"}})
    for schema in one_at_a_time:
        assert not columnar.readable(schema, "json")
    assert not columnar.readable({"id": "long"}, "avro")
    assert columnar.readable(SCHEMA, "debezium-json")
