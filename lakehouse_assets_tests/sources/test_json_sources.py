"""Declared JSON sources on the embedded broker: the refined shape of an append source, schema
inference, persistence and drift, and the latest-per-key mirror. Expected rows are written by
hand from the records produced."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.constants import SILVER
from lakehouse_assets.sources.assets import source_assets
from lakehouse_assets.sources.declaration.files import load_declaration
from lakehouse_assets.sources.declaration.model import SourceDeclaration
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.sample_data import Message, produce
from resources import LakeResource


def declare(tmp_path: Path, resources: dict[str, Any], name: str, text: str) -> SourceDeclaration:
    """The source declared by ``text``, its topic (named like it) created with one partition,
    so that offsets count the records produced."""
    resources["kafka"].create_topic(name, partitions=1)
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return load_declaration(path)


def rows(spark: SparkSession, lake: LakeResource, table: str, order: str) -> list[dict[str, Any]]:
    frame = lake.read(spark, SILVER, table)
    return [row.asDict(recursive=True) for row in frame.orderBy(order).collect()]


def record(key: str | None, value: dict[str, Any] | str | None, topic: str) -> Message:
    text = value if isinstance(value, str) or value is None else json.dumps(value)
    return Message(topic, key, text)


def schema_file(lake: LakeResource, name: str) -> Path:
    return Path(lake.path(SILVER, "_schemas", f"{name}.json"))


def test_an_append_source_is_refined_flat_with_kafka_columns_and_declared_partitions(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    source = declare(
        tmp_path, resources, "visits", "topic: visits\npartition_by: [club, date(at)]\n"
    )
    lake: LakeResource = resources["lake"]
    ann = {"club": "north", "at": "2026-11-01T10:00:00Z",
           "member": {"name": "Ann", "city": ""}, "tags": ["x"], "minutes": 30}  # fmt: skip
    bo = {"club": "south", "at": "2026-11-02T08:30:00Z",
          "member": {"name": "Bo", "city": "Oslo"}, "tags": [], "minutes": 45}  # fmt: skip
    produce(broker.bootstrap_servers, [
        record("a", ann, "visits"),
        record("b", bo, "visits"),
        record("c", "{not json", "visits"),
        record("d", None, "visits"),
    ])  # fmt: skip
    dg.materialize(source_assets(source), resources=resources)

    got = rows(spark, lake, "visits", "_kafka_offset")
    timestamps = [row.pop("_kafka_timestamp") for row in got]
    assert all(isinstance(t, dt.datetime) for t in timestamps)
    base = {"_kafka_topic": "visits", "_kafka_partition": 0, "_raw_change_type": "insert"}
    assert got == [
        {"club": "north", "at": "2026-11-01T10:00:00Z", "member_name": "Ann", "member_city": None,
         "tags": ["x"], "minutes": 30, "_kafka_key": "a", "_kafka_offset": 0,
         "at_date": dt.date(2026, 11, 1), **base},
        {"club": "south", "at": "2026-11-02T08:30:00Z", "member_name": "Bo", "member_city": "Oslo",
         "tags": [], "minutes": 45, "_kafka_key": "b", "_kafka_offset": 1,
         "at_date": dt.date(2026, 11, 2), **base},
    ]  # fmt: skip
    assert lake.table(SILVER, "visits").metadata().partition_columns == ["club", "at_date"]
    rejected = rows(spark, lake, "visits_quarantine", "offset")
    assert [(r["offset"], r["reason"], r["raw_text"]) for r in rejected] == [
        (2, "malformed json", "{not json"), (3, "no value (tombstone)", None),
    ]  # fmt: skip
    assert json.loads(schema_file(lake, "visits").read_text()) == {
        "at": "string", "club": "string", "member": {"city": "string", "name": "string"},
        "minutes": "long", "tags": ["string"],
    }  # fmt: skip


def test_schema_drift_adds_columns_widens_types_and_quarantines_incompatible_records(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    source = declare(tmp_path, resources, "meters", "topic: meters\n")
    lake: LakeResource = resources["lake"]
    servers = broker.bootstrap_servers
    produce(servers, [record("m1", {"id": 1, "reading": 5}, "meters")])
    dg.materialize(source_assets(source), resources=resources)
    assert json.loads(schema_file(lake, "meters").read_text()) == {"id": "long", "reading": "long"}

    # A person edits the schema file: readings are 32-bit integers.
    schema_file(lake, "meters").write_text('{"id": "long", "reading": "int"}')
    produce(servers, [
        record("m2", {"id": 2, "reading": 7, "unit": "kWh"}, "meters"),  # a new field
        record("m3", {"id": 3, "reading": 3_000_000_000}, "meters"),  # beyond int: widens
        record("m4", {"id": "four", "reading": 1}, "meters"),  # incompatible id
    ])  # fmt: skip
    dg.materialize(source_assets(source), resources=resources)
    assert json.loads(schema_file(lake, "meters").read_text()) == {
        "id": "long", "reading": "long", "unit": "string",
    }  # fmt: skip

    produce(servers, [
        record("m5", {"id": 5, "reading": 2.5}, "meters"),  # widens to double
        record("m6", {"id": 6, "reading": "high"}, "meters"),  # incompatible reading
        record("m7", {"id": 7, "reading": {"value": 1}}, "meters"),  # incompatible reading
    ])  # fmt: skip
    dg.materialize(source_assets(source), resources=resources)
    assert json.loads(schema_file(lake, "meters").read_text()) == {
        "id": "long", "reading": "double", "unit": "string",
    }  # fmt: skip
    got = [(r["id"], r["reading"], r["unit"]) for r in rows(spark, lake, "meters", "id")]
    assert got == [(1, 5.0, None), (2, 7.0, "kWh"), (3, 3e9, None), (5, 2.5, None)]
    assert dict(lake.read(spark, SILVER, "meters").dtypes)["reading"] == "double"
    rejected = rows(spark, lake, "meters_quarantine", "offset")
    assert [(r["offset"], r["reason"]) for r in rejected] == [
        (3, "incompatible id: expected long, got string"),
        (5, "incompatible reading: expected double, got string"),
        (6, "incompatible reading: expected double, got object<value: long>"),
    ]


def test_latest_per_key_keeps_the_highest_offset_and_deletes_on_tombstones(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    source = declare(tmp_path, resources, "prices", "topic: prices\nmode: latest-per-key\n")
    lake: LakeResource = resources["lake"]
    servers = broker.bootstrap_servers
    produce(servers, [
        record("apple", {"price": 1.0}, "prices"),
        record("pear", {"price": 2.0}, "prices"),
        record("apple", {"price": 1.5}, "prices"),
        record(None, {"price": 9.9}, "prices"),  # no key: quarantined, never kept
        record("plum", {"price": 3.0}, "prices"),
        record("plum", None, "prices"),  # tombstone in the same batch
    ])  # fmt: skip
    dg.materialize(source_assets(source), resources=resources)
    assert [(r["_kafka_key"], r["price"]) for r in rows(spark, lake, "prices", "_kafka_key")] == [
        ("apple", 1.5), ("pear", 2.0),
    ]  # fmt: skip

    produce(servers, [
        record("pear", None, "prices"),  # tombstone of an earlier batch's key
        record("apple", {"price": 1.75}, "prices"),
        record(None, {"price": 9.9}, "prices"),
    ])  # fmt: skip
    dg.materialize(source_assets(source), resources=resources)
    assert [(r["_kafka_key"], r["price"]) for r in rows(spark, lake, "prices", "_kafka_key")] == [
        ("apple", 1.75),
    ]
    rejected = rows(spark, lake, "prices_quarantine", "offset")
    assert [(r["offset"], r["reason"]) for r in rejected] == [(3, "null key"), (8, "null key")]

    # The schema is inferred anew on request, from the latest value per key in bronze.
    schema_file(lake, "prices").write_text('{"price": "double", "stale": "string"}')
    reinfer = {"ops": {"silver_prices": {"config": {"reinfer_schema": True}}}}
    dg.materialize(source_assets(source), resources=resources, run_config=reinfer)
    assert json.loads(schema_file(lake, "prices").read_text()) == {"price": "double"}
