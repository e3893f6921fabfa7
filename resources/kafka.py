"""The Kafka resource: bootstrap servers, topic admin, end offsets, consumer-group offsets, lag."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import dagster as dg
from pydantic import Field
from pyspark.sql import DataFrame, SparkSession

from resources.kafka_client import (
    Offsets,
    TopicPartitionKey,
    as_topic_partitions,
    broker_unreachable,
    existing_partitions,
    from_offsets,
    new_consumer,
)

KAFKA_FORMAT = "kafka"  # Spark's own Kafka source (spark-sql-kafka-0-10, pinned in jars.toml)
HEADERS_SQL_TYPE = "array<struct<key: string, value: binary>>"
# The columns of Spark's Kafka source with includeHeaders: bronze's Kafka columns.
KAFKA_COLUMNS = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    f"timestampType int, headers {HEADERS_SQL_TYPE}"
)


class KafkaResource(dg.ConfigurableResource):
    """A Kafka cluster, reached through kafka-python."""

    bootstrap_servers: str = Field(
        default="127.0.0.1:9092",
        description="Comma-separated host:port list (KAFKA_BOOTSTRAP_SERVERS).",
    )
    connect_timeout_ms: int = Field(
        default=15000, description="How long to try reaching the cluster before failing."
    )
    max_records_per_trigger: int = Field(
        # Each micro-batch pays about a second of planning, Delta's commit and checkpoint files:
        # batches of millions keep that small beside the batch's own work.
        default=2_000_000,
        description="Upper bound of records per micro-batch (Spark's maxOffsetsPerTrigger): "
        "bounds a batch's work, and what a run killed in the middle of one does again.",
    )

    fail_on_data_loss: bool = Field(
        default=True,
        description="Fail a stream whose checkpoint lies outside its topic's log (records removed "
        "unread, or the topic recreated), as Spark's failOnDataLoss; false resumes from the "
        "earliest available offsets and records what was skipped "
        "(LAKEHOUSE_KAFKA_FAIL_ON_DATA_LOSS).",
    )

    def read_stream(
        self,
        spark: SparkSession,
        topics: Iterable[str] = (),
        starting: str = "earliest",
        pattern: str | None = None,
    ) -> DataFrame:
        """A streaming DataFrame of the records of ``topics``, or of every topic whose whole name
        matches the regular expression ``pattern``: Spark's own Kafka source, its columns
        (``KAFKA_COLUMNS``) with the headers. Spark commits no consumer-group offsets: see
        ``commit_offsets``.

        Named topics are subscribed to as a pattern too: a topic that does not exist yet is then
        not read (its records will be, once it exists) rather than created by the source's
        consumer while its offsets are asked for, which fails the query.
        """
        if pattern is None:
            pattern = "|".join(re.escape(topic) for topic in topics)
        return (
            spark.readStream.format(KAFKA_FORMAT)
            .option("subscribePattern", pattern)
            .option("kafka.bootstrap.servers", self.bootstrap_servers)
            .option("startingOffsets", starting)
            .option("maxOffsetsPerTrigger", str(self.max_records_per_trigger))
            .option("failOnDataLoss", str(self.fail_on_data_loss).lower())
            .option("includeHeaders", "true")
            .load()
        )

    def commit_offsets(self, group_id: str, offsets: Offsets) -> None:
        """Commit ``{topic: {partition: next offset}}`` to the consumer group ``group_id``
        without joining it."""
        from kafka.structs import OffsetAndMetadata, TopicPartition

        commits = {
            TopicPartition(topic, partition): OffsetAndMetadata(offset, "", -1)
            for (topic, partition), offset in from_offsets(offsets).items()
        }
        if commits:
            with contextlib.closing(new_consumer(self.bootstrap_servers, group_id=group_id)) as c:
                c.commit(commits)

    @contextlib.contextmanager
    def _consumer(self, **config: Any) -> Iterator[Any]:
        consumer = new_consumer(
            self.bootstrap_servers, bootstrap_timeout_ms=self.connect_timeout_ms, **config
        )
        try:
            yield consumer
        finally:
            consumer.close()

    @contextlib.contextmanager
    def _admin(self) -> Iterator[Any]:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        try:
            config = {
                "bootstrap_servers": self.bootstrap_servers.split(","),
                "bootstrap_timeout_ms": self.connect_timeout_ms,
            }
            admin = KafkaAdminClient(**config)
        except KafkaError as error:
            raise broker_unreachable(self.bootstrap_servers, error) from error
        with contextlib.closing(admin):
            yield admin

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic unless it exists already."""
        from kafka.admin import NewTopic
        from kafka.errors import TopicAlreadyExistsError

        with self._admin() as admin, contextlib.suppress(TopicAlreadyExistsError):
            admin.create_topics([NewTopic(name, partitions, 1)])

    def cluster_id(self) -> str:
        """The id of the Kafka cluster the bootstrap servers belong to."""
        with self._admin() as admin:
            return str(admin.describe_cluster()["cluster_id"])

    def topics(self) -> set[str]:
        """The names of the cluster's topics."""
        with self._consumer() as consumer:
            return set(consumer.topics())

    def matching(self, pattern: str) -> list[str]:
        """The existing topics whose whole name matches the regular expression ``pattern``."""
        return sorted(topic for topic in self.topics() if re.fullmatch(pattern, topic))

    def end_offsets(self, topics: Iterable[str]) -> dict[TopicPartitionKey, int]:
        """The log end offset of every partition of ``topics`` (missing topics are skipped)."""
        with self._consumer() as consumer:
            partitions = existing_partitions(consumer, topics)
            ends = consumer.end_offsets(partitions) if partitions else {}
        return {(tp.topic, tp.partition): offset for tp, offset in ends.items()}

    def start_offsets(self, topics: Iterable[str]) -> dict[TopicPartitionKey, int]:
        """The log start offset of every partition of ``topics`` (missing topics are skipped)."""
        with self._consumer() as consumer:
            starts = consumer.beginning_offsets(existing_partitions(consumer, topics))
        return {(tp.topic, tp.partition): offset for tp, offset in starts.items()}

    def group_offsets(self, group_id: str, topics: Iterable[str]) -> dict[TopicPartitionKey, int]:
        """The offsets ``group_id`` committed for ``topics`` (partitions without one omitted)."""
        with self._consumer(group_id=group_id) as consumer:
            committed = {
                (tp.topic, tp.partition): consumer.committed(tp)
                for tp in existing_partitions(consumer, topics)
            }
        return {tp: offset for tp, offset in committed.items() if offset is not None}

    def timestamps_at(
        self, positions: Mapping[TopicPartitionKey, int], timeout_ms: int = 5_000
    ) -> dict[TopicPartitionKey, int]:
        """The timestamp (ms) of the first record at or after each position; partitions with no
        record there within ``timeout_ms`` are left out."""
        found: dict[TopicPartitionKey, int] = {}
        with self._consumer(max_poll_records=max(len(positions), 1)) as c:
            partitions = as_topic_partitions(positions)
            c.assign(partitions)
            for tp in partitions:
                c.seek(tp, positions[(tp.topic, tp.partition)])
            deadline = time.monotonic() + timeout_ms / 1000
            while len(found) < len(positions) and time.monotonic() < deadline:
                for tp, records in c.poll(timeout_ms=200).items():
                    found.setdefault((tp.topic, tp.partition), records[0].timestamp)
                    c.pause(tp)
        return found

    def lag(
        self, topics: Iterable[str], positions: Mapping[TopicPartitionKey, int]
    ) -> dict[TopicPartitionKey, int]:
        """Records not yet consumed per partition: end offset minus ``positions`` (0 if unseen)."""
        ends = self.end_offsets(topics)
        return {tp: max(end - positions.get(tp, 0), 0) for tp, end in ends.items()}
