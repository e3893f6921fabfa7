"""Every batch shape a keyed source meets, one batch after another on one table per mode
(issue 31): an empty batch (a bronze version without new rows, as OPTIMIZE makes), a batch whose
records are all quarantined, one of only deletes of keys never seen, all three before the table
holds a row; then inserts, only deletes (of a key held and of one never seen), only updates, and
a mixed batch (a reject, an update, an insert, a key inserted again after its delete, a delete of
a key never seen, a duplicate, a late older change, '' beside NULL).

Batches go to ``refine`` as bronze rows (no Kafka, no Dagster: its reading, quarantine and merges
are what is tested). After each batch the table must equal what a plain-Python model of the
mode makes of all the batches so far: the newest change per key (by ``order_by``, a delete
winning a tie, one arriving late changing nothing), every version for SCD2, the highest offset
per key for latest-per-key."""

from __future__ import annotations

import datetime as dt
import functools
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from lakehouse_assets.constants import SILVER
from lakehouse_assets.sources.declaration.files import load_declaration
from lakehouse_assets.sources.declaration.model import SourceDeclaration
from lakehouse_assets_tests.sources.steps import refined
from resources import LakeResource

BRONZE_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("ingested_at", TimestampType()),
        StructField("_change_type", StringType()),
    ]
)
AT = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
MALFORMED = "malformed"

# (kind, key, sequence, value): an upsert, a delete, or a record that is not valid.
Event = tuple[str, int, int, str | None]
BATCHES: list[tuple[str, list[Event]]] = [
    ("empty, before any row", []),
    ("quarantined only, before any row", [(MALFORMED, 1, 1, None)]),
    ("deletes of keys never seen", [("delete", 8, 2, None), ("delete", 9, 3, None)]),
    ("inserts", [("upsert", 1, 10, "a"), ("upsert", 2, 11, "b"), ("upsert", 3, 12, None)]),
    ("deletes only, one key never seen", [("delete", 2, 20, None), ("delete", 7, 21, None)]),
    ("updates only", [("upsert", 1, 25, "a2"), ("upsert", 3, 26, "c")]),
    ("mixed", [
        (MALFORMED, 1, 22, None),
        ("upsert", 1, 30, ""),  # '' beside 3's NULL
        ("upsert", 1, 30, ""),  # a duplicate
        ("upsert", 4, 31, "d"),
        ("upsert", 2, 32, "b2"),  # inserted again after its delete
        ("delete", 6, 33, None),  # a key never seen
        ("upsert", 3, 5, "old"),  # older than what the table holds: changes nothing (CDC)
        ("upsert", 8, 1, "older than its delete"),  # (CDC) stays deleted
    ]),
]  # fmt: skip


def bronze(spark: SparkSession, mode: str, events: list[Event], first_offset: int) -> Any:
    rows = []
    for i, (kind, key, sequence, value) in enumerate(events):
        rows.append(
            (*record(mode, kind, key, sequence, value), "things", 0, first_offset + i, AT, AT,
             "insert")
        )  # fmt: skip
    return spark.createDataFrame(rows, BRONZE_SCHEMA)


def record(mode: str, kind: str, key: int, sequence: int, value: str | None) -> tuple:
    """The Kafka key and value of an event, in the mode's format."""
    if kind == MALFORMED:
        return str(key).encode(), b"{not json"
    if mode == "latest-per-key":
        payload = None if kind == "delete" else json.dumps({"v": value}).encode()
        return f"k{key}".encode(), payload
    row = {"id": key} if kind == "delete" else {"id": key, "v": value}
    envelope = {"op": "d" if kind == "delete" else "u", "source": {"lsn": sequence},
                "before": row if kind == "delete" else None,
                "after": None if kind == "delete" else row}  # fmt: skip
    if mode.endswith(WITH_SCHEMAS):  # as JsonConverter writes it with schemas.enable=true
        envelope = {"schema": CONNECT_SCHEMA, "payload": envelope}
    return json.dumps({"id": key}).encode(), json.dumps(envelope).encode()


