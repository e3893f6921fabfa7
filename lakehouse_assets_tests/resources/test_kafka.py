"""The Kafka resource: Spark's Kafka source as bronze reads it, and the offsets' arithmetic."""

from __future__ import annotations

import json
import uuid
from typing import Any

from pyspark.sql import SparkSession

from lakehouse_assets_tests.conftest import produce as produce_json
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.sample_data import Message, produce
from resources import KafkaResource
from resources.kafka_client import DataLoss, data_loss, from_offsets, to_offsets


def test_offsets_round_trip_through_the_checkpoint_shape() -> None:
    flat = {("a", 0): 5, ("a", 1): 7, ("b", 0): 0}
    assert to_offsets(flat) == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}
    assert from_offsets(to_offsets(flat)) == flat


def _read_all(spark: SparkSession, kafka: KafkaResource, **options: Any) -> list[Any]:
    """Every record ``kafka.read_stream(**options)`` reads in one availableNow run."""
    name = f"read_all_{uuid.uuid4().hex}"
    stream = kafka.read_stream(spark, **options).writeStream.format("memory").queryName(name)
    stream.trigger(availableNow=True).start().awaitTermination()
    return spark.table(name).collect()


def test_records_are_read_as_sent_with_their_headers(
    broker: EmbeddedBroker, spark: SparkSession
) -> None:
    kafka = KafkaResource(bootstrap_servers=broker.bootstrap_servers)
    kafka.create_topic("events", partitions=2)
    messages = [
        Message("events", str(n), f'{{"n": {n}}}', (("source", b"app"),)) for n in range(50)
    ]
    messages.append(Message("events", "gone", None))  # a tombstone: a key, no value
    produce(broker.bootstrap_servers, messages)
    rows = _read_all(spark, kafka, topics=["events"])
    assert sorted(json.loads(row.value)["n"] for row in rows if row.value) == list(range(50))
    assert {row.key for row in rows} == {str(n).encode() for n in range(50)} | {b"gone"}
    assert all(row.topic == "events" and row.timestamp is not None for row in rows)
    headers = [[(h.key, h.value) for h in row.headers] for row in rows if row.value]
    assert headers == [[("source", b"app")]] * 50


def test_pattern_subscription_and_explicit_starting_offsets(
    broker: EmbeddedBroker, spark: SparkSession
) -> None:
    kafka = KafkaResource(bootstrap_servers=broker.bootstrap_servers)
    for topic in ("gym_a", "gym_b", "other"):
        kafka.create_topic(topic, partitions=1)
    produce_json(broker.bootstrap_servers, "gym_a", [{"n": n} for n in range(10)])
    produce_json(broker.bootstrap_servers, "gym_b", [{"n": n} for n in range(10, 15)])
    produce_json(broker.bootstrap_servers, "other", [{"n": 99}])
    starting = json.dumps({"gym_a": {"0": 6}, "gym_b": {"0": -2}})  # -2: the log's start
    rows = _read_all(spark, kafka, pattern="gym_.*", starting=starting)
    assert sorted(json.loads(row.value)["n"] for row in rows) == [6, 7, 8, 9, 10, 11, 12, 13, 14]


def test_data_loss_finds_checkpoints_outside_the_log() -> None:
    positions = {("t", 0): 10, ("t", 1): 3, ("t", 2): 7, ("t", 3): 0, ("gone", 0): 4}
    starts = {("t", 0): 25, ("t", 1): 0, ("t", 2): 0, ("t", 3): 0}
    ends = {("t", 0): 40, ("t", 1): 3, ("t", 2): 2, ("t", 3): 0}
    lost = data_loss(positions, starts, ends)
    # t-0: 15 records expired unread; t-2: the topic recreated with fewer records; t-1 is at
    # its end, t-3 at its empty start: nothing lost; a vanished topic is not judged here.
    assert lost == {("t", 0): DataLoss(10, 25, 40), ("t", 2): DataLoss(7, 0, 2)}
    assert lost[("t", 0)].records_lost == 15
    assert lost[("t", 0)].problem == "is at offset 10 but the log now starts at 25"
    assert lost[("t", 2)].records_lost is None
    assert lost[("t", 2)].problem == "is at offset 7 but the log now ends at 2"
