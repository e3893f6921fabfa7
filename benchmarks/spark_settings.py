"""Benchmark: the sample graph with and without extra Spark settings, taking turns.

What it measures
----------------
Each round starts a new Spark Connect server (one with the project's settings, one with the
settings given as JSON on top; ``--base`` adds settings to both) and an embedded broker, produces
the sample (``--users`` users, 2 days) once, then materializes the whole graph twice on that
server, each time into a new lake (the second graph shows what a server that stays up pays: the
tests' shared server, a long-lived production one). The servers take turns (A B, A B...), so
drift of a noisy machine falls on both. It prints each graph's wall time and the server's CPU
time during it (its processes' user + system seconds), and the ratios of the medians. Profiles
are off (as in the tests).

Usage::

    .venv/bin/python benchmarks/spark_settings.py \\
        '{"spark.sql.codegen.cache.maxEntries": "100"}' [--base '{...}'] [--users 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
from benchmarks.lake_schemas import lake_schemas, own_metastore  # noqa: E402
from lakehouse_tools import sample_data  # noqa: E402
from lakehouse_tools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_tools.demo import materialize_graph  # noqa: E402
from lakehouse_tools.spark_server import SparkConnectServer  # noqa: E402
from resources import build_resources  # noqa: E402

own_metastore()  # before any Spark starts: the benchmark's catalog is its own

GRAPHS_PER_SERVER = 2
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> float:
    """User + system CPU seconds of process ``root`` and its descendants now running."""
    stats: dict[int, tuple[int, float]] = {}  # pid -> (parent, cpu seconds)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        stats[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS_PER_S)
    total, pending = 0.0, [root]
    while pending:
        pid = pending.pop()
        total += stats.get(pid, (0, 0.0))[1]
        pending.extend(child for child, (parent, _) in stats.items() if parent == pid)
    return total


def graphs(settings: dict[str, str], users: int) -> list[tuple[float, float]]:
    """The wall and server CPU seconds of the graphs run on one new server with ``settings``."""
    times = []
    with (
        EmbeddedBroker() as broker,
        SparkConnectServer(conf=settings) as server,
    ):
        sample = sample_data.generate(users, 2)
        sample_data.produce(broker.bootstrap_servers, sample.messages)
        for _ in range(GRAPHS_PER_SERVER):
            with tempfile.TemporaryDirectory(prefix="spark-settings-") as root:
                sample_data.write_landing(root, sample.files)
                resources = build_resources(
                    {"LAKEHOUSE_ROOT": root, "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
                     "SPARK_REMOTE": server.url, **lake_schemas()}
                )  # fmt: skip
                assert server.pid is not None
                started, cpu = time.monotonic(), tree_cpu_s(server.pid)
                results = materialize_graph(resources)
                times.append((time.monotonic() - started, tree_cpu_s(server.pid) - cpu))
                assert all(result.success for result in results)
                resources["spark"].get_session().stop()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description="The sample graph with and without settings")
    parser.add_argument("settings", help="the settings of run B, as a JSON object")
    parser.add_argument("--base", default="{}", help="settings of both runs, as a JSON object")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    os.environ["LAKEHOUSE_PROFILE"] = "off"
    base, extra = json.loads(args.base), json.loads(args.settings)
    runs: dict[str, list[list[tuple[float, float]]]] = {"A": [], "B": []}
    for _ in range(args.rounds):
        for name, settings in (("A", base), ("B", {**base, **extra})):
            runs[name].append(graphs(settings, args.users))
            times = [f"{wall:.1f} s (server CPU {cpu:.0f} s)" for wall, cpu in runs[name][-1]]
            print(f"{name} graphs: {', '.join(times)}", flush=True)
    print(f"A: the project's settings with {json.dumps(base)}; B: and {json.dumps(extra)}")
    for n in range(GRAPHS_PER_SERVER):
        for measure, index in (("wall", 0), ("server CPU", 1)):
            a = statistics.median(r[n][index] for r in runs["A"])
            b = statistics.median(r[n][index] for r in runs["B"])
            print(f"graph {n + 1} on its server, {measure}: A {a:.1f} s, B {b:.1f} s, "
                  f"B/A {b / a:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
