"""Declared sources whose fields are declared (``fields``): each typed and checked by its rules,
a record breaking one quarantined with the first it breaks, on the embedded broker. Expected
rows and reasons are written by hand from the records produced and the rules
(docs/sources.md, "Declared fields")."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.constants import LANDING_DIR
from lakehouse_assets.sources.assets import source_assets
from lakehouse_assets.sources.declaration.files import InvalidDeclaration, load_declaration
from lakehouse_assets_tests.sources.test_json_sources import declare, record, rows
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.sample_data import produce
from resources import LakeResource

TAPS = """\
topic: taps
fields:
  - {name: device_id, type: integer}
  - {name: at, type: number}
  - {name: action, type: string, allowed: [in, out]}
  - {name: city, type: string, required: false, path: place.city}
  - {name: note, type: string, required: false}
"""
KAFKA = ["_kafka_key", "_kafka_topic", "_kafka_partition", "_kafka_offset", "_kafka_timestamp"]


def checks(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def quarantined(spark: SparkSession, lake: LakeResource, name: str) -> list[tuple[int, str]]:
    table = rows(spark, lake, f"{name}_quarantine", "offset")
    return [(r["offset"], r["reason"]) for r in table]


def test_an_append_source_types_its_declared_fields_and_quarantines_by_the_first_rule_broken(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    source = declare(tmp_path, resources, "taps", TAPS)
    lake: LakeResource = resources["lake"]
    produce(broker.bootstrap_servers, [
        record("a", {"device_id": 1, "at": 1.5, "action": "in", "place": {"city": "Oslo"},
                     "note": ""}, "taps"),  # '' is no value (a json source's default)
        record("b", {"device_id": 2, "at": 2, "action": "out"}, "taps"),
        record("c", {"device_id": "x", "at": 1, "action": "in"}, "taps"),
        record("d", {"at": 1, "action": "in"}, "taps"),
        record("e", {"device_id": 3, "at": 1, "action": "run"}, "taps"),
        record("f", "{not json", "taps"),
        record("g", None, "taps"),
        record("h", {"device_id": 4, "at": 1, "action": ""}, "taps"),  # '' required: missing
        record(None, {"device_id": 5, "at": 1.25, "action": "out", "note": "hi", "x": 1}, "taps"),
        record("j", {"device_id": None, "at": "soon", "action": "in"}, "taps"),  # null first
        record("k", [1, 2], "taps"),  # JSON, not an object
        record("m", {"device_id": 6, "at": 1.1234567, "action": "in"}, "taps"),  # rounded
        record("n", {"device_id": 7, "at": 1e30, "action": "in"}, "taps"),  # beyond decimal(20,6)
        record("o", {"device_id": 2**63, "at": 1, "action": "in"}, "taps"),  # beyond bigint
    ])  # fmt: skip
    result = dg.materialize(source_assets(source), resources=resources)
    assert result.success

    got = rows(spark, lake, "taps", "_kafka_offset")
    assert list(got[0]) == ["device_id", "at", "action", "city", "note", *KAFKA]
    assert all(isinstance(row.pop("_kafka_timestamp"), dt.datetime) for row in got)
    base = {"_kafka_topic": "taps", "_kafka_partition": 0}
    assert got == [
        {"device_id": 1, "at": Decimal("1.500000"), "action": "in", "city": "Oslo", "note": None,
         "_kafka_key": "a", "_kafka_offset": 0, **base},
        {"device_id": 2, "at": Decimal("2.000000"), "action": "out", "city": None, "note": None,
         "_kafka_key": "b", "_kafka_offset": 1, **base},
        {"device_id": 5, "at": Decimal("1.250000"), "action": "out", "city": None, "note": "hi",
         "_kafka_key": None, "_kafka_offset": 8, **base},
        {"device_id": 6, "at": Decimal("1.123457"), "action": "in", "city": None, "note": None,
         "_kafka_key": "m", "_kafka_offset": 11, **base},
    ]  # fmt: skip
    assert quarantined(spark, lake, "taps") == [
        (2, "wrong type device_id"), (3, "missing device_id"), (4, "unknown action"),
        (5, "malformed json"), (6, "no value (tombstone)"), (7, "missing action"),
        (9, "missing device_id"), (10, "malformed json"), (12, "out of range at"),
        (13, "out of range device_id"),
    ]  # fmt: skip
    assert checks(result) == {
        "primary_key_unique": True, "primary_key_not_null": True, "accepted_action": True,
        "reconciled_with_bronze": True, "not_empty": True, "quarantine_rate": False,
    }  # fmt: skip

    # Again with nothing new: nothing is written twice.
    assert dg.materialize(source_assets(source), resources=resources).success
    assert len(rows(spark, lake, "taps", "_kafka_offset")) == 4
    assert len(quarantined(spark, lake, "taps")) == 10

    # A batch that filters to nothing, on the table the first batch made.
    produce(broker.bootstrap_servers, [record("l", {"device_id": 6, "action": "in"}, "taps")])
    result = dg.materialize(source_assets(source), resources=resources)
    assert result.success and checks(result)["reconciled_with_bronze"]
    assert len(rows(spark, lake, "taps", "_kafka_offset")) == 4
    assert quarantined(spark, lake, "taps")[-1] == (14, "missing at")

    # A full refresh rebuilds both tables from all of bronze, the same rows.
    refresh = {"ops": {"silver_taps": {"config": {"full_refresh": True}}}}
    assert dg.materialize(source_assets(source), resources=resources, run_config=refresh).success
    assert [r["_kafka_offset"] for r in rows(spark, lake, "taps", "_kafka_offset")] == [0, 1, 8, 11]
    assert [o for o, _ in quarantined(spark, lake, "taps")] == [2, 3, 4, 5, 6, 7, 9, 10, 12, 13, 14]


def test_a_latest_per_key_source_keeps_the_newest_record_of_each_declared_key(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    text = """\
topic: levels
mode: latest-per-key
keys: [device_id]
empty_strings: keep
fields:
  - {name: device_id, type: integer}
  - {name: level, type: integer, required: false}
  - {name: label, type: string, required: false}
