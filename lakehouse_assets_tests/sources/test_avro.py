"""An Avro source on the embedded broker: values in Confluent's framing decoded with the
declared .avsc, the schema derived from it, undecodable values quarantined."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import dagster as dg
import fastavro
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.constants import SILVER
from lakehouse_assets.sources.assets import source_assets
from lakehouse_assets.sources.declaration.files import load_declaration
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.sample_data import Message, produce
from resources import LakeResource

AVSC = {
    "type": "record", "name": "Reading", "namespace": "meters",
    "fields": [
        {"name": "meter", "type": "string"},
        {"name": "kwh", "type": "double"},
        {"name": "count", "type": "int"},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "site", "default": None, "type": [
            "null",
            {"type": "record", "name": "Site", "fields": [{"name": "city", "type": "string"}]},
        ]},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}  # fmt: skip


def framed(datum: dict[str, Any]) -> bytes:
    """The datum as Confluent's Avro serializer frames it: magic byte 0, schema id 1."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(AVSC), datum)
    return b"\x00" + (1).to_bytes(4, "big") + body.getvalue()


def test_avro_values_are_decoded_with_the_declared_schema(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "reading.avsc").write_text(json.dumps(AVSC))
    (tmp_path / "readings.yaml").write_text(
        "topic: readings\nformat: avro\navro_schema: schemas/reading.avsc\n"
    )
    source = load_declaration(tmp_path / "readings.yaml")
    resources["kafka"].create_topic("readings", partitions=1)
    at = dt.datetime(2026, 11, 1, 10, 0, tzinfo=dt.UTC)
    produce(broker.bootstrap_servers, [
        Message("readings", "m1", framed({"meter": "m1", "kwh": 1.5, "count": 3,
                "day": dt.date(2026, 11, 1), "at": at, "site": {"city": "Oslo"}, "tags": ["a"]})),
        Message("readings", "m2", framed({"meter": "m2", "kwh": 2.0, "count": 4,
                "day": dt.date(2026, 11, 2), "at": at, "site": None, "tags": []})),
        Message("readings", "m3", b"\x00\x00\x00\x00\x01\xff\xff"),
        Message("readings", "m4", b"hello"),
    ])  # fmt: skip
    dg.materialize(source_assets(source), resources=resources)

    lake: LakeResource = resources["lake"]
    frame = lake.read(spark, SILVER, "readings").orderBy("meter")
    got = frame.select(
        "meter", "kwh", "count", "day", F.unix_micros("at"), "site_city", "tags"
    ).collect()
    micros = int(at.timestamp()) * 1_000_000
    assert [tuple(row) for row in got] == [
        ("m1", 1.5, 3, dt.date(2026, 11, 1), micros, "Oslo", ["a"]),
        ("m2", 2.0, 4, dt.date(2026, 11, 2), micros, None, []),
    ]
    assert dict(frame.dtypes)["count"] == "int"
    schema = json.loads(Path(lake.path(SILVER, "_schemas", "readings.json")).read_text())
    assert schema == {
        "meter": "string", "kwh": "double", "count": "int", "day": "date", "at": "timestamp",
        "site": {"city": "string"}, "tags": ["string"],
    }  # fmt: skip
    rejected = lake.read(spark, SILVER, "readings_quarantine").orderBy("offset").collect()
    assert [(r.offset, r.reason.split(":")[0], r.raw) for r in rejected] == [
        (2, "not avro", b"\x00\x00\x00\x00\x01\xff\xff"), (3, "not avro", b"hello"),
    ]  # fmt: skip
    assert "no Confluent header" in rejected[1].reason
