"""Kafka client helpers shared by the streaming source, the Kafka resource and the sensors:
consumers that never commit or create topics on their own, true log end offsets, a topic's
partitions, consumer-group commits, and the checkpoint's offsets shape. All use kafka-python.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

# Offsets as Spark keeps them in the checkpoint: {topic: {partition (str): next offset}}.
Offsets = dict[str, dict[str, int]]


TopicPartitionKey = tuple[str, int]


class KafkaSourceError(RuntimeError):
    """The Kafka source cannot go on without losing or inventing data."""


def broker_unreachable(bootstrap_servers: str, error: Exception) -> KafkaSourceError:
    """The error raised when no broker answers at ``bootstrap_servers``."""
    return KafkaSourceError(
        f"Cannot reach Kafka at bootstrap servers '{bootstrap_servers}': {error}. "
        "Check KAFKA_BOOTSTRAP_SERVERS and that the brokers are running."
    )


def new_consumer(bootstrap_servers: str, **config: Any) -> Any:
    """A kafka-python consumer that never commits or creates topics on its own."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    try:
        return KafkaConsumer(
            bootstrap_servers=bootstrap_servers.split(","),
            enable_auto_commit=False,
            allow_auto_create_topics=False,
            request_timeout_ms=30000,
            **config,
        )
    except KafkaError as error:
        raise broker_unreachable(bootstrap_servers, error) from error


def to_offsets(positions: Mapping[TopicPartitionKey, int]) -> Offsets:
    """Nest ``{(topic, partition): offset}`` into the checkpoint's JSON shape."""
    nested: Offsets = {}
    for (topic, partition), offset in sorted(positions.items()):
        nested.setdefault(topic, {})[str(partition)] = offset
    return nested


def from_offsets(offsets: Offsets) -> dict[TopicPartitionKey, int]:
    """Flatten checkpoint offsets into ``{(topic, partition): offset}``."""
    return {
        (topic, int(partition)): offset
        for topic, partitions in offsets.items()
        for partition, offset in partitions.items()
    }


def log_end_offsets(client: Any, partitions: Sequence[Any]) -> dict[TopicPartitionKey, int]:
    """The true log end offset of each partition, read with a fresh kafka-python consumer.

    ListOffsets(latest) can under-report the end (the embedded tansu broker answers the base
    offset of the last record batch + 1), while the high watermark in a fetch response is
    exact. So fetch once from just before the reported end and take the larger of the two.
    """
    if not partitions:
        return {}
    reported = client.end_offsets(list(partitions))
    probed = [tp for tp in partitions if reported[tp] > 0]
    client.assign(probed)
    for tp in probed:
        client.seek(tp, reported[tp] - 1)
    deadline = time.monotonic() + 10
    while probed and time.monotonic() < deadline:
        client.poll(timeout_ms=100, max_records=1)
        if all(client.highwater(tp) is not None for tp in probed):
            break
    highwaters = {tp: client.highwater(tp) or 0 for tp in probed}
    client.assign([])
    return {(tp.topic, tp.partition): max(reported[tp], highwaters.get(tp, 0)) for tp in partitions}


def as_topic_partitions(keys: Iterable[TopicPartitionKey]) -> list[Any]:
    from kafka.structs import TopicPartition

    return [TopicPartition(topic, partition) for topic, partition in keys]


def existing_partitions(
    client: Any, topics: Iterable[str] = (), pattern: re.Pattern[str] | None = None
) -> list[Any]:
    """The partitions of the existing topics named in ``topics`` or matching ``pattern``."""
    from kafka.structs import TopicPartition

    existing = client.topics()
    if pattern is not None:
        names = sorted(t for t in existing if pattern.fullmatch(t))
    else:
        names = sorted(set(topics) & existing)
    return [
        TopicPartition(topic, partition)
        for topic in names
        for partition in sorted(client.partitions_for_topic(topic) or ())
    ]


def commit_group_offsets(bootstrap_servers: str, group_id: str, offsets: Offsets) -> None:
    """Commit ``offsets`` to the consumer group ``group_id`` without joining it."""
    from kafka.structs import OffsetAndMetadata, TopicPartition

    commits = {
        TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)
        for (topic, partition), offset in from_offsets(offsets).items()
    }
    consumer = new_consumer(bootstrap_servers, group_id=group_id)
    try:
        consumer.commit(commits)
    finally:
        consumer.close()