"""
    source = declare(tmp_path, resources, "levels", text)
    lake: LakeResource = resources["lake"]
    servers = broker.bootstrap_servers
    produce(servers, [
        record("k", {"device_id": 1, "level": 5}, "levels"),
        record("k", {"device_id": 1, "level": 6, "label": ""}, "levels"),  # '' kept: a value
        record("k", {"device_id": 2, "level": 1, "label": "x"}, "levels"),
        record("k", {"device_id": 2}, "levels"),  # the newest of 2: no level, no label
    ])  # fmt: skip
    assert dg.materialize(source_assets(source), resources=resources).success
    got = [(r["device_id"], r["level"], r["label"], r["_kafka_offset"])
           for r in rows(spark, lake, "levels", "device_id")]  # fmt: skip
    assert got == [(1, 6, "", 1), (2, None, None, 3)]

    produce(servers, [
        record("k", {"device_id": 1, "level": 7}, "levels"),
        record("k", {"device_id": 3, "level": "high"}, "levels"),
        record("k", None, "levels"),  # no field tells its key: quarantined, as in append
        record("k", {"device_id": 4, "level": ""}, "levels"),  # '' kept: not an integer
    ])  # fmt: skip
    result = dg.materialize(source_assets(source), resources=resources)
    assert result.success and all(
        checks(result)[c] for c in ("primary_key_unique", "reconciled_with_bronze")
    )
    got = [(r["device_id"], r["level"], r["label"], r["_kafka_offset"])
           for r in rows(spark, lake, "levels", "device_id")]  # fmt: skip
    assert got == [(1, 7, None, 4), (2, None, None, 3)]
    assert quarantined(spark, lake, "levels") == [
        (5, "wrong type level"), (6, "no value (tombstone)"), (7, "wrong type level"),
    ]  # fmt: skip


BADGES = """\
format: csv
mode: latest-per-key
keys: [badge_id]
fields:
  - {name: badge_id, type: integer}
  - {name: door, type: string}
  - {name: at, type: integer}
