"""Debezium's truncates and the connector's messages that change no row (issue 58, item 3).

A truncate (``op: t``, no row, no Kafka key) declared ``truncate: apply`` empties the table as it
was at the truncate's sequence: the expected tables come from a plain-Python model in which a
truncate at sequence T is a delete at T of every key there is (whenever its changes arrive), a
delete winning a tie. Heartbeats, transaction boundaries and logical decoding messages change
nothing and reach no quarantine; a truncate not declared applied is quarantined with its reason.
The batches go to ``refine`` as bronze rows, one after another on one table per mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.constants import SILVER
from lakehouse_assets.sources.declaration.files import load_declaration
from lakehouse_assets.sources.decoding.reader import TRUNCATE_REJECTED
from lakehouse_assets_tests.sources.steps import refined
from lakehouse_assets_tests.sources.test_merge_shapes import (
    AT,
    BRONZE_SCHEMA,
    CONNECT_SCHEMA,
    ordered,
    table,
)
from resources import LakeResource

# (kind, key, sequence): an upsert (its value "v<key>@<sequence>"), a delete, a truncate (no key),
# or a message that changes nothing.
Event = tuple[str, int | None, int | None]
HEARTBEAT, BEGIN, END, MESSAGE = "heartbeat", "begin", "end", "message"
NOTHING = (HEARTBEAT, BEGIN, END, MESSAGE)
BATCHES: list[tuple[str, list[Event]]] = [
    ("a truncate before any row", [("truncate", None, 1)]),
    ("inserts, in a transaction", [
        (BEGIN, None, None), ("upsert", 1, 10), ("upsert", 2, 11), ("upsert", 3, 12),
        (END, None, None),
    ]),
    ("only a truncate and heartbeats", [(HEARTBEAT, None, None), ("truncate", None, 20),
                                        (HEARTBEAT, None, None)]),
    ("mixed", [
        ("upsert", 4, 21),
        ("upsert", 6, 15),  # a key never seen, older than the last truncate: stays out
        ("upsert", 2, 24),  # newer than that truncate, older than the next one
        ("truncate", None, 25),
        ("upsert", 5, 26),
        ("upsert", 1, 27),  # a key the first truncate emptied, inserted again
        (MESSAGE, None, None),
        ("delete", 5, 28),
        ("upsert", 5, 29),
    ]),
    ("late changes only", [
        ("upsert", 7, 22),  # a key never seen, older than the truncate at 25: stays out
        ("upsert", 1, 23),  # older than key 1's row: changes nothing
        ("upsert", 8, 30),
    ]),
    ("a truncate and a change of the same sequence", [("upsert", 8, 40), ("truncate", None, 40),
                                                       ("upsert", 9, 41)]),
]  # fmt: skip


def envelope(event: Event, schemas: bool) -> tuple[bytes | None, bytes]:
    """The Kafka key and value Debezium's connector writes for ``event``."""
    kind, key, sequence = event
    schema: dict[str, Any] = CONNECT_SCHEMA
    if kind == HEARTBEAT:
        value: dict[str, Any] = {"ts_ms": 1764547200000}
        schema = {"type": "struct", "optional": False,
                  "name": "io.debezium.connector.common.Heartbeat",
                  "fields": [{"type": "int64", "optional": False, "field": "ts_ms"}]}  # fmt: skip
        return b'{"serverName":"shop"}', _wrapped(value, schema, schemas)
    if kind in (BEGIN, END):
        value = {"status": kind.upper(), "id": "571:53195829", "ts_ms": 1764547200000,
                 "event_count": 3 if kind == END else None,
                 "data_collections": [{"data_collection": "public.things", "event_count": 3}]
                 if kind == END else None}  # fmt: skip
        schema = {"type": "struct", "optional": False,
                  "name": "io.debezium.connector.common.TransactionMetadataValue",
                  "fields": []}  # fmt: skip
        return b'{"id":"571:53195829"}', _wrapped(value, schema, schemas)
    if kind == MESSAGE:
        value = {"op": "m", "ts_ms": 1764547200000, "source": {"lsn": 5},
                 "message": {"prefix": "audit", "content": "aGk="}}  # fmt: skip
        return None, _wrapped(value, schema, schemas)
    source = {"lsn": sequence, "table": "things"}
    if kind == "truncate":
        return None, _wrapped({"op": "t", "source": source, "ts_ms": 1}, schema, schemas)
    row = {"id": key, "v": None if kind == "delete" else f"v{key}@{sequence}"}
    value = {"op": "d" if kind == "delete" else "u", "source": source,
             "before": row if kind == "delete" else None,
             "after": None if kind == "delete" else row}  # fmt: skip
    return json.dumps({"id": key}).encode(), _wrapped(value, schema, schemas)


def _wrapped(value: dict[str, Any], schema: dict[str, Any], schemas: bool) -> bytes:
    """As Kafka Connect's JsonConverter writes it: with its schema, or without."""
    return json.dumps({"schema": schema, "payload": value} if schemas else value).encode()


