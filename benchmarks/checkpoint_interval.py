"""Benchmark: Delta's checkpoint interval, small streaming writes against a cold reader.

What it measures
----------------
Delta writes a checkpoint inline every ``delta.checkpointInterval`` commits (10 by default): the
commit that reaches it rebuilds the table's whole state and writes it as Parquet. A larger
interval spares small frequent writers that spike; a reader that opens the table cold replays
more JSON commits after the last checkpoint.

On one Spark Connect server, started as ``make run`` starts it, and an embedded broker, one
bronze table per interval (``--intervals``, 10, 50 and 100) is written by the bronze stream
(``kafka_to_bronze`` through ``run_available_now``, partitioned by date, as a bronze step does):
each table is created with its interval by Delta's session default
(``spark.databricks.delta.properties.defaults.checkpointInterval``, set for its first batch
only), then ``--batches`` rounds (200) each produce ``--records`` (20) records and run every
table's stream once, one ``availableNow`` micro-batch each, the tables' order turning every round
so that drift falls on all. The first ``--warm-ups`` rounds (5) are not counted.

- The write side, per interval: each batch's wall time (mean, median, p90, max; the whole
  ``run_available_now``, the log reads by delta-rs before and after included), the CPU seconds
  of the server's processes and of this one per batch, and the mean wall time of the batches
  whose commit wrote a checkpoint against the others.
- The read side, on each table as the writes left it (200 commits: versions 0-199, the most JSON
  commits after a checkpoint each of 10, 50 and 100 leaves): the JSON commits after the last
  checkpoint; delta-rs opening the table and reading its version (``DeltaTable(path)`` and
  ``version()``, as the sensors and ``resources/delta_log.py`` do); and a new Spark Connect
  session's first read, a count, of a copy of the table made just before (a path Delta has not
  cached: the server replays its checkpoint and JSON commits as a new application does); and the
  warm session's count of a version it has not read (2, 3... before the latest, ``versionAsOf``):
  the state a reader of a new version rebuilds, as a MERGE does before it writes. Each
  ``--reads`` times (5) in turn, the median.

Every figure is printed beside the first interval's, with the ratio to it.

Usage::

    .venv/bin/python benchmarks/checkpoint_interval.py [--intervals 10 50 100] [--batches 200]
        [--records 20] [--warm-ups 5] [--reads 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
from benchmarks.lake_schemas import own_metastore  # noqa: E402

own_metastore()  # before any Spark starts: the benchmark's catalog is its own

from deltalake import DeltaTable  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402

from benchmarks.spark_settings import tree_cpu_s  # noqa: E402
from lakehouse_assets.bronze.transforms import kafka_to_bronze  # noqa: E402
from lakehouse_assets.constants import KAFKA_BRONZE_PARTITION  # noqa: E402
from lakehouse_tools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_tools.spark_server import SparkConnectServer  # noqa: E402
from resources import KafkaResource, SparkResource  # noqa: E402
from resources.streaming import run_available_now  # noqa: E402

TOPIC = "readings"
PARTITIONS = 4
DEFAULT_INTERVAL = "spark.databricks.delta.properties.defaults.checkpointInterval"
INTERVAL_PROPERTY = "delta.checkpointInterval"


@dataclass
class Table:
    """One bronze table of one checkpoint interval, and what its batches cost."""

    interval: int
    folder: Path
    walls: list[float] = field(default_factory=list)
    server_cpu: list[float] = field(default_factory=list)
    client_cpu: list[float] = field(default_factory=list)
    checkpointed: list[bool] = field(default_factory=list)  # the batch's commit wrote one
    commits: int = 0

    @property
    def uri(self) -> str:
        return str(self.folder / "table")

    @property
    def checkpoint(self) -> str:
        return str(self.folder / "checkpoint")


def produce(bootstrap: str, records: int, first: int) -> None:
    """``records`` small JSON readings, numbered from ``first``, over the topic's partitions."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for number in range(first, first + records):
        value = json.dumps({"device_id": number % 50, "heartrate": 60 + number % 40})
        producer.produce(TOPIC, key=str(number % 50), value=value, partition=number % PARTITIONS)
    if producer.flush(30):
        raise RuntimeError("Not every record was produced")


