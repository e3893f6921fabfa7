"""Kafka client helpers shared by the Kafka resource, the bronze assets and the sensors:
consumers that never commit or create topics on their own, a topic's partitions, data loss, and
the checkpoint's offsets shape. All use kafka-python.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

# Offsets as Spark keeps them in the checkpoint: {topic: {partition (str): next offset}}.
Offsets = dict[str, dict[str, int]]


TopicPartitionKey = tuple[str, int]


class KafkaSourceError(RuntimeError):
    """Kafka cannot be reached, or a stream cannot go on without losing data."""


class DataLoss(NamedTuple):
    """A partition a stream can no longer read on from: its checkpoint is outside the log."""

    offset: int  # where the stream's checkpoint is
    log_start: int
    log_end: int

    @property
    def problem(self) -> str:
        if self.offset > self.log_end:
            return f"is at offset {self.offset} but the log now ends at {self.log_end}"
        return f"is at offset {self.offset} but the log now starts at {self.log_start}"

    @property
    def records_lost(self) -> int | None:
        """How many records were removed unread; None when unknown (the topic recreated)."""
        return self.log_start - self.offset if self.offset < self.log_start else None


def data_loss(
    positions: Mapping[TopicPartitionKey, int],
    starts: Mapping[TopicPartitionKey, int],
    ends: Mapping[TopicPartitionKey, int],
) -> dict[TopicPartitionKey, DataLoss]:
    """The partitions whose stream ``positions`` lie outside their log: records removed
    (retention) before they were read, or the topic deleted and recreated. A stream that goes on
    resumes each of them at its log start."""
    return {
        tp: DataLoss(offset, starts[tp], ends[tp])
        for tp, offset in positions.items()
        if tp in ends and tp in starts and not starts[tp] <= offset <= ends[tp]
    }


def data_loss_message(lost: Mapping[TopicPartitionKey, DataLoss]) -> str:
    """What was lost, and the option that resumes from the earliest available offsets."""
    partitions = "; ".join(
        f"Kafka partition {t}-{p} {loss.problem}" for (t, p), loss in lost.items()
    )
    return (
        f"{partitions}: records were removed or the topic was recreated, so some data may never "
        "be read. Set the option failOnDataLoss=false (the Kafka resource's fail_on_data_loss, "
        "or LAKEHOUSE_KAFKA_FAIL_ON_DATA_LOSS=false) to resume from the earliest available "
        "offsets, or reset the stream's checkpoint."
    )


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


def as_topic_partitions(keys: Iterable[TopicPartitionKey]) -> list[Any]:
    from kafka.structs import TopicPartition

    return [TopicPartition(topic, partition) for topic, partition in keys]


def existing_partitions(client: Any, topics: Iterable[str]) -> list[Any]:
    """The partitions of the existing topics named in ``topics``."""
    from kafka.structs import TopicPartition

    return [
        TopicPartition(topic, partition)
        for topic in sorted(set(topics) & client.topics())
        for partition in sorted(client.partitions_for_topic(topic) or ())
    ]
