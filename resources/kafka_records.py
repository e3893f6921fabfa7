"""The Kafka record as the lakehouse's Kafka source delivers it: its Spark and Arrow schemas, and
the reading of one offset range into Arrow record batches, on Spark's executors.

The executors read with confluent-kafka (librdkafka): reading is the source's hot path, and
librdkafka is 2.5x as fast as kafka-python into these batches (``benchmarks/kafka_clients.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from resources.kafka_client import KafkaSourceError

# The columns of Spark's own Kafka source (with includeHeaders): the record as delivered, its key
# and value as bytes (decoding belongs to the layers that know the format).
HEADERS_SQL_TYPE = "array<struct<key: string, value: binary>>"
KAFKA_SOURCE_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    f"timestampType int, headers {HEADERS_SQL_TYPE}"
)
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),  # 0: the producer's create time, 1: the log append time
        ("headers", HEADERS_TYPE),
    ]
)


class KafkaRange(InputPartition):
    """One Spark input partition: the records ``[start, end)`` of one Kafka partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end


def read_range(
    bootstrap_servers: str, kafka_range: KafkaRange, read_timeout_ms: int
) -> Iterator[pa.RecordBatch]:
    """Read the records of one offset range as Arrow record batches, with librdkafka (reading
    is the source's hot path: see ``benchmarks/kafka_clients.py``)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "lakehouse-source-reader",  # required by librdkafka; nothing is committed
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",  # records removed under the reader: fail, never skip
            "fetch.max.bytes": 64 * 1024 * 1024,
            "max.partition.fetch.bytes": 8 * 1024 * 1024,
        }
    )
    tp = TopicPartition(kafka_range.topic, kafka_range.partition, kafka_range.start)
    try:
        consumer.assign([tp])
        position = kafka_range.start
        last_progress = time.monotonic()
        # Stop on the consumer's position, not on a record: offsets may have gaps (compaction,
        # transaction markers), but the position always reaches the end of the range.
        while position < kafka_range.end:
            # No more than the range still holds: consume returns as soon as they have come.
            wanted = min(20000, kafka_range.end - position)
            messages = consumer.consume(num_messages=wanted, timeout=1.0)
            records = []
            for message in messages:
                error = message.error()
                if error is not None and error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaSourceError(
                        f"Reading Kafka partition {kafka_range.topic}-{kafka_range.partition} "
                        f"from '{bootstrap_servers}' failed: {error.str()}"
                    )
                if error is None and (message.offset() or 0) < kafka_range.end:
                    records.append(message)
            if records:
                last_progress = time.monotonic()
                yield _record_batch(kafka_range, records)
            position = consumer.position([tp])[0].offset
            if position < 0:  # no position yet (nothing fetched)
                position = kafka_range.start
            if not records and time.monotonic() - last_progress > read_timeout_ms / 1000:
                raise KafkaSourceError(
                    f"No records from Kafka partition {kafka_range.topic}-"
                    f"{kafka_range.partition} at offset {position} for {read_timeout_ms} ms "
                    f"while reading up to {kafka_range.end} from '{bootstrap_servers}'."
                )
    finally:
        consumer.close()


NO_TIMESTAMP = 0  # librdkafka's timestamp types: 0 none, 1 create time, 2 log append time


def _record_batch(kafka_range: KafkaRange, records: list[Any]) -> pa.RecordBatch:
    """The records as delivered: key, value and header values byte for byte."""
    count = len(records)
    stamps = [record.timestamp() for record in records]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r.key() for r in records], pa.binary()),
            pa.array([r.value() for r in records], pa.binary()),
            pa.array([kafka_range.topic] * count, pa.string()),
            pa.array([kafka_range.partition] * count, pa.int32()),
            pa.array([r.offset() for r in records], pa.int64()),
            pa.array(
                [None if kind == NO_TIMESTAMP else ms * 1000 for kind, ms in stamps], pa.int64()
            ).cast(pa.timestamp("us", tz="UTC")),
            # As Kafka's own ids: -1 none, 0 create time, 1 log append time.
            pa.array([kind - 1 for kind, _ in stamps], pa.int32()),
            _headers([r.headers() for r in records]),
        ],
        schema=ARROW_SCHEMA,
    )


def _headers(headers: list[list[tuple[str, bytes | None]] | None]) -> pa.Array:
    """The records' headers: lists of (key, value); built from offsets when none has any (the
    common case, and a tenth of a read's time if built record by record)."""
    if not any(headers):
        offsets = pa.array([0] * (len(headers) + 1), pa.int32())
        return pa.ListArray.from_arrays(offsets, pa.array([], HEADERS_TYPE.value_type))
    return pa.array(
        [[{"key": k, "value": v} for k, v in pairs or ()] for pairs in headers], HEADERS_TYPE
    )
