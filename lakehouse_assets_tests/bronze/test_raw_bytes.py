"""Bronze keeps the Kafka records as delivered, byte for byte; silver decodes them, and the
quarantine keeps the bytes of what it rejects (docs/fitness_pipeline.md, "What is rejected")."""

from __future__ import annotations

import json
import struct
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE, SILVER
from lakehouse_assets.fitness.names import HEART_RATE, TOPIC_BPM
from lakehouse_assets_tests.bronze.helpers import BPM_ASSET, HEART_RATE_ASSET
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.sample_data import Message, produce

TWO_MB = 2 * 1024 * 1024


def reading(device_id: Any, time: int, **more: Any) -> bytes:
    return json.dumps({"device_id": device_id, "time": time, "heartrate": 70.0, **more}).encode()


def avro_reading() -> bytes:
    """An Avro-encoded reading ``{device_id: long 1, time: long 101, heartrate: double 70.0}``:
    longs as zig-zag varints (1 -> 0x02, 101 -> 202 = 0xca 0x01), the double as 8 little-endian
    bytes (Avro specification, "Binary Encoding")."""
    return b"\x02" + b"\xca\x01" + struct.pack("<d", 70.0)


# (key, value, headers, the reason silver gives; None: accepted)
RECORDS: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes], ...], str | None]] = [
    (b"1", b"\xff\xfe\xfa not utf8", (), "not utf-8"),
    (b"1", reading(1, 100, pad="x" * TWO_MB), (), None),
    (None, reading(2, 100), (), None),
    (b"3", None, (), "malformed json"),
    (b"3", reading("3", 100), (), "wrong type device_id"),
    (b"3", b"[" * 5000 + b"]" * 5000, (), "malformed json"),
    (b"3", b"", (), "malformed json"),
    (b"\x00\xff", reading(3, 100), (("trace", b"\x00\x01\xfe"), ("origin", b"gym")), None),
    (b"1", avro_reading(), (("content-type", b"avro/binary"),), "not utf-8"),
]


def test_bronze_holds_the_bytes_produced_and_silver_sorts_them(
    broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    resources["kafka"].create_topic(TOPIC_BPM, partitions=1)  # offsets in production order
    produce(
        broker.bootstrap_servers,
        [Message(TOPIC_BPM, key, value, headers) for key, value, headers, _ in RECORDS],
    )
    dg.materialize([BPM_ASSET, HEART_RATE_ASSET], resources=resources)
    lake = resources["lake"]

    bronze = lake.read(spark, BRONZE, TOPIC_BPM).orderBy("offset").collect()
    assert [(r.key, r.value) for r in bronze] == [(key, value) for key, value, *_ in RECORDS]
    # Spark's Kafka source: null for a record without headers.
    assert [r.headers and [(h.key, h.value) for h in r.headers] for r in bronze] == [
        list(headers) or None for _, _, headers, _ in RECORDS
    ]
    assert {r.timestampType for r in bronze} == {0}  # the producer's create time

    accepted = lake.read(spark, SILVER, HEART_RATE).select("device_id").collect()
    assert sorted(r.device_id for r in accepted) == [1, 2, 3]

    quarantine = lake.read(spark, SILVER, f"{TOPIC_BPM}_quarantine").orderBy("offset").collect()
    rejected = [(offset, value, reason) for offset, (_, value, _, reason) in enumerate(RECORDS)]
    rejected = [record for record in rejected if record[2]]
    assert [(r.offset, r.raw, r.reason) for r in quarantine] == rejected
    assert quarantine[0].raw_text == "hex:fffefa206e6f742075746638"
    assert quarantine[2].raw_text == '{"device_id": "3", "time": 100, "heartrate": 70.0}'
    assert quarantine[-1].raw_text == "hex:02ca010000000000805140"
