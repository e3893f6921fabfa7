"""Benchmark: what one Spark Connect call costs on a warm server, by kind, with no project code.

What it measures
----------------
On one Spark Connect server with Delta (the server ``graph_calls.py`` uses), after a warm-up
round, each of these calls ``--rounds`` times in turn, on tables of ``--rows`` rows:

- ``settings``: one ``spark.conf.set``;
- ``schema``: ``df.schema`` of a Delta table read (an analysis);
- ``trivial query``: ``spark.range(1).collect()``;
- ``read count``: the row count of a Delta table;
- ``append``: 10 rows appended to a Delta table;
- ``merge``: 10 rows (5 matched, 5 new) merged by key into a Delta table (``DataFrame.mergeInto``).

For each it prints the median wall seconds and the server's CPU seconds per call (its
processes' user + system). A step's calls cost at least these; the sample graph makes about 66
executes, 42 analyses and 36 settings calls (``graph_calls.py``), so these floors times those
counts, over the machine's cores, is what the graph costs in this design before any data.

Usage::

    .venv/bin/python benchmarks/call_floor.py [--rounds 7] [--rows 1000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks.lake_schemas import own_metastore  # noqa: E402
from benchmarks.spark_settings import tree_cpu_s  # noqa: E402
from lakehouse_tools.spark_server import SparkConnectServer  # noqa: E402

own_metastore()  # before any Spark starts: the benchmark's catalog is its own


def main() -> None:
    parser = argparse.ArgumentParser(description="What one Spark Connect call costs, by kind.")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()

    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F

    server = SparkConnectServer()  # as `make run` starts it
    with server, tempfile.TemporaryDirectory(prefix="call-floor-") as root:
        assert server.pid is not None
        spark = SparkSession.builder.remote(server.url).create()
        table = f"{root}/table"
        rows = spark.range(args.rows).select(F.col("id"), (F.col("id") * 2).alias("value"))
        rows.write.format("delta").save(table)
        spark.read.format("delta").load(table).createOrReplaceTempView("target")
        offset = [0]  # how far the next batch's ids are moved on

        def batch() -> DataFrame:
            start = offset[0]
            offset[0] += 5
            ids = spark.range(args.rows - 5 + start, args.rows + 5 + start)
            return ids.select(F.col("id"), (F.col("id") * 3).alias("value"))

        def append() -> None:
            batch().write.format("delta").mode("append").save(table)

        def merge() -> None:
            source = batch().alias("s")
            writer = source.mergeInto("target", F.col("target.id") == F.col("s.id"))
            writer.whenMatched().updateAll().whenNotMatched().insertAll().merge()

        calls: dict[str, Callable[[], object]] = {
            "settings": lambda: spark.conf.set("spark.sql.shuffle.partitions", "8"),
            "schema": lambda: spark.read.format("delta").load(table).schema,
            "trivial query": lambda: spark.range(1).collect(),
            "read count": lambda: spark.read.format("delta").load(table).count(),
            "append": append,
            "merge": merge,
        }
        spent: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
        for round_ in range(args.rounds + 1):  # the first round warms the server up
            for name, call in calls.items():
                start, cpu = time.monotonic(), tree_cpu_s(server.pid)
                call()
                if round_:
                    spent[name].append((time.monotonic() - start, tree_cpu_s(server.pid) - cpu))
        spark.stop()
    print(f"{'call':14s} {'wall s':>7s} {'server CPU s':>13s}  (medians of {args.rounds})")
    for name, figures in spent.items():
        wall = statistics.median(w for w, _ in figures)
        cpu = statistics.median(c for _, c in figures)
        print(f"{name:14s} {wall:7.3f} {cpu:13.3f}")


if __name__ == "__main__":
    main()