def write_batch(spark: SparkSession, kafka: KafkaResource, table: Table, server_pid: int) -> None:
    """One ``availableNow`` run of the table's bronze stream; its costs are recorded."""
    first = table.commits == 0
    if first:  # the table is created with its interval, as a new table gets the product's
        spark.conf.set(DEFAULT_INTERVAL, str(table.interval))
    began, server, own = time.perf_counter(), tree_cpu_s(server_pid), time.process_time()
    stream = kafka_to_bronze(kafka.read_stream(spark, [TOPIC]))
    name = f"interval-{table.interval}"
    run = run_available_now(stream, table.uri, table.checkpoint, name, [KAFKA_BRONZE_PARTITION])
    table.walls.append(time.perf_counter() - began)
    table.server_cpu.append(tree_cpu_s(server_pid) - server)
    table.client_cpu.append(time.process_time() - own)
    if first:
        spark.conf.unset(DEFAULT_INTERVAL)
    if len(run.batches_committed) != 1:
        raise RuntimeError(f"interval {table.interval}: {run.batches_committed} committed, not 1")
    version = table.commits
    table.checkpointed.append(version > 0 and version % table.interval == 0)
    table.commits += 1


def check_property(table: Table) -> None:
    """The table carries its interval as a property, as Delta's session default gave it."""
    configuration = DeltaTable(table.uri).metadata().configuration
    if configuration.get(INTERVAL_PROPERTY) != str(table.interval):
        raise RuntimeError(f"{table.uri}: {INTERVAL_PROPERTY} is {configuration}")


def json_after_checkpoint(table: Table) -> int:
    """The JSON commits a cold reader replays after the table's last checkpoint."""
    log = Path(table.uri) / "_delta_log"
    last = log / "_last_checkpoint"
    checkpoint = json.loads(last.read_text())["version"] if last.exists() else -1
    return sum(1 for path in log.glob("*.json") if int(path.stem) > checkpoint)


def delta_rs_open(table: Table, _: int) -> float:
    began = time.perf_counter()
    DeltaTable(table.uri).version()
    return time.perf_counter() - began


def spark_cold_count(url: str, expected: int) -> Callable[[Table, int], float]:
    """A reader of a new copy of the table in a new Connect session: the first count's time."""

    def read(table: Table, turn: int) -> float:
        copy = table.folder / f"copy-{turn}"
        shutil.copytree(table.uri, copy)
        session = SparkSession.builder.remote(url).create()
        try:
            began = time.perf_counter()
            rows = session.read.format("delta").load(str(copy)).count()
            elapsed = time.perf_counter() - began
        finally:
            session.stop()
        if rows != expected:
            raise RuntimeError(f"{copy}: {rows} rows, not {expected}")
        return elapsed

    return read


def spark_version_count(spark: SparkSession, records: int) -> Callable[[Table, int], float]:
    """A count of a version the server has not read (the turn's: 2, 3... before the latest), by
    the warm session that wrote it: the state rebuilt from the checkpoint before it."""

    def read(table: Table, turn: int) -> float:
        version = table.commits - 2 - turn
        began = time.perf_counter()
        rows = spark.read.format("delta").option("versionAsOf", version).load(table.uri).count()
        elapsed = time.perf_counter() - began
        if rows != (version + 1) * records:
            raise RuntimeError(f"{table.uri}@{version}: {rows} rows")
        return elapsed

    return read


def in_turns(tables: list[Table], turns: int, measure: Callable[[Table, int], float]) -> list:
    """``measure`` of each table ``turns`` times, the order turning; the medians by table."""
    times: dict[int, list[float]] = {table.interval: [] for table in tables}
    for turn in range(turns):
        for table in tables[turn % len(tables) :] + tables[: turn % len(tables)]:
            times[table.interval].append(measure(table, turn))
    return [statistics.median(times[table.interval]) for table in tables]


