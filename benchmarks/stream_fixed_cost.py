"""Benchmark: what one ``availableNow`` streaming query costs before it moves any data.

What it measures
----------------
``--records`` (1,000) small records over 4 partitions, a tiny increment such as a sensor's run
ingests. On one warm Spark Connect server, taking turns ``--rounds`` times, each of these streams
runs from a new checkpoint until it has caught up:

- ``dummy -> noop``: a trivial Python streaming data source (4 partitions of 250 numbers, no I/O)
  into Spark's no-op sink: Spark's own cost of a Python source;
- ``dummy -> foreachBatch``: the same into a ``foreachBatch`` function that does nothing: adds the
  cost of the sink's Python process, which Spark Connect starts for every query;
- ``kafka -> noop`` and ``kafka -> foreachBatch``: the same with the project's Kafka source
  (``lakehouse_kafka``) reading the records from the embedded broker;
- ``kafka -> bronze``: the bronze stream itself (``run_available_now`` into a new Delta table).

For each it prints the medians of: ``start()`` returning, the first trigger beginning (both from
the call to ``start()``), the first trigger's duration, and the whole query. Beside them, the
Kafka source's own work for the same increment (its offsets, the read of the four partitions and
the consumer-group commit) done in this process without Spark: what of the query's cost is Kafka.

Usage::

    .venv/bin/python benchmarks/stream_fixed_cost.py [--records 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import pyarrow as pa  # noqa: E402
from cdc_scd1 import PARTITIONS, TOPIC, produce  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition  # noqa: E402
from pyspark.sql.streaming.datasource import ReadLimit  # noqa: E402

from lakehouse_assets.bronze.transforms import stamped_kafka_batch  # noqa: E402
from lakehouse_assets.devtools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_assets.devtools.spark_server import SparkConnectServer  # noqa: E402
from resources import KafkaResource, SparkResource  # noqa: E402
from resources.streaming import DeltaBatchSink, run_available_now  # noqa: E402

DUMMY_ROWS = 250  # per partition, 4 partitions


class _Range(InputPartition):
    pass


class _DummyReader(DataSourceStreamReader):
    def initialOffset(self) -> dict[str, int]:
        return {"rows": 0}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {"rows": PARTITIONS * DUMMY_ROWS}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [_Range(i) for i in range(PARTITIONS)] if end["rows"] > start["rows"] else []

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({"x": list(range(DUMMY_ROWS))})

    def commit(self, end: dict) -> None:
        pass


class DummySource(DataSource):
    """``bench_dummy``: numbers, no I/O."""

    @classmethod
    def name(cls) -> str:
        return "bench_dummy"

    def schema(self) -> str:
        return "x long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _DummyReader()


def do_nothing(batch: DataFrame, batch_id: int) -> None:
    from resources.streaming import _keep_batch_frames_on_the_server

    _keep_batch_frames_on_the_server()  # else the client's release can hang the worker


def timestamp(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


def run_query(stream: DataFrame, checkpoint: Path, sink: str) -> dict[str, float]:
    """Run ``stream`` into ``sink`` (``noop`` or ``foreachBatch``); its phases in seconds."""
    writer = stream.writeStream.option("checkpointLocation", str(checkpoint))
    writer = writer.format("noop") if sink == "noop" else writer.foreachBatch(do_nothing)
    began = time.time()
    query = writer.trigger(availableNow=True).start()
    started = time.time()
    query.awaitTermination()
    ended = time.time()
    first = query.recentProgress[0]
    return {"start": started - began, "first trigger at": timestamp(first["timestamp"]) - began,
            "first trigger": first["durationMs"]["triggerExecution"] / 1000,
            "query": ended - began}  # fmt: skip


def run_bronze(kafka: KafkaResource, spark: SparkSession, work: Path, n: int) -> dict[str, float]:
    """The bronze stream into a new Delta table: only the whole is timed."""
    sink = DeltaBatchSink(str(work / f"bronze-{n}"), {}, f"bench-{n}", str(work / f"bronze-c-{n}"),
                          stamped_kafka_batch, ["date"])  # fmt: skip
    began = time.time()
    run_available_now(kafka.read_stream(spark, [TOPIC]), sink)
    return {"query": time.time() - began}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The fixed cost of one streaming query.")
    parser.add_argument("--records", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder, EmbeddedBroker() as broker:
        work = Path(folder)
        kafka = KafkaResource(bootstrap_servers=broker.bootstrap_servers)
        kafka.create_topic(TOPIC, PARTITIONS)
        produce(broker.bootstrap_servers, args.records, max(1, args.records // 10))
        with SparkConnectServer() as server:
            spark = SparkResource(remote=server.url).get_session()
            try:
                spark.dataSource.register(DummySource)
                dummy = spark.readStream.format(DummySource.name()).load()
                sides: dict[str, Callable[[int], dict[str, float]]] = {
                    "dummy -> noop": lambda n: run_query(dummy, work / f"dn-{n}", "noop"),
                    "dummy -> foreachBatch": lambda n: run_query(dummy, work / f"df-{n}", "fb"),
                    "kafka -> noop": lambda n: run_query(
                        kafka.read_stream(spark, [TOPIC]), work / f"kn-{n}", "noop"
                    ),
                    "kafka -> foreachBatch": lambda n: run_query(
                        kafka.read_stream(spark, [TOPIC]), work / f"kf-{n}", "fb"
                    ),
                    "kafka -> bronze": lambda n: run_bronze(kafka, spark, work, n),
                }
                for side in sides.values():
                    side(-1)  # warm-up, not counted
                figures: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
                for round_ in range(args.rounds):
                    for name, side in sides.items():
                        figures[name].append(side(round_))
                report(args, figures)
            finally:
                spark.stop()  # before the server: at exit the session would retry for minutes


def report(args: argparse.Namespace, figures: dict[str, list[dict[str, float]]]) -> None:
    print(f"{args.records:,} records, {args.rounds} rounds, medians in seconds:")
    for name, rounds in figures.items():
        phases = ", ".join(
            f"{phase} {statistics.median(r[phase] for r in rounds):.2f}" for phase in rounds[0]
        )
        print(f"  {name:<24} {phases}")


if __name__ == "__main__":
    main()