def per_key(events: list[Event]) -> dict[int, list[tuple[int, bool, str]]]:
    """Per key, one change per sequence in order: each truncate a delete of every key, a delete
    winning a tie, else the later record."""
    keys = {key for _, key, _ in events if key is not None}
    changes: dict[int, dict[int, tuple[bool, str]]] = {key: {} for key in keys}
    for kind, key, sequence in events:
        if kind in NOTHING:
            continue
        assert sequence is not None
        for emptied in keys if kind == "truncate" else [key]:
            assert emptied is not None
            at = changes[emptied]
            if not (sequence in at and at[sequence][0]):
                at[sequence] = (kind != "upsert", f"v{emptied}@{sequence}")
    return {key: [(s, *at[s]) for s in sorted(at)] for key, at in changes.items()}


def scd1(events: list[Event]) -> list[tuple]:
    return [(key, c[-1][2]) for key, c in per_key(events).items() if c and not c[-1][1]]


def scd2(events: list[Event]) -> list[tuple]:
    rows = []
    for key, changes in per_key(events).items():
        for (sequence, deleted, value), after in zip(changes, [*changes[1:], None], strict=True):
            if not deleted:
                rows.append((key, sequence, after[0] if after else None, value))
    return rows


DECLARATION = "topic: things\nformat: debezium-json\nkeys: [id]\norder_by: source.lsn\n"
MODES = {
    "cdc-scd1": (["id", "v"], scd1),
    "cdc-scd2": (["id", "valid_from", "valid_to", "v"], scd2),
}


def bronze(spark: SparkSession, events: list[Event], first_offset: int, schemas: bool) -> Any:
    rows = [(*envelope(event, schemas), "things", 0, first_offset + i, AT, AT, "insert")
            for i, event in enumerate(events)]  # fmt: skip
    return spark.createDataFrame(rows, BRONZE_SCHEMA)


@pytest.mark.parametrize("schemas", [False, True], ids=["plain", "with Connect schemas"])
@pytest.mark.parametrize("mode", list(MODES))
def test_an_applied_truncate_empties_the_table_as_it_was_at_its_sequence(
    mode: str, schemas: bool, tmp_path: Path, resources: dict[str, Any], spark: SparkSession
) -> None:
    (tmp_path / "things.yaml").write_text(f"{DECLARATION}mode: {mode}\ntruncate: apply\n")
    source = load_declaration(tmp_path / "things.yaml")
    lake: LakeResource = resources["lake"]
    columns, model = MODES[mode]
    offset, pending, unread = 0, [], []
    for version, (shape, events) in enumerate(BATCHES):
        # As the asset does: every batch since the last one silver recorded (a batch may wait).
        pending.append(bronze(spark, events, offset, schemas))
        unread += events
        offset += len(events)
        changes = pending[0]
        for later in pending[1:]:
            changes = changes.unionByName(later)
        done = refined(lake, spark, source, changes, {"truncates": version})
        if not done.waiting:
            truncates = sum(1 for kind, _, _ in unread if kind == "truncate")
            skipped = sum(1 for kind, _, _ in unread if kind in NOTHING)
            assert (done.truncates, done.skipped) == (truncates, skipped), shape
            pending, unread = [], []
        seen = [event for _, events in BATCHES[: version + 1] for event in events]
        assert table(spark, lake, source, columns) == ordered(model(seen)), shape
    assert lake.read(spark, SILVER, "things_quarantine").count() == 0, "nothing is a bad record"


@pytest.mark.parametrize("mode", ["cdc-scd1", "cdc-scd2"])
@pytest.mark.parametrize("schemas", [False, True], ids=["plain", "with Connect schemas"])
def test_a_truncate_not_declared_applied_is_quarantined_and_the_rows_stay(
    mode: str, schemas: bool, tmp_path: Path, resources: dict[str, Any], spark: SparkSession
) -> None:
    (tmp_path / "things.yaml").write_text(f"{DECLARATION}mode: {mode}\n")
    source = load_declaration(tmp_path / "things.yaml")
    lake: LakeResource = resources["lake"]
    events: list[Event] = [("upsert", 1, 10), (HEARTBEAT, None, None), ("truncate", None, 20),
                           (BEGIN, None, None), ("upsert", 2, 21), (END, None, None)]  # fmt: skip
    done = refined(lake, spark, source, bronze(spark, events, 0, schemas), {"truncates": 0})
    assert (done.truncates, done.skipped, done.rejected) == (0, 3, 1)
    if mode == "cdc-scd2":  # every version stays open
        current = [(1, "v1@10", True), (2, "v2@21", True)]
        assert table(spark, lake, source, ["id", "v", "is_current"]) == current
    assert table(spark, lake, source, ["id", "v"]) == [(1, "v1@10"), (2, "v2@21")]
    rejected = lake.read(spark, SILVER, "things_quarantine").collect()
    assert [(row.offset, row.reason) for row in rejected] == [(2, TRUNCATE_REJECTED)]
