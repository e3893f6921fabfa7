"""The Kafka streaming source: offset arithmetic, and reading to the true end of the log."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.devtools.broker import EmbeddedBroker
from lakehouse_assets_tests.conftest import produce
from resources import KafkaResource
from resources.kafka_client import (
    DataLoss,
    KafkaSourceError,
    data_loss,
    from_offsets,
    to_offsets,
)
from resources.kafka_source import KAFKA_SOURCE_FORMAT, KafkaStreamReader, limit_positions


def test_offsets_round_trip_through_the_checkpoint_shape() -> None:
    flat = {("a", 0): 5, ("a", 1): 7, ("b", 0): 0}
    assert to_offsets(flat) == {"a": {"0": 5, "1": 7}, "b": {"0": 0}}
    assert from_offsets(to_offsets(flat)) == flat


def test_limit_shares_the_budget_by_backlog() -> None:
    start = {("t", 0): 0, ("t", 1): 100}
    end = {("t", 0): 100, ("t", 1): 400}  # backlogs 100 and 300
    # 100 records: 100*100//400 = 25 from partition 0, 300*100//400 = 75 from partition 1.
    assert limit_positions(start, end, 100) == {("t", 0): 25, ("t", 1): 175}
    assert limit_positions(start, end, 1000) == end


def test_limit_always_makes_progress() -> None:
    start = {("t", p): 0 for p in range(4)}
    end = {("t", 0): 1, ("t", 1): 1, ("t", 2): 2, ("t", 3): 1}
    assert limit_positions(start, end, 1) == {("t", 0): 0, ("t", 1): 0, ("t", 2): 1, ("t", 3): 0}


@pytest.mark.parametrize(
    "options, message",
    [
        ({"subscribe": "t"}, "kafka.bootstrap.servers"),
        ({"kafka.bootstrap.servers": "h:1"}, "subscribe"),
        ({"kafka.bootstrap.servers": "h:1", "subscribe": "t", "subscribePattern": "t.*"}, "one"),
    ],
)
def test_bad_options_are_named(options: dict[str, str], message: str) -> None:
    with pytest.raises(KafkaSourceError, match=message):
        KafkaStreamReader(options)


def _read_all(spark: SparkSession, servers: str, **options: str) -> list[Any]:
    """Every record the source reads, through Spark's memory sink (a table of the session)."""
    stream = spark.readStream.format(KAFKA_SOURCE_FORMAT).option("kafka.bootstrap.servers", servers)
    for key, value in options.items():
        stream = stream.option(key, value)
    name = f"read_all_{uuid.uuid4().hex}"
    query = stream.load().writeStream.format("memory").queryName(name)
    query.trigger(availableNow=True).start().awaitTermination()
    return spark.table(name).collect()


def test_reads_every_record_although_the_broker_under_reports_the_end(
    broker: EmbeddedBroker, spark: SparkSession
) -> None:
    values = [{"n": n} for n in range(2000)]
    produce(broker.bootstrap_servers, "events", values, key_field="n")  # batched by the producer
    rows = _read_all(spark, broker.bootstrap_servers, subscribe="events")
    assert sorted(json.loads(row.value)["n"] for row in rows) == list(range(2000))
    assert {row.key for row in rows} == {str(n).encode() for n in range(2000)}  # bytes as sent
    assert all(row.topic == "events" and row.timestamp is not None for row in rows)


def test_pattern_subscription_and_explicit_starting_offsets(
    broker: EmbeddedBroker, spark: SparkSession
) -> None:
    kafka = KafkaResource(bootstrap_servers=broker.bootstrap_servers)
    for topic in ("gym_a", "gym_b", "other"):
        kafka.create_topic(topic, partitions=1)
    produce(broker.bootstrap_servers, "gym_a", [{"n": n} for n in range(10)])
    produce(broker.bootstrap_servers, "gym_b", [{"n": n} for n in range(10, 15)])
    produce(broker.bootstrap_servers, "other", [{"n": 99}])
    starting = json.dumps({"gym_a": {"0": 6}})  # gym_b is not named: it starts at its beginning
    rows = _read_all(
        spark, broker.bootstrap_servers, subscribePattern="gym_.*", startingOffsets=starting
    )
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