"""


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        (TAPS + "format: debezium-json\n", 2, "fields", "format json"),
        (
            TAPS.replace(
                "topic: taps",
                "topic: taps\nmode: cdc-scd1\nformat: debezium-json\nkeys: [device_id]",
            ),
            5,
            "fields",
            "mode append or latest-per-key",
        ),
        (TAPS + "mode: latest-per-key\n", 1, "keys", "name them"),
        (TAPS + "mode: latest-per-key\nkeys: [id]\n", 9, "keys", "'id' is not a declared field"),
        (TAPS + "  - {name: at, type: string}\n", 2, "fields", "'at' is declared twice"),
        (TAPS + "partition_by: [date(at)]\n", 8, "partition_by", "not partitioned"),
        (TAPS + "  - {name: n, type: float}\n", 8, "fields.5.type", "'integer'"),
        (TAPS + "  - {name: n, type: string, path: 'a b'}\n", 8, "fields.5.path", "dotted"),
        (TAPS + "  - {name: N, type: string}\n", 8, "fields.5.name", "lower case"),
        ("format: csv\n", 1, "fields", "declares its fields"),
        (BADGES + "topic: badges\n", 8, "topic", "leave out the topic"),
        (BADGES.replace("mode: latest-per-key", "mode: append"), 2, "mode", "latest-per-key"),
        (BADGES + "  - {name: n, type: number}\n", 8, "fields.3.type", "integer or a string"),
        (BADGES + "  - {name: n, type: string, required: false}\n", 8, "fields.3", "by position"),
    ],
)
def test_a_bad_field_declaration_is_reported_with_its_line_and_field(
    tmp_path: Path, text: str, line: int, field: str, words: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InvalidDeclaration) as raised:
        load_declaration(path)
    error = raised.value.errors[0]
    assert (error.line, error.field) == (line, field), str(error)
    assert words in error.message, str(error)


def drop_file(lake: LakeResource, source: str, name: str, text: str) -> None:
    folder = Path(lake.path(LANDING_DIR, source))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text)


def test_a_csv_source_keeps_the_latest_row_of_each_key_of_its_landing_files(
    tmp_path: Path, resources: dict[str, Any], spark: SparkSession
) -> None:
    path = tmp_path / "badges.yaml"
    path.write_text(BADGES)
    source = load_declaration(path)
    lake: LakeResource = resources["lake"]
    lines = ["badge_id,door,at", "1,north,100", "1,south,200", "2,,150", "x,east,10", "3,west,300"]
    drop_file(lake, "badges", "scans-1.csv", "\n".join([*lines, "", ""]))
    result = dg.materialize(source_assets(source), resources=resources)
    assert result.success

    def silver() -> list[tuple[Any, ...]]:
        return [(r["badge_id"], r["door"], r["at"], Path(r["_landing_file"]).name)
                for r in rows(spark, lake, "badges", "badge_id")]  # fmt: skip

    def rejected() -> list[tuple[str, str, str]]:
        table = rows(spark, lake, "badges_quarantine", "raw_text")
        return [(Path(r["source"]).name, r["raw_text"], r["reason"]) for r in table]

    # Of one file's rows of a key, the greatest: (1, south, 200) over (1, north, 100).
    assert silver() == [(1, "south", 200, "scans-1.csv"), (3, "west", 300, "scans-1.csv")]
    assert rejected() == [("scans-1.csv", "2,,150", "missing door"),
                          ("scans-1.csv", "x,east,10", "wrong type badge_id")]  # fmt: skip
    assert checks(result) == {
        "primary_key_unique": True, "primary_key_not_null": True,
        "reconciled_with_bronze": True, "not_empty": True, "quarantine_rate": False,
    }  # fmt: skip

    assert dg.materialize(source_assets(source), resources=resources).success  # nothing new
    assert len(silver()) == 2 and len(rejected()) == 2

    drop_file(lake, "badges", "scans-2.csv", "badge_id,door,at\n1,north,400\n4,east,\n")
    drop_file(lake, "badges", "empty.csv", "")
    drop_file(lake, "badges", "header.csv", "badge_id,door,at\n")
    assert dg.materialize(source_assets(source), resources=resources).success
    assert silver() == [(1, "north", 400, "scans-2.csv"), (3, "west", 300, "scans-1.csv")]
    assert rejected() == [("scans-1.csv", "2,,150", "missing door"),
                          ("scans-2.csv", "4,east,", "missing at"),
                          ("scans-1.csv", "x,east,10", "wrong type badge_id")]  # fmt: skip

    # A file of only bad lines leaves silver as it was.
    drop_file(lake, "badges", "scans-3.csv", "3,,\n")
    assert dg.materialize(source_assets(source), resources=resources).success
    assert silver() == [(1, "north", 400, "scans-2.csv"), (3, "west", 300, "scans-1.csv")]
    assert ("scans-3.csv", "3,,", "missing door") in rejected()
