"""Benchmark: what one ``availableNow`` streaming query costs before it moves any data.

What it measures
----------------
``--records`` (1,000) small records over 4 partitions, a tiny increment such as a sensor's run
ingests. On one warm Spark Connect server, taking turns ``--rounds`` times, each of these streams
runs from a new checkpoint until it has caught up:

- ``kafka -> noop``: Spark's Kafka source reading the records from the embedded broker into
  Spark's no-op sink: the cost of the source and of a streaming query;
- ``kafka -> delta``: the same into Delta's streaming sink, a new table: adds the Delta commit;
- ``kafka -> bronze``: the bronze stream itself (``run_available_now`` of ``kafka_to_bronze``,
  partitioned by date, with the table's log read before and after).

For each it prints the medians of: ``start()`` returning, the first trigger beginning (both from
the call to ``start()``), the first trigger's duration, and the whole query.

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
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from cdc_scd1 import PARTITIONS, TOPIC, produce  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from benchmarks.lake_schemas import own_metastore  # noqa: E402
from lakehouse_assets.bronze.transforms import kafka_to_bronze  # noqa: E402
from lakehouse_tools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_tools.spark_server import SparkConnectServer  # noqa: E402
from resources import KafkaResource, SparkResource  # noqa: E402
from resources.streaming import run_available_now  # noqa: E402

own_metastore()  # before any Spark starts: the benchmark's catalog is its own


def timestamp(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC).timestamp()


def run_query(stream: DataFrame, checkpoint: Path, sink: str) -> dict[str, float]:
    """Run ``stream`` into ``sink`` (``noop`` or ``delta``); its phases in seconds."""
    writer = stream.writeStream.option("checkpointLocation", str(checkpoint)).format(sink)
    began = time.time()
    query = writer.trigger(availableNow=True).start(None if sink == "noop" else f"{checkpoint}-t")
    started = time.time()
    query.awaitTermination()
    ended = time.time()
    first = query.recentProgress[0]
    return {"start": started - began, "first trigger at": timestamp(first["timestamp"]) - began,
            "first trigger": first["durationMs"]["triggerExecution"] / 1000,
            "query": ended - began}  # fmt: skip


def run_bronze(kafka: KafkaResource, spark: SparkSession, work: Path, n: int) -> dict[str, float]:
    """The bronze stream into a new Delta table: only the whole is timed."""
    began = time.time()
    stream = kafka_to_bronze(kafka.read_stream(spark, [TOPIC]))
    run_available_now(stream, str(work / f"bronze-{n}"), str(work / f"bronze-c-{n}"), "bench",
                      ["date"])  # fmt: skip
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
                sides: dict[str, Callable[[int], dict[str, float]]] = {
                    "kafka -> noop": lambda n: run_query(
                        kafka.read_stream(spark, [TOPIC]), work / f"kn-{n}", "noop"
                    ),
                    "kafka -> delta": lambda n: run_query(
                        kafka.read_stream(spark, [TOPIC]), work / f"kd-{n}", "delta"
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