WITH_SCHEMAS = ", with Kafka Connect schemas"
ROW_SCHEMA = {"type": "struct", "optional": True, "name": "things.Value", "fields": [
    {"type": "int64", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "field": "v"},
]}  # fmt: skip
CONNECT_SCHEMA = {"type": "struct", "optional": False, "name": "things.Envelope", "fields": [
    {**ROW_SCHEMA, "field": "before"}, {**ROW_SCHEMA, "field": "after"},
    {"type": "string", "optional": False, "field": "op"},
]}  # fmt: skip


def latest_per_key(events: list[Event]) -> list[tuple]:
    """The last record per key in offset order; a tombstone deletes; '' is NULL (json)."""
    table: dict[str, str | None] = {}
    for kind, key, _, value in events:
        if kind == "delete":
            table.pop(f"k{key}", None)
        elif kind == "upsert":
            table[f"k{key}"] = value or None
    return list(table.items())


def _newest_first(events: list[Event]) -> dict[int, list[tuple[int, bool, str | None]]]:
    """Per key, one change per sequence (a delete wins a tie, else the later record), in order."""
    changes: dict[int, dict[int, tuple[bool, str | None]]] = {}
    for kind, key, sequence, value in events:
        if kind == MALFORMED:
            continue
        at = changes.setdefault(key, {})
        if not (sequence in at and at[sequence][0]):
            at[sequence] = (kind == "delete", value)
    return {key: [(s, *at[s]) for s in sorted(at)] for key, at in changes.items()}


def scd1(events: list[Event]) -> list[tuple]:
    """The newest change per key, when it is not a delete."""
    rows = []
    for key, changes in _newest_first(events).items():
        _, deleted, value = changes[-1]
        if not deleted:
            rows.append((key, value))
    return rows


def scd2(events: list[Event]) -> list[tuple]:
    """Each change that is not a delete, valid until the key's next change."""
    rows = []
    for key, changes in _newest_first(events).items():
        for (sequence, deleted, value), after in zip(changes, [*changes[1:], None], strict=True):
            if not deleted:
                rows.append((key, sequence, after[0] if after else None, value))
    return rows


MODES = {
    "latest-per-key": ("topic: things\nmode: latest-per-key\n", ["_kafka_key", "v"],
                       latest_per_key),
    # Partitioned by its key, as a table of many keys may be.
    "cdc-scd1": ("topic: things\nformat: debezium-json\nmode: cdc-scd1\nkeys: [id]\n"
                 "order_by: source.lsn\npartition_by: [id]\n", ["id", "v"], scd1),
    "cdc-scd2": ("topic: things\nformat: debezium-json\nmode: cdc-scd2\nkeys: [id]\n"
                 "order_by: source.lsn\n", ["id", "valid_from", "valid_to", "v"], scd2),
}  # fmt: skip
# The CDC modes again, their envelopes typed by the schema they carry instead of by inference.
MODES.update({f"{mode}{WITH_SCHEMAS}": MODES[mode] for mode in ("cdc-scd1", "cdc-scd2")})


def ordered(rows: list[tuple]) -> list[tuple]:
    """``rows`` sorted column by column, NULLs last; integral decimals as integers."""
    plain = [tuple(int(v) if isinstance(v, Decimal) and v == int(v) else v for v in row)
             for row in rows]  # fmt: skip
    return sorted(plain, key=lambda row: tuple((v is None, "" if v is None else v) for v in row))


def table(
    spark: SparkSession, lake: LakeResource, source: SourceDeclaration, columns: list[str]
) -> list[tuple]:
    if not lake.exists(SILVER, source.name):
        return []
    frame = lake.read(spark, SILVER, source.name)
    if not set(columns) <= set(frame.columns):  # a table made before any row had the column
        assert frame.count() == 0, f"rows without the columns {columns}"
        return []
    return ordered([tuple(row) for row in frame.select(*columns).collect()])


