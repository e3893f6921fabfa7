"""A declared source read with its schema (inferred, Debezium, Avro) on the embedded broker: a
record that a ``drop`` expectation removes reaches the quarantine with its raw bytes and Kafka
coordinates, like any reject (docs/data_quality.md, "Your own expectations"). Expected rows are
the records produced, written by hand."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.sources.assets import source_assets
from lakehouse_assets.sources.declaration.files import load_declaration
from lakehouse_assets_tests.sources.test_avro import AVSC, framed
from lakehouse_assets_tests.sources.test_debezium import TOPIC, change
from lakehouse_assets_tests.sources.test_json_sources import declare, record, rows
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.sample_data import Message, produce
from resources import LakeResource

# source, partition, offset, raw, raw_text, reason
Quarantined = tuple[str, int, int, bytes | None, str | None, str]


def quarantine(spark: SparkSession, lake: LakeResource, name: str) -> list[Quarantined]:
    table = rows(spark, lake, f"{name}_quarantine", "offset")
    return [
        (r["source"], r["partition"], r["offset"], r["raw"] and bytes(r["raw"]), r["raw_text"],
         r["reason"])
        for r in table
    ]  # fmt: skip


def sent(message: Message, offset: int, reason: str) -> Quarantined:
    """The quarantine's row of ``message``, produced at ``offset`` of partition 0."""
    value = message.value
    raw = value.encode() if isinstance(value, str) else value or b""
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        text = f"hex:{raw.hex()}"  # bytes that are not UTF-8, as the quarantine shows them
    return (message.topic, 0, offset, raw, text, reason)


def test_a_record_dropped_from_an_inferred_schema_keeps_its_bytes_and_coordinates(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    text = 'topic: gauges\nexpectations:\n  - {name: up, check: "level > 0", on_violation: drop}\n'
    source = declare(tmp_path, resources, "gauges", text)
    lake: LakeResource = resources["lake"]
    # A batch of well-formed records (read in columns), then one with a malformed record (read
    # one record at a time): a dropped record keeps its bytes either way.
    first = [record("a", {"level": 1}, "gauges"), record("b", {"level": -1}, "gauges")]
    second = [record("c", "{not json", "gauges"), record("d", {"level": 0}, "gauges")]
    produce(broker.bootstrap_servers, first)
    assert dg.materialize(source_assets(source), resources=resources).success
    produce(broker.bootstrap_servers, second)
    assert dg.materialize(source_assets(source), resources=resources).success
    assert quarantine(spark, lake, "gauges") == [
        sent(first[1], 1, "expectation up"),
        sent(second[0], 2, "malformed json"),
        sent(second[1], 3, "expectation up"),
    ]
    assert [r["level"] for r in rows(spark, lake, "gauges", "_kafka_offset")] == [1]


def test_a_dropped_change_of_a_cdc_source_keeps_its_bytes_and_coordinates(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    resources["kafka"].create_topic(TOPIC, partitions=1)
    path = tmp_path / "customers.yaml"
    path.write_text(
        f"topic: {TOPIC}\nformat: debezium-json\nmode: cdc-scd1\nkeys: [id]\n"
        "order_by: source.lsn\nexpectations:\n"
        '  - {name: named, check: "name IS NOT NULL", on_violation: drop}\n'
    )
    changes = [change("c", 1, 100, "Ann"), change("u", 1, 110), change("c", 2, 120, "Bob")]
    produce(broker.bootstrap_servers, changes)
    assert dg.materialize(source_assets(load_declaration(path)), resources=resources).success
    assert quarantine(spark, resources["lake"], "customers") == [
        sent(changes[1], 1, "expectation named")
    ]


def test_a_dropped_avro_record_keeps_its_bytes_and_coordinates(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    (tmp_path / "reading.avsc").write_text(json.dumps(AVSC))
    (tmp_path / "readings.yaml").write_text(
        "topic: readings\nformat: avro\navro_schema: reading.avsc\nexpectations:\n"
        '  - {name: positive, check: "kwh > 0", on_violation: drop}\n'
    )
    resources["kafka"].create_topic("readings", partitions=1)
    at = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    base = {"meter": "m1", "count": 1, "day": at.date(), "at": at, "site": None, "tags": []}
    negative = Message("readings", "m2", framed({**base, "kwh": -2.5}))
    produce(broker.bootstrap_servers, [Message("readings", "m1", framed({**base, "kwh": 1.5})),
                                       negative])  # fmt: skip
    source = load_declaration(tmp_path / "readings.yaml")
    assert dg.materialize(source_assets(source), resources=resources).success
    assert quarantine(spark, resources["lake"], "readings") == [
        sent(negative, 1, "expectation positive")  # -2.5's bytes are not UTF-8: hex
    ]


def test_a_dropped_record_of_declared_fields_keeps_its_bytes_and_coordinates(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    text = (
        "topic: meters\nfields:\n  - {name: kwh, type: number}\nexpectations:\n"
        '  - {name: positive, check: "kwh > 0", on_violation: drop}\n'
    )
    source = declare(tmp_path, resources, "meters", text)
    records = [record("a", {"kwh": 1}, "meters"), record("b", {"kwh": -1}, "meters")]
    produce(broker.bootstrap_servers, records)
    assert dg.materialize(source_assets(source), resources=resources).success
    assert quarantine(spark, resources["lake"], "meters") == [
        sent(records[1], 1, "expectation positive")
    ]