def p90(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def row(name: str, values: Sequence[float], digits: int = 3) -> None:
    """One figure of every interval, each after the first with its ratio to the first."""
    cells = [f"{values[0]:.{digits}f}".rjust(18)]
    for value in values[1:]:
        ratio = f"({value / values[0]:.2f}x)" if values[0] else ""
        cells.append(f"{value:.{digits}f} {ratio}".rjust(18))
    print(f"  {name:40}{''.join(cells)}")


def report(args: argparse.Namespace, tables: Sequence[Table], reads: dict[str, list]) -> None:
    def counted(values: list) -> list:  # the batches after the warm-ups
        return values[args.warm_ups :]

    walls = [counted(t.walls) for t in tables]
    batches = [counted(list(zip(t.walls, t.checkpointed, strict=True))) for t in tables]
    spikes = [[wall for wall, wrote in pairs if wrote] for pairs in batches]
    plain = [[wall for wall, wrote in pairs if not wrote] for pairs in batches]
    print(
        f"\n{args.batches} batches of {args.records} records per table, the first "
        f"{args.warm_ups} not counted; seconds"
    )
    print(f"  {'checkpoint interval':40}" + "".join(f"{t.interval:>18}" for t in tables))
    row("batch wall, mean", [statistics.mean(w) for w in walls])
    row("batch wall, median", [statistics.median(w) for w in walls])
    row("batch wall, p90", [p90(w) for w in walls])
    row("batch wall, max", [max(w) for w in walls])
    row("batches writing a checkpoint", [len(s) for s in spikes], 0)
    row("  their wall, mean", [statistics.mean(s) if s else 0.0 for s in spikes])
    row("  the others' wall, mean", [statistics.mean(p) for p in plain])
    row("server CPU per batch, mean", [statistics.mean(counted(t.server_cpu)) for t in tables])
    row("server CPU, total", [sum(counted(t.server_cpu)) for t in tables], 1)
    row("client CPU per batch, mean", [statistics.mean(counted(t.client_cpu)) for t in tables])
    print(
        f"\ncold readers of each table after its {args.batches} commits, medians of "
        f"{args.reads}; seconds"
    )
    row("JSON commits after the last checkpoint", reads["json"], 0)
    row("delta-rs DeltaTable(path).version()", reads["delta-rs"])
    row("new Spark session, first count", reads["spark"])
    row("warm session, count of an unread version", reads["version"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--intervals", type=int, nargs="+", default=[10, 50, 100])
    parser.add_argument("--batches", type=int, default=200, help="commits per table")
    parser.add_argument("--records", type=int, default=20, help="records per batch")
    parser.add_argument("--warm-ups", type=int, default=5, help="first batches not counted")
    parser.add_argument("--reads", type=int, default=5, help="cold reads of each table")
    args = parser.parse_args(argv)
    if args.batches <= args.warm_ups + 1:
        parser.error("--batches must exceed --warm-ups by 2 at least")
    with (
        tempfile.TemporaryDirectory(prefix="checkpoint-interval-") as folder,
        EmbeddedBroker() as broker,
        SparkConnectServer() as server,  # as `make run` starts it
    ):
        assert server.pid is not None
        kafka = KafkaResource(bootstrap_servers=broker.bootstrap_servers)
        kafka.create_topic(TOPIC, PARTITIONS)
        tables = [Table(n, Path(folder) / f"interval-{n}") for n in args.intervals]
        spark = SparkResource(remote=server.url).get_session()
        try:
            started = time.perf_counter()
            for batch in range(args.batches):
                produce(broker.bootstrap_servers, args.records, batch * args.records)
                turn = batch % len(tables)
                for table in tables[turn:] + tables[:turn]:
                    write_batch(spark, kafka, table, server.pid)
                if batch % 20 == 19:
                    print(f"{batch + 1} batches, {time.perf_counter() - started:.0f} s", flush=True)
            for table in tables:
                check_property(table)
            rows = args.batches * args.records
            reads = {
                "json": [float(json_after_checkpoint(table)) for table in tables],
                "delta-rs": in_turns(tables, args.reads, delta_rs_open),
                "spark": in_turns(tables, args.reads, spark_cold_count(server.url, rows)),
                "version": in_turns(tables, args.reads, spark_version_count(spark, args.records)),
            }
        finally:
            spark.stop()  # before the server: at exit the session would retry for minutes
        report(args, tables, reads)


if __name__ == "__main__":
    main()