@pytest.mark.parametrize("mode", list(MODES))
def test_every_batch_shape_leaves_the_table_as_the_model_says_and_the_source_moving(
    mode: str, tmp_path: Path, resources: dict[str, Any], spark: SparkSession
) -> None:
    text, columns, model = MODES[mode]
    (tmp_path / "things.yaml").write_text(text)
    source = load_declaration(tmp_path / "things.yaml")
    lake: LakeResource = resources["lake"]
    first_offsets = [sum(len(events) for _, events in BATCHES[:i]) for i in range(len(BATCHES))]
    for version, (shape, _) in enumerate(BATCHES):
        # As the asset does: every batch since the last one silver recorded (a batch may wait).
        consumed = lake.committed_version(SILVER, source.name, "shapes")
        pending = range(0 if consumed is None else consumed + 1, version + 1)
        changes = functools.reduce(
            DataFrame.unionByName,
            [bronze(spark, mode, BATCHES[i][1], first_offsets[i]) for i in pending],
        )
        refined(lake, spark, source, changes, {"shapes": version})
        seen = [event for _, events in BATCHES[: version + 1] for event in events]
        assert table(spark, lake, source, columns) == ordered(model(seen)), shape
    rejected = lake.read(spark, SILVER, f"{source.name}_quarantine").collect()
    assert sorted(row.offset for row in rejected) == [0, 10], "the two malformed records, once"
    if mode.startswith("cdc-scd2"):  # the order values are integers (LSNs): so are the bounds
        stored = lake.read(spark, SILVER, source.name).schema
        assert [stored[c].dataType for c in ("valid_from", "valid_to")] == [LongType()] * 2


def change(key: int, at: str | int, value: str, offset: int) -> tuple:
    """A bronze row of a Debezium upsert of ``key`` ordered by ``source.lsn`` = ``at``."""
    envelope = {"op": "u", "source": {"lsn": at}, "after": {"id": key, "v": value}}
    return (json.dumps({"id": key}).encode(), json.dumps(envelope).encode(), "things", 0, offset,
            AT, AT, "insert")  # fmt: skip


def test_scd2_ordered_by_date_times_has_timestamp_validity_and_quarantines_a_number(
    tmp_path: Path, resources: dict[str, Any], spark: SparkSession
) -> None:
    (tmp_path / "things.yaml").write_text(MODES["cdc-scd2"][0])
    source = load_declaration(tmp_path / "things.yaml")
    lake: LakeResource = resources["lake"]
    first = [change(1, "2026-11-01T10:00:00Z", "a", 0), change(1, "2026-11-01T11:00:00Z", "b", 1)]
    refined(lake, spark, source, spark.createDataFrame(first, BRONZE_SCHEMA), {"shapes": 0})
    # A number where the table holds date-times: quarantined with its reason, the rest merged.
    second = [change(2, 5, "x", 2), change(1, "2026-11-01T12:00:00.5Z", "c", 3)]
    refined(lake, spark, source, spark.createDataFrame(second, BRONZE_SCHEMA), {"shapes": 1})
    stored = lake.read(spark, SILVER, source.name)
    assert [stored.schema[c].dataType for c in ("valid_from", "valid_to")] == [TimestampType()] * 2

    def hour(h: int, micros: int = 0) -> dt.datetime:
        return dt.datetime(2026, 11, 1, h, microsecond=micros)  # naive UTC, as Spark returns it

    rows = stored.select("id", "valid_from", "valid_to", "v").collect()
    assert sorted(tuple(row) for row in rows) == [
        (1, hour(10), hour(11), "a"),
        (1, hour(11), hour(12, 500_000), "b"),
        (1, hour(12, 500_000), None, "c"),
    ]
    [rejected] = lake.read(spark, SILVER, f"{source.name}_quarantine").collect()
    reason = "source.lsn is a long; valid_from holds timestamp"
    # Quarantined after the read, it keeps its bytes all the same, like any reject.
    assert (rejected.offset, rejected.raw, rejected.reason) == (2, second[0][1], reason)
