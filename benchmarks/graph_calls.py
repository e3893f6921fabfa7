"""Benchmark: where the sample graph's time goes, call by call to the Spark Connect server.

What it measures
----------------
Starts a Spark Connect server and an embedded broker, produces the sample (``--users`` users,
2 days) once, and materializes the whole graph twice on that server, each time into a new lake
(the first pays the server's warm-up; the second is what a long-lived server pays). Every call
the client makes to the server (execute, analyze, config) is timed and named by the project's
line that made it and the Dagster step it ran in; a call made inside another (an execute that
fetches) counts once. For each graph it prints its wall time and the CPU seconds the server's
processes and this one (the client, Dagster) spent in it, against what the machine's cores had:
a server near all of them is busy computing, not waiting on round trips, and its calls to the
catalog (``resources/catalog.py``: registration) beside the tables it wrote. Then one small new
batch reaches the second lake (a third day of the same users, its Kafka records and landing
files) and the graph runs through bronze, silver and gold for that day, as a sensor-launched
run does: its time against the second graph's is the figure (a new batch should cost less than a
new lake). Then it runs the graph once more where nothing is new, as a fresh run process would
(no registration checked yet), and prints its time, its calls and its catalog calls. For the new
batch it prints each step's calls and seconds, each step's start and end (steps run at once),
then the call sites by time. Profiles are off (as in the tests). The server is started as
``make run`` starts it.

It wraps methods of PySpark's Connect client and Dagster's step loop (internals of both): the
wall times are the figures (the new batch against the new lake); the calls are a diagnostic.

Usage::

    .venv/bin/python benchmarks/graph_calls.py [--users 6] [--sites 40]
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
from benchmarks.lake_schemas import lake_schemas, own_metastore  # noqa: E402

own_metastore()  # before any Spark starts: the benchmark's catalog is its own

FIRST_DAY = date(2026, 11, 1)  # of the sample
CLIENT_CALLS = ("_analyze", "_execute_and_fetch", "execute_command", "config", "_execute")
Key = tuple[str, str, str]  # (step, call, project call site)


class CallLog:
    """The client's calls by (step, call, site): [count, seconds]."""

    def __init__(self) -> None:
        self.calls: dict[Key, list[float]] = collections.defaultdict(lambda: [0, 0.0])
        self.inside = threading.local()  # per thread: in a timed call, in which step
        self.spans: dict[str, tuple[float, float]] = {}  # step -> (start, end), monotonic

    @property
    def step(self) -> str:
        """The step the calling thread runs (steps of a run run in threads of their own)."""
        return getattr(self.inside, "step", "(outside a step)")

    @step.setter
    def step(self, key: str) -> None:
        self.inside.step = key

    def wrap(self, owner: type, name: str) -> None:
        original: Callable[..., Any] = getattr(owner, name)
        log = self

        def timed(client: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(log.inside, "call", False):  # a call inside a timed call
                return original(client, *args, **kwargs)
            log.inside.call = True
            start = time.monotonic()
            try:
                return original(client, *args, **kwargs)
            finally:
                log.inside.call = False
                entry = log.calls[(log.step, name, call_site())]
                entry[0] += 1
                entry[1] += time.monotonic() - start

        setattr(owner, name, timed)


def call_site() -> str:
    """The project's innermost three frames of the current stack, innermost first."""
    own = [
        frame
        for frame in traceback.extract_stack()[:-2]
        if frame.filename.startswith(str(REPO_ROOT))
        and ".venv" not in frame.filename
        and not frame.filename.endswith("graph_calls.py")
    ]
    return " < ".join(
        f"{Path(f.filename).relative_to(REPO_ROOT)}:{f.lineno}" for f in reversed(own[-3:])
    )


def follow_steps(log: CallLog) -> None:
    """Name each call by the Dagster step it runs in (steps run in threads of this process)."""
    from dagster._core.execution.plan import execute_plan

    name = "core_dagster_event_sequence_for_step"  # the loop over one step's events
    original = getattr(execute_plan, name)

    def step_events(step_context: Any) -> Iterator[Any]:
        key = log.step = step_context.step.key
        start = time.monotonic()
        try:
            yield from original(step_context)
        finally:
            log.spans[key] = (start, time.monotonic())

    setattr(execute_plan, name, step_events)


KINDS = {  # the client's call -> what it is on the server
    "_execute_and_fetch": "execute",
    "execute_command": "execute",
    "_execute": "execute",
    "_analyze": "analyze",
    "config": "config",
}


# The calls a step aims at, by its layer (issue 57): a bronze step 3 besides its stream's one.
AIMS = {"bronze": 4, "silver": 6, "gold": 4}


def aim(step: str) -> int | None:
    """The calls step ``step`` (``silver__workout_bpm``, ``silver_users``) aims at."""
    return AIMS.get(step.split("_")[0])


def print_budget(log: CallLog) -> None:
    """Each step's calls by kind (executes, analyses such as ``df.schema``, settings) and seconds,
    dearest first, with the totals and each step's aim (``AIMS``): the budget a step is held to,
    and the steps over it."""
    steps: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    seconds: dict[str, float] = collections.defaultdict(float)
    for (step, call, _), (count, spent) in log.calls.items():
        steps[step][KINDS[call]] += int(count)
        seconds[step] += spent
    total = collections.Counter[str]()
    for kinds in steps.values():
        total.update(kinds)
    print(
        f"\nnew batch: {sum(total.values())} calls ({total['execute']} executes, "
        f"{total['analyze']} analyses, {total['config']} settings), "
        f"{sum(seconds.values()):.1f} s in them"
    )
    print(f"  {'seconds':>8} {'execute':>7} {'analyze':>7} {'config':>6} {'aim':>4}  step")
    over = 0
    for step in sorted(steps, key=lambda name: -seconds[name]):
        kinds, wanted = steps[step], aim(step)
        late = wanted is not None and sum(kinds.values()) > wanted
        over += late
        print(
            f"  {seconds[step]:8.1f} {kinds['execute']:7d} {kinds['analyze']:7d} "
            f"{kinds['config']:6d} {wanted or '-':>4}  {step}{'  (over)' if late else ''}"
        )
    print(f"steps over their aim: {over} of {len(steps)}")


CATALOG = "resources/catalog.py"  # the call sites of registration (docs/catalog.md)


def calls(log: CallLog, site: str = "") -> int:
    """The calls logged whose innermost project frame is in ``site`` (every call when empty)."""
    return int(sum(count for (_, _, where), (count, _) in log.calls.items() if site in where[:60]))


def print_timeline(log: CallLog, began: float) -> None:
    """Each step's start and end in the second graph, seconds from the graph's start, in the order
    they started: the longest chain of steps that wait on each other is the graph's floor."""
    print("\nsteps in time (new batch): start, end, seconds")
    for step, (start, end) in sorted(log.spans.items(), key=lambda item: item[1][0]):
        print(f"  {start - began:6.1f} {end - began:6.1f} {end - start:6.1f}  {step}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Where the sample graph's time goes.")
    parser.add_argument("--users", type=int, default=6)
    parser.add_argument("--sites", type=int, default=40, help="call sites printed")
    args = parser.parse_args()
    os.environ.setdefault("LAKEHOUSE_PROFILE", "off")

    import dagster as dg
    from pyspark.sql.connect.client.core import SparkConnectClient

    from benchmarks.spark_settings import tree_cpu_s
    from lakehouse_assets.table_metadata import LAYERS
    from lakehouse_tools import sample_data
    from lakehouse_tools.broker import EmbeddedBroker
    from lakehouse_tools.demo import materialize_graph
    from lakehouse_tools.spark_server import SparkConnectServer
    from resources import build_resources, catalog

    log = CallLog()
    for name in CLIENT_CALLS:
        log.wrap(SparkConnectClient, name)
    follow_steps(log)

    server = SparkConnectServer()  # as `make run` starts it
    with EmbeddedBroker() as broker, server:
        os.environ["KAFKA_BOOTSTRAP_SERVERS"] = broker.bootstrap_servers
        os.environ["SPARK_REMOTE"] = server.address
        sample = sample_data.generate(args.users, 2, first_day=FIRST_DAY)
        sample_data.produce(broker.bootstrap_servers, sample.messages)
        for graph in ("first", "second"):
            log.calls.clear()
            log.spans.clear()
            root = Path(tempfile.mkdtemp(prefix="graph-calls-"))
            os.environ["LAKEHOUSE_ROOT"] = str(root)
            os.environ.update(lake_schemas())
            sample_data.write_landing(root, sample.files)
            resources = build_resources()
            # The lake's runs share one instance, as a deployment's do (the checks and the
            # quarantine's counts read the materializations before theirs).
            instance = dg.DagsterInstance.ephemeral()
            assert server.pid is not None
            start, server_cpu, own_cpu = (
                time.monotonic(),
                tree_cpu_s(server.pid),
                time.process_time(),
            )
            assert all(result.success for result in materialize_graph(resources, None, instance))
            wall = time.monotonic() - start
            server_cpu = tree_cpu_s(server.pid) - server_cpu
            own_cpu = time.process_time() - own_cpu
            cores = wall * (os.cpu_count() or 1)
            tables = sum(len(resources["lake"].tables(layer)) for layer in LAYERS)
            print(
                f"{graph} graph: {wall:.1f} s; CPU seconds: the server {server_cpu:.1f}, "
                f"this process {own_cpu:.1f}, of {cores:.1f} the machine's cores had; "
                f"{calls(log, CATALOG)} catalog calls for {tables} tables",
                flush=True,
            )
        # One small batch on the second lake (a third day of the same users, its landing files
        # too), through bronze and silver and gold for its days: what a sensor-launched run does.
        batch_day = FIRST_DAY + timedelta(days=2)
        batch = sample_data.generate(args.users, 1, first_day=batch_day, seed=8)
        sample_data.produce(broker.bootstrap_servers, batch.messages)
        sample_data.write_landing(root, batch.files)
        catalog._verified.clear()
        log.calls.clear()
        log.spans.clear()
        start = time.monotonic()
        results = materialize_graph(resources, (batch_day, batch_day), instance)
        assert all(result.success for result in results)
        fresh = time.monotonic() - start
        print(
            f"new batch: {fresh:.1f} s, {fresh / wall:.2f}x the second graph into a new lake; "
            f"{calls(log)} calls"
        )
        measured = dict(log.calls), dict(log.spans), start
        # Once more on the second lake, where nothing is new: what a sensor's idle run costs.
        # Each Dagster run is a process of its own, which has checked no registration yet.
        catalog._verified.clear()
        log.calls.clear()
        started = time.monotonic()
        assert all(result.success for result in materialize_graph(resources, None, instance))
        idle = time.monotonic() - started
        print(
            f"nothing new: {idle:.1f} s, {calls(log)} calls, {calls(log, CATALOG)} to the catalog"
            f" (by {sorted({step for step, _, where in log.calls if CATALOG in where[:60]})})"
        )
        resources["spark"].get_session().stop()
        log.calls.clear()
        log.calls.update(measured[0])
        log.spans.update(measured[1])
        start = measured[2]

    print_budget(log)
    print_timeline(log, start)
    print("\ncall sites by time (new batch):")
    ranked = sorted(log.calls.items(), key=lambda item: -item[1][1])[: args.sites]
    for (step, call, site), (count, seconds) in ranked:
        print(f"  {seconds:5.1f} s {count:3.0f}x {call:18s} {step:28s} {site}")


if __name__ == "__main__":
    main()
