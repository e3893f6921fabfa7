"""Benchmark: does the cost of one new day follow the new data, or the history the lake holds?

What it measures
----------------
Two lakes are filled from the sample-data generator (``--users`` users, 100 by default) and
materialized whole (bronze and silver, then gold for every day), untimed: one holding 1 day of
history, one holding ``--history`` days (30). Each lake has its own embedded broker; both runs
use one warm Spark Connect server that the benchmark starts. Then, ``--rounds`` times, one new
day of sample data (the same generator, the same number of users, the next calendar day of each
lake, the same seed for both lakes) is written to each lake's landing zone and produced to its
broker, and the increment is materialized as the demo does it: one run of bronze and silver, one
run of gold for the new day. The lakes take turns (A B, then B A), so drift of a noisy machine
falls on both.

Each asset's time is its step's wall time in the run (the duration of its STEP_SUCCESS event);
the total is the wall time of both runs. It prints, per asset, the median over the rounds on each
lake and their ratio (long history / short history). The targets of issue 10: no asset above
1.3x, the total at most 1.2x.

Usage::

    .venv/bin/python benchmarks/incremental_cost.py [--users 100] [--history 30] [--rounds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
import dagster as dg  # noqa: E402

from benchmarks.lake_schemas import lake_schemas, own_metastore  # noqa: E402
from lakehouse_tools import sample_data  # noqa: E402
from lakehouse_tools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_tools.demo import materialize_graph, step_seconds  # noqa: E402
from lakehouse_tools.spark_server import SparkConnectServer  # noqa: E402
from resources import ENV_SPARK_REMOTE, build_resources  # noqa: E402

own_metastore()  # before any Spark starts: the benchmark's catalog is its own

FIRST_DAY = date(2026, 1, 1)


@dataclass
class Lake:
    """A lake with ``history`` days materialized, fed by its own broker."""

    label: str  # in the report: what sets this lake apart
    history: int
    root: str
    broker: EmbeddedBroker
    resources: dict[str, Any]
    next_day: date
    days: tuple[date, date] = (FIRST_DAY, FIRST_DAY)  # the days added last
    steps: dict[str, list[float]] = field(default_factory=dict)
    totals: list[float] = field(default_factory=list)

    def add(self, users: int, days: int, seed: int) -> None:
        """Write and produce ``days`` days of sample data from ``next_day``."""
        sample = sample_data.generate(users, days, first_day=self.next_day, seed=seed)
        sample_data.write_landing(self.root, sample.files)
        sample_data.produce(self.broker.bootstrap_servers, sample.messages)
        self.days = (self.next_day, self.next_day + timedelta(days=days - 1))
        self.next_day += timedelta(days=days)

    def materialize(self, instance: dg.DagsterInstance) -> dict[str, float]:
        """Bronze and silver, then gold for the days just added; each step's seconds."""
        results = materialize_graph(self.resources, self.days, instance)
        if not all(result.success for result in results):
            raise SystemExit(f"A run on the {self.label} lake failed")
        return {step: s for result in results for step, s in step_seconds(result).items()}


@contextlib.contextmanager
def lake(label: str, history: int, remote: str, root: str) -> Iterator[Lake]:
    """A lake at ``root`` (a folder or an object store's URI) with a broker of its own."""
    with EmbeddedBroker() as broker:
        env = {
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
            "LAKEHOUSE_ROOT": root,
            ENV_SPARK_REMOTE: remote,
            **lake_schemas(),
        }
        yield Lake(label, history, root, broker, build_resources(env), FIRST_DAY)


def main() -> None:
    parser = argparse.ArgumentParser(description="Cost of one new day: short against long history")
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--history", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    instance = dg.DagsterInstance.ephemeral()
    with (
        tempfile.TemporaryDirectory(prefix="incremental-cost-") as folder,
        SparkConnectServer() as server,
        lake("1-day history", 1, server.url, f"{folder}/lake-1d") as short,
        lake(
            f"{args.history}-day history", args.history, server.url, f"{folder}/lake-long"
        ) as long,
    ):
        try:
            measure(short, long, args.users, args.rounds, instance)
        finally:  # release the session while its server runs (at exit it would retry)
            short.resources["spark"].get_session().stop()
        report(short, long)


def measure(short: Lake, long: Lake, users: int, rounds: int, instance: dg.DagsterInstance) -> None:
    """Fill both lakes, then time ``rounds`` new days on each, the lakes taking turns."""
    for each in (short, long):
        started = time.monotonic()
        each.add(users, each.history, seed=1)
        each.materialize(instance)
        print(f"The {each.label} lake filled in {time.monotonic() - started:.0f} s")
    for round_ in range(rounds):
        for each in (short, long) if round_ % 2 == 0 else (long, short):
            each.add(users, 1, seed=100 + round_)
            started = time.monotonic()
            for step, seconds in each.materialize(instance).items():
                each.steps.setdefault(step, []).append(seconds)
            each.totals.append(time.monotonic() - started)
            print(f"round {round_ + 1}: the {each.label} lake's new day "
                  f"in {each.totals[-1]:.1f} s")  # fmt: skip


def report(short: Lake, long: Lake) -> None:
    width = max(len(step) for step in short.steps) + 2
    print(f"\n{'step':<{width}}{short.label:>16}{long.label:>17}{'ratio':>8}")
    for step in sorted(short.steps):
        a, b = statistics.median(short.steps[step]), statistics.median(long.steps[step])
        print(f"{step:<{width}}{a:>15.2f}s{b:>16.2f}s{b / a:>7.2f}x")
    a, b = statistics.median(short.totals), statistics.median(long.totals)
    print(f"{'total (both runs)':<{width}}{a:>15.2f}s{b:>16.2f}s{b / a:>7.2f}x")


if __name__ == "__main__":
    main()
