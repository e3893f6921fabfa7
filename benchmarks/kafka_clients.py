"""Benchmark: the Kafka client reading in the Spark source, confluent-kafka against kafka-python.

What it measures
----------------
N heart-rate records (JSON, keyed) are produced to one partition of the embedded broker
(untimed). Then the whole partition is read into Arrow record batches of the bronze Kafka columns,
as one Spark input partition of the source is read on an executor, alternately (A B A B ...):

* **confluent-kafka** (librdkafka): the source's own ``read_range``
  (``resources/kafka_records.py``);
* **kafka-python**: a consumer assigned to the partition, ``poll`` in batches of 20,000, the same
  Arrow columns built from its records (what the source did before it read with librdkafka).

It prints each read's records/s and the median ratio.

Usage::

    .venv/bin/python benchmarks/kafka_clients.py [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a plain script from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from lakehouse_assets.devtools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_assets.sample_data import Message, produce  # noqa: E402
from resources import KafkaResource  # noqa: E402
from resources.kafka_client import new_consumer  # noqa: E402
from resources.kafka_records import ARROW_SCHEMA, HEADERS_TYPE, KafkaRange, read_range  # noqa: E402

TOPIC = "bench"


def kafka_python_range(servers: str, kafka_range: KafkaRange) -> Iterator[pa.RecordBatch]:
    """``read_range`` with kafka-python: the same record batches."""
    from kafka.structs import TopicPartition

    tp = TopicPartition(kafka_range.topic, kafka_range.partition)
    consumer = new_consumer(
        servers, max_partition_fetch_bytes=8 * 1024 * 1024, fetch_max_bytes=64 * 1024 * 1024
    )
    consumer.assign([tp])
    consumer.seek(tp, kafka_range.start)
    try:
        while consumer.position(tp) < kafka_range.end:
            records = [
                r
                for r in consumer.poll(timeout_ms=1000, max_records=20000).get(tp, [])
                if r.offset < kafka_range.end
            ]
            if not records:
                continue
            count = len(records)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array([r.key for r in records], pa.binary()),
                    pa.array([r.value for r in records], pa.binary()),
                    pa.array([kafka_range.topic] * count, pa.string()),
                    pa.array([kafka_range.partition] * count, pa.int32()),
                    pa.array([r.offset for r in records], pa.int64()),
                    pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(
                        pa.timestamp("us", tz="UTC")
                    ),
                    pa.array([r.timestamp_type for r in records], pa.int32()),
                    pa.array(
                        [[{"key": k, "value": v} for k, v in r.headers or ()] for r in records],
                        HEADERS_TYPE,
                    ),
                ],
                schema=ARROW_SCHEMA,
            )
    finally:
        consumer.close()


def timed(read: Callable[[], Iterator[pa.RecordBatch]], expected: int) -> float:
    """Records per second of one full read; fails unless it read ``expected`` records."""
    started = time.perf_counter()
    rows = sum(batch.num_rows for batch in read())
    seconds = time.perf_counter() - started
    if rows != expected:
        raise SystemExit(f"read {rows} records, expected {expected}")
    return rows / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with EmbeddedBroker() as broker:
        servers = broker.bootstrap_servers
        KafkaResource(bootstrap_servers=servers).create_topic(TOPIC, partitions=1)
        values = (
            json.dumps({"device_id": n % 97, "time": 1_700_000_000 + n, "heartrate": 70.5})
            for n in range(args.records)
        )
        produce(servers, [Message(TOPIC, str(n % 97), v) for n, v in enumerate(values)])
        kafka_range = KafkaRange(TOPIC, 0, 0, args.records)
        ratios = []
        for round_ in range(1, args.rounds + 1):
            python = timed(lambda: kafka_python_range(servers, kafka_range), args.records)
            librdkafka = timed(lambda: read_range(servers, kafka_range, 120_000), args.records)
            ratios.append(librdkafka / python)
            print(
                f"round {round_}: kafka-python {python:,.0f} records/s, confluent-kafka "
                f"{librdkafka:,.0f} records/s ({ratios[-1]:.2f}x)",
                flush=True,
            )
        print(f"median ratio confluent-kafka / kafka-python: {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
