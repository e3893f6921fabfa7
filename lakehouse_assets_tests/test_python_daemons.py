"""The Python worker daemons a Connect server's closed sessions leave behind are ended once idle,
and Spark goes on working without them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pyspark import cloudpickle
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from lakehouse_assets_tests.conftest import new_metastore
from lakehouse_tools.python_daemons import DaemonReaper, session_daemons
from lakehouse_tools.spark_server import SparkConnectServer
from resources import SparkResource

# Stand-ins for Spark's daemons: their command lines name pyspark.daemon, as Spark's do. A root
# process of their own starts them, as a server's JVM does, and reaps those that end. Like
# pyspark.daemon they set their own SIGTERM handler: the test process may pass SIGTERM on ignored
# (Dagster points it at SIGINT's handler, and a background job ignores SIGINT).
ROOT = """
import os, subprocess, sys, time
sleeper = "import os, signal, sys, time\\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\\n"
sleeper += "signal.signal(signal.SIGTERM, lambda *_: os._exit(1))\\n"
sleeper += "if sys.argv[1] == 'fork': os.fork()\\ntime.sleep(120)"
started = [
    subprocess.Popen([sys.executable, "-c", sleeper, workers, "pyspark.daemon"],
                     env={**os.environ, "SPARK_JOB_ARTIFACT_UUID": artifact})
    for workers, artifact in [("none", "6f1d3c52"), ("fork", "0b8e9a11"), ("none", "default")]
]
print(" ".join(str(p.pid) for p in started), flush=True)
while True:
    for process in started:
        process.poll()
    time.sleep(0.05)
"""


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def wait_until(check: Callable[[], Any], what: str, timeout_s: float = 10) -> Any:
    """``check()``'s first truthy result, polled; fails after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return result


def running(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


@pytest.fixture
def stand_ins() -> Iterator[tuple[int, dict[str, int]]]:
    """The root's pid, and its daemons: a session's idle one, a session's with a worker (busy),
    and Spark's own (default)."""
    root = subprocess.Popen(
        [sys.executable, "-c", ROOT], stdout=subprocess.PIPE, start_new_session=True
    )
    try:
        assert root.stdout is not None
        started = map(int, root.stdout.readline().split())
        pids: dict[str, int] = dict(zip(("idle", "busy", "default"), started, strict=True))
        wait_until(lambda: session_daemons(root.pid).get(pids["busy"]), "the stand-in's worker")
        yield root.pid, pids
    finally:
        os.killpg(root.pid, signal.SIGKILL)
        root.wait()


def test_only_a_sessions_daemon_without_workers_is_ended_after_the_idle_time(
    stand_ins: tuple[int, dict[str, int]],
) -> None:
    root, pids = stand_ins
    idle, busy, default = pids["idle"], pids["busy"], pids["default"]
    assert session_daemons(root) == {idle: False, busy: True}  # Spark's own left out

    clock = Clock()
    reaper = DaemonReaper(root, idle_after_s=300, clock=clock)
    assert reaper.sweep() == []  # first seen idle at 0
    clock.now = 299.0
    assert reaper.sweep() == []
    clock.now = 300.0
    assert reaper.sweep() == [idle]
    wait_until(lambda: not running(idle), "the idle daemon's end")
    assert running(busy) and running(default)
    clock.now = 10_000.0
    assert reaper.sweep() == []


def test_a_daemon_counts_as_idle_from_when_its_last_worker_was_seen(
    stand_ins: tuple[int, dict[str, int]],
) -> None:
    root, pids = stand_ins
    worker = children(pids["busy"])[0]
    clock = Clock()
    reaper = DaemonReaper(root, idle_after_s=300, clock=clock)
    assert reaper.sweep() == []  # busy at 0
    os.kill(worker, signal.SIGKILL)
    clock.now = 200.0
    wait_until(lambda: not session_daemons(root)[pids["busy"]], "the worker's end")
    assert pids["busy"] not in reaper.sweep()  # idle from 200
    clock.now = 499.0
    assert pids["busy"] not in reaper.sweep()
    clock.now = 500.0
    assert pids["busy"] in reaper.sweep()


def children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


ROWS = 1000
# The server's Python workers cannot import the tests: the source goes to them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class CountingReader(DataSourceStreamReader):
    """Offsets 0..ROWS in one batch: its planning and reading run in the session's daemons."""

    def initialOffset(self) -> dict[str, int]:
        return {"offset": 0}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"offset": ROWS}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [InputPartition((start["offset"], end["offset"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[int]]:
        first, last = partition.value
        for number in range(first, last):
            yield (number,)


class CountingSource(DataSource):
    """A trivial Python streaming source (``lakehouse_counting``): one batch of numbered rows."""

    @classmethod
    def name(cls) -> str:
        return "lakehouse_counting"

    def schema(self) -> str:
        return "number long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return CountingReader()


def stream_rows(spark: SparkSession, work: Path, name: str) -> int:
    """One stream of a Python data source (its planning and creation run in session daemons);
    the rows it wrote."""
    spark.dataSource.register(CountingSource)
    stream = spark.readStream.format(CountingSource.name()).load().writeStream.format("memory")
    query = stream.queryName(name).option("checkpointLocation", str(work / name))
    query.trigger(availableNow=True).start().awaitTermination()
    return spark.table(name).count()


@pytest.mark.own_stack  # its own Spark: the sweep must not reach the main suite's server
def test_a_session_goes_on_streaming_after_its_idle_daemons_are_ended(tmp_path: Path) -> None:
    with SparkConnectServer(daemon_idle_s=3600, metastore=new_metastore()) as server:
        assert server.pid is not None
        pid = server.pid
        spark = SparkResource(remote=server.url).get_session()
        try:
            assert stream_rows(spark, tmp_path, "first") == ROWS

            # Spark ends a daemon's idle workers after a minute; then its daemons are idle.
            def all_idle() -> dict[int, bool]:
                daemons = session_daemons(pid)
                return {} if any(daemons.values()) else daemons

            daemons = wait_until(all_idle, "idle session daemons", timeout_s=150)
            ended = DaemonReaper(pid, idle_after_s=0).sweep()
            assert sorted(ended) == sorted(daemons)
            # The session's daemons (its data source's lookup, creation) are started anew.
            assert stream_rows(spark, tmp_path, "second") == ROWS
            assert set(session_daemons(pid)).isdisjoint(ended)
        finally:
            spark.stop()
