"""Debezium's unavailable-value placeholder (an unchanged TOASTed column) through ``refine``, one
batch after another on one table per CDC mode: the placeholder is never stored; a column holding
it keeps the key's value before the change (SCD1: the current row's; SCD2: the previous
version's), whether that value is stored or in an earlier change of the same batch; NULL when the
key has none (its first change, or the first after a delete).

After each batch the table must equal what a plain-Python model makes of all the batches so far,
written from that rule: per key, one change per sequence (a delete wins a tie, else the later
record), in sequence order; a placeholder takes the value of the change before it, back to the
last delete."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.constants import SILVER
from lakehouse_assets.sources.declaration.files import load_declaration
from lakehouse_assets_tests.sources.steps import refined
from lakehouse_assets_tests.sources.test_merge_shapes import AT, BRONZE_SCHEMA, ordered
from resources import LakeResource

P = "<unavailable>"  # in the model: the change holds the placeholder
PLACEHOLDER = "__debezium_unavailable_value"
PLACEHOLDER_BYTES = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="  # its bytes, base64
Event = tuple[str, int, int, str | None]  # (upsert | delete, key, sequence, value)
BATCHES: list[tuple[str, list[Event]]] = [
    ("empty, before the table", []),
    ("the placeholder in a key's first change", [("upsert", 1, 10, P)]),
    ("inserts; a key inserted then updated with the placeholder in one batch", [
        ("upsert", 2, 11, "b"), ("upsert", 3, 12, "c"), ("upsert", 4, 13, "d"),
        ("upsert", 4, 14, P), ("upsert", 7, 15, "g"),
    ]),
    ("placeholders over stored rows, twice in a row for one key", [
        ("upsert", 2, 20, P), ("upsert", 3, 21, P), ("upsert", 3, 22, P),
    ]),
    ("deletes only, one of a key never seen", [("delete", 2, 30, None), ("delete", 9, 31, None)]),
    ("mixed", [
        ("upsert", 5, 40, ""), ("upsert", 5, 41, P),  # '' is a value
        ("upsert", 6, 42, None), ("upsert", 6, 43, P),  # and so is NULL
        ("upsert", 2, 44, P),  # after its delete: nothing to keep
        ("upsert", 3, 45, P), ("upsert", 3, 45, P),  # a duplicate
        ("upsert", 4, 47, P), ("upsert", 4, 46, "d2"),  # out of order: 46 comes first
        ("upsert", 7, 1, "older"),  # late and older than what the table holds
        ("upsert", 8, 48, P),  # a key never seen
    ]),
    ("an update, then its placeholder in the next batch", [("upsert", 2, 50, "b3")]),
    ("the placeholder over the stored update", [("upsert", 2, 51, P), ("upsert", 5, 52, P)]),
    ("empty, on the table", []),
]  # fmt: skip

VALUE = {"type": "struct", "optional": True, "name": "shop.public.things.Value", "fields": [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "v"},
    {"type": "bytes", "optional": True, "field": "b"},
]}  # fmt: skip
SCHEMA = {"type": "struct", "optional": False, "name": "shop.public.things.Envelope", "fields": [
    {**VALUE, "field": "before"}, {**VALUE, "field": "after"},
    {"type": "string", "optional": False, "field": "op"},
]}  # fmt: skip


def bronze_row(event: Event, offset: int) -> tuple:
    """The bronze row of an event: a Debezium envelope with its Connect schema, the value in a
    text column ``v`` and a bytes column ``b`` (its UTF-8, base64), a delete with the key only."""
    kind, key, sequence, value = event
    if kind == "delete":
        row: dict[str, Any] = {"id": key}
    elif value == P:
        row = {"id": key, "v": PLACEHOLDER, "b": PLACEHOLDER_BYTES}
    else:
        encoded = None if value is None else base64.b64encode(value.encode()).decode()
        row = {"id": key, "v": value, "b": encoded}
    deleted = kind == "delete"
    payload = {"before": row if deleted else None, "after": None if deleted else row,
               "op": "d" if deleted else "u", "source": {"lsn": sequence}}  # fmt: skip
    value_bytes = json.dumps({"schema": SCHEMA, "payload": payload}).encode()
    key_bytes = json.dumps({"id": key}).encode()
    return (key_bytes, value_bytes, "things", 0, offset, AT, AT, "insert")


def changes(events: list[Event]) -> dict[int, list[tuple[int, bool, str | None]]]:
    """Per key, ``(sequence, deleted, value)`` in order, the placeholders replaced as the rule
    says (one change per sequence: a delete wins, else the later record)."""
    per_key: dict[int, dict[int, tuple[bool, str | None]]] = {}
    for kind, key, sequence, value in events:
        at = per_key.setdefault(key, {})
        if not (sequence in at and at[sequence][0]):
            at[sequence] = (kind == "delete", value)
    out = {}
    for key, at in per_key.items():
        previous: str | None = None  # nothing before the first change, or after a delete
        filled = []
        for sequence in sorted(at):
            deleted, value = at[sequence]
            if deleted:
                previous = None  # nothing to keep across a delete
            elif value != P:
                previous = value
            filled.append((sequence, deleted, None if deleted else previous))
        out[key] = filled
    return out


def scd1(events: list[Event]) -> list[tuple]:
    rows = []
    for key, history in changes(events).items():
        _, deleted, value = history[-1]
        if not deleted:
            rows.append((key, value, None if value is None else value.encode()))
    return rows


def scd2(events: list[Event]) -> list[tuple]:
    rows = []
    for key, history in changes(events).items():
        for (sequence, deleted, value), after in zip(history, [*history[1:], None], strict=True):
            if not deleted:
                blob = None if value is None else value.encode()
                rows.append((key, sequence, after[0] if after else None, value, blob))
    return rows


MODES = {
    "cdc-scd1": (["id", "v", "b"], scd1),
    "cdc-scd2": (["id", "valid_from", "valid_to", "v", "b"], scd2),
}


def table(spark: SparkSession, lake: LakeResource, name: str, columns: list[str]) -> list[tuple]:
    if not lake.exists(SILVER, name):
        return []
    rows = lake.read(spark, SILVER, name).select(*columns).collect()
    return ordered([tuple(bytes(v) if isinstance(v, bytearray) else v for v in r) for r in rows])


@pytest.mark.parametrize("mode", list(MODES))
def test_a_placeholder_keeps_the_value_before_it_in_every_batch_shape(
    mode: str, tmp_path: Path, resources: dict[str, Any], spark: SparkSession
) -> None:
    columns, model = MODES[mode]
    (tmp_path / "things.yaml").write_text(
        f"topic: things\nformat: debezium-json\nmode: {mode}\nkeys: [id]\norder_by: source.lsn\n"
    )
    source = load_declaration(tmp_path / "things.yaml")
    lake: LakeResource = resources["lake"]
    offset, everything = 0, []
    for version, (shape, events) in enumerate(BATCHES):
        rows = [bronze_row(event, offset + i) for i, event in enumerate(events)]
        offset += len(events)
        everything += rows
        batch = spark.createDataFrame(rows, BRONZE_SCHEMA)
        done = refined(lake, spark, source, batch, {"t": version})
        placeholders = any(event[3] == P for event in events)
        assert done.unavailable == (["b", "v"] if placeholders else []), shape
        seen = [event for _, batch in BATCHES[: version + 1] for event in batch]
        assert table(spark, lake, source.name, columns) == ordered(model(seen)), shape
    stored = lake.read(spark, SILVER, source.name)
    assert "_unavailable" not in stored.columns
    assert stored.where(f"v = '{PLACEHOLDER}'").count() == 0
    # A full refresh from all of bronze makes the same table.
    all_bronze = spark.createDataFrame(everything, BRONZE_SCHEMA)
    refined(lake, spark, source, all_bronze, {"t": len(BATCHES)}, rebuild=True)
    seen = [event for _, batch in BATCHES for event in batch]
    assert table(spark, lake, source.name, columns) == ordered(model(seen)), "full refresh"


def test_a_declared_placeholder_is_the_one_recognised(
    tmp_path: Path, resources: dict[str, Any], spark: SparkSession
) -> None:
    (tmp_path / "things.yaml").write_text(
        "topic: things\nformat: debezium-json\nmode: cdc-scd1\nkeys: [id]\norder_by: source.lsn\n"
        "unavailable_value_placeholder: '<toasted>'\n"
    )
    source = load_declaration(tmp_path / "things.yaml")
    lake: LakeResource = resources["lake"]
    first = {"id": 1, "v": "long text", "b": None}
    second = {"id": 1, "v": "<toasted>", "b": None}
    rows = []
    for offset, row in enumerate([first, second]):
        payload = {"op": "u", "before": None, "after": row, "source": {"lsn": offset}}
        value = json.dumps({"schema": SCHEMA, "payload": payload}).encode()
        rows.append((b'{"id": 1}', value, "things", 0, offset, AT, AT, "insert"))
    refined(lake, spark, source, spark.createDataFrame(rows, BRONZE_SCHEMA), {"t": 0})
    assert table(spark, lake, source.name, ["id", "v", "_sequence"]) == [(1, "long text", 1)]
