"""A Spark Python streaming data source reading Kafka topics.

Registered as ``lakehouse_kafka`` (Spark's own ``kafka`` format needs a jar these machines cannot
download). Offsets are ``{topic: {partition: next_offset}}`` dicts kept in the Spark checkpoint;
each micro-batch reads one Spark input partition per Kafka partition and offset range. Planning
(partitions, log ends, group commits) uses kafka-python, the project's one client for admin and
lag; the executors read the records with confluent-kafka (``resources.kafka_records``).

Options:
    kafka.bootstrap.servers: ``host:port[,host:port]`` (required).
    subscribe: comma-separated topics, or subscribePattern: a regular expression over topic names.
    startingOffsets: ``earliest`` (default), ``latest`` or JSON ``{"topic": {"0": 42}}``.
    maxRecordsPerTrigger: upper bound of records per micro-batch (default: no bound).
    groupId: consumer group that receives the processed offsets after each batch.
    failOnDataLoss: ``true`` (default) fails when records were removed before they were read.
    readTimeoutMs: how long a read may go without a record before it fails (default 120000).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from resources.kafka_client import (
    KafkaSourceError,
    Offsets,
    TopicPartitionKey,
    as_topic_partitions,
    commit_group_offsets,
    data_loss,
    data_loss_message,
    existing_partitions,
    from_offsets,
    log_end_offsets,
    new_consumer,
    to_offsets,
)
from resources.kafka_records import KAFKA_SOURCE_SCHEMA, KafkaRange, read_range

KAFKA_SOURCE_FORMAT = "lakehouse_kafka"


def limit_positions(
    start: Mapping[TopicPartitionKey, int], end: Mapping[TopicPartitionKey, int], max_records: int
) -> dict[TopicPartitionKey, int]:
    """Move from ``start`` towards ``end`` by at most ``max_records``, shared by backlog size."""
    backlog = {tp: end[tp] - start.get(tp, end[tp]) for tp in end}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(end)
    limited = {tp: start.get(tp, end[tp]) + backlog[tp] * max_records // total for tp in end}
    if limited == {tp: start.get(tp, end[tp]) for tp in end}:
        largest = max(backlog, key=lambda tp: backlog[tp])
        limited[largest] += 1  # always make progress, even when max_records < partitions
    return limited


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans and reads micro-batches of Kafka records."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.bootstrap_servers = options.get("kafka.bootstrap.servers") or ""
        if not self.bootstrap_servers:
            raise KafkaSourceError("Option 'kafka.bootstrap.servers' is required.")
        self.topics = [t.strip() for t in options.get("subscribe", "").split(",") if t.strip()]
        pattern = options.get("subscribePattern")
        self.pattern = re.compile(pattern) if pattern else None
        if bool(self.topics) == bool(self.pattern):
            raise KafkaSourceError(
                "Set exactly one of the options 'subscribe', 'subscribePattern'."
            )
        self.starting_offsets = options.get("startingOffsets", "earliest")
        max_records = options.get("maxRecordsPerTrigger")
        self.max_records = int(max_records) if max_records else None
        self.group_id = options.get("groupId")
        self.fail_on_data_loss = options.get("failOnDataLoss", "true").lower() != "false"
        self.read_timeout_ms = int(options.get("readTimeoutMs", "120000"))
        self._target: dict[TopicPartitionKey, int] | None = None
        self._metadata_client: Any = None

    # ----- planning, on the driver -------------------------------------------------------------
    def _client(self) -> Any:
        if self._metadata_client is None:
            self._metadata_client = new_consumer(self.bootstrap_servers)
        return self._metadata_client

    def _subscribed_partitions(self) -> list[Any]:
        return existing_partitions(self._client(), self.topics, self.pattern)

    def _log_ends(self, partitions: Sequence[Any]) -> dict[TopicPartitionKey, int]:
        return log_end_offsets(self._client(), partitions)

    def _log_starts(self, partitions: Sequence[Any]) -> dict[TopicPartitionKey, int]:
        if not partitions:
            return {}
        starts = self._client().beginning_offsets(list(partitions))
        return {(tp.topic, tp.partition): offset for tp, offset in starts.items()}

    def initialOffset(self) -> Offsets:
        partitions = self._subscribed_partitions()
        if self.starting_offsets == "earliest":
            return to_offsets(self._log_starts(partitions))
        if self.starting_offsets == "latest":
            return to_offsets(self._log_ends(partitions))
        try:
            explicit = from_offsets(json.loads(self.starting_offsets))
        except (ValueError, AttributeError, TypeError) as error:
            raise KafkaSourceError(
                "Option 'startingOffsets' must be 'earliest', 'latest' or JSON like "
                f'{{"topic": {{"0": 42}}}}, got {self.starting_offsets!r}'
            ) from error
        starts = self._log_starts(partitions)
        ends = self._log_ends(partitions)
        resolved = {tp: {-2: starts[tp], -1: ends[tp]}.get(o, o) for tp, o in explicit.items()}
        return to_offsets({**starts, **resolved})

    def _current_ends(self) -> dict[TopicPartitionKey, int]:
        return self._log_ends(self._subscribed_partitions())

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._current_ends()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        positions = from_offsets(start)
        ends = self._target if self._target is not None else self._current_ends()
        starts = self._log_starts(as_topic_partitions(ends))
        for tp in ends:  # a partition new since ``start`` begins at its log start
            positions.setdefault(tp, starts[tp])
        self._check_data_loss(positions, ends, starts)
        end = {tp: max(ends.get(tp, offset), offset) for tp, offset in positions.items()}
        if isinstance(limit, ReadMaxRows):
            end = limit_positions(positions, end, limit.max_rows)
        return to_offsets(end)

    def _check_data_loss(
        self,
        positions: dict[TopicPartitionKey, int],
        ends: Mapping[TopicPartitionKey, int],
        starts: Mapping[TopicPartitionKey, int],
    ) -> None:
        """Fail (or with failOnDataLoss=false resume at the log start) when the log lost unread
        records."""
        lost = data_loss(positions, starts, ends)
        if lost and self.fail_on_data_loss:
            raise KafkaSourceError(data_loss_message(lost))
        for tp in lost:
            positions[tp] = starts[tp]

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records else ReadAllAvailable()

    def reportLatestOffset(self) -> Offsets | None:
        # Progress reporting only: with availableNow the target is known, skip a broker round trip.
        return to_offsets(self._target if self._target is not None else self._current_ends())

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        begin = from_offsets(start)
        stops = from_offsets(end)
        # A partition that appeared after ``start`` was taken is read from its log start.
        begin.update(self._log_starts(as_topic_partitions(tp for tp in stops if tp not in begin)))
        if not self.fail_on_data_loss:  # a start outside the log resumes at the log start
            starts = self._log_starts(as_topic_partitions(stops))
            begin.update({tp: starts[tp] for tp in data_loss(begin, starts, stops)})
        return [
            KafkaRange(topic, partition, begin[(topic, partition)], stop)
            for (topic, partition), stop in sorted(stops.items())
            if stop > begin[(topic, partition)]
        ]

    def commit(self, end: Offsets) -> None:
        """Record the processed offsets in the consumer group, for standard lag tools."""
        if self.group_id and end:
            commit_group_offsets(self.bootstrap_servers, self.group_id, end)

    def stop(self) -> None:
        if self._metadata_client is not None:
            self._metadata_client.close()
            self._metadata_client = None

    # ----- reading, on the executors ----------------------------------------------------------
    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, KafkaRange)
        yield from read_range(self.bootstrap_servers, partition, self.read_timeout_ms)


class KafkaDataSource(DataSource):
    """``spark.readStream.format("lakehouse_kafka")``: Kafka topics as a stream."""

    @classmethod
    def name(cls) -> str:
        return KAFKA_SOURCE_FORMAT

    def schema(self) -> str:
        return KAFKA_SOURCE_SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return KafkaStreamReader(self.options)
