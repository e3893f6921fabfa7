"""The production shape under faults. `lakehouse up` runs PostgreSQL, the embedded broker, the
Spark Connect server, the Dagster code server, dagster-daemon and dagster-webserver, each its own
process; the sample goes through the sensors and automation to gold while services are killed at
chosen moments:

1. the daemon and the worker of a bronze run in progress (SIGKILL: a container lost);
2. the Spark Connect server during a silver merge (SIGKILL);
3. with a second wave of Kafka records (no landing files: the broker is what it freezes), the
   broker frozen while bronze reads from it (SIGSTOP, then SIGCONT: unreachable, then back) and,
   while it is, PostgreSQL with runs queued or running (SIGKILL, then crash recovery).

`lakehouse up` starts each killed service again, as compose's restart policy does. Afterwards
every produced record is in bronze exactly once, both gold reports equal the oracle's, and no run
is left queued or in progress.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from deltalake import DeltaTable

from lakehouse_assets.constants import BRONZE, GOLD, SILVER
from lakehouse_assets.fitness.names import (
    GYM_SUMMARY,
    KAFKA_TOPICS,
    LANDING_COLUMNS,
    WORKOUT_BPM_SUMMARY,
)
from lakehouse_assets_tests.conftest import INTERPRETED
from lakehouse_assets_tests.test_end_to_end import assert_reports_match
from lakehouse_tools import sample_data
from lakehouse_tools.service import free_port
from resources import LakeResource

pytestmark = pytest.mark.faults

REPO_ROOT = Path(__file__).parents[1]
# Gold's automation follows the last 7 days of the clock (not of LAKEHOUSE_AS_OF_DATE): the waves
# are the two days before today, so a test that runs across midnight still covers them.
AS_OF = datetime.now(UTC).date()
WAVES = tuple(
    {"users": 3, "days": 1, "first_day": AS_OF - timedelta(days=2 - n), "seed": 31 + n}
    for n in range(2)
)
FROZEN_S = 30  # how long the broker stays frozen
IN_PROGRESS = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
UNFINISHED = [*IN_PROGRESS, dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED,
              dg.DagsterRunStatus.CANCELING]  # fmt: skip
SETTLE_S = 900
FAILURES = (dg.DagsterEventType.RUN_FAILURE, dg.DagsterEventType.STEP_FAILURE)


class RunningStack:
    """`lakehouse up` in a process of its own, and what the test needs of it."""

    def __init__(self, home: Path, process: subprocess.Popen[bytes], log: Path) -> None:
        self.home, self.process, self.log = home, process, log

    def state(self) -> dict[str, Any]:
        return json.loads((self.home / "services.json").read_text())

    def pid(self, service: str) -> int:
        return self.state()[service]["pid"]

    def wait_restarted(self, service: str, old_pid: int) -> None:
        """Until ``lakehouse up`` started ``service`` again (a new process id)."""
        eventually(lambda: self.pid(service) != old_pid, f"the {service} started again", 180)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def eventually(check: Callable[[], Any], what: str, timeout_s: float, stack: Any = None) -> Any:
    """``check()``'s first truthy result; fails after ``timeout_s`` with its last error."""
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if stack is not None and stack.process.poll() is not None:
            raise AssertionError(
                f"`lakehouse up` exited while waiting for {what}:\n{stack.output()}"
            )
        try:
            if result := check():
                return result
        except Exception as error:  # the database restarting, a table not written yet
            last = error
        time.sleep(2)
    tail = stack.output()[-3000:] if stack else ""
    raise AssertionError(f"Timed out waiting for {what}: {last!r}\n{tail}")


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningStack]:
    # Not under tmp_path: under root, PostgreSQL runs as `postgres`, which must reach its data.
    home = Path(tempfile.mkdtemp(prefix="lakehouse-faults-"))
    home.chmod(0o755)
    env = {
        **os.environ,
        "LAKEHOUSE_ROOT": str(tmp_path / "lake"),
        "LAKEHOUSE_AS_OF_DATE": AS_OF.isoformat(),
        "LAKEHOUSE_SENSOR_INTERVAL_S": "5",
        "LAKEHOUSE_PROFILE": "off",
        "LAKEHOUSE_SPARK_CONF": json.dumps(INTERPRETED),  # as the session's server (conftest)
        # The main suite runs beside this test on 2 cores: four runs starting their streams at
        # once overloaded the machine past Spark's 10 s wait for a new Python worker, again and
        # again (the sensors and retries relaunch them), and the lake did not settle in time.
        "LAKEHOUSE_MAX_CONCURRENT_RUNS": "2",
    }
    for name in ("SPARK_REMOTE", "KAFKA_BOOTSTRAP_SERVERS", "DAGSTER_HOME", "LAKEHOUSE_METASTORE"):
        env.pop(name, None)  # every service of its own, as `lakehouse up` starts them
    log = tmp_path / "lakehouse-up.log"
    lakehouse = str(Path(sys.executable).parent / "lakehouse")
    command = [lakehouse, "up", "--home", str(home), "--port", str(free_port()), "--sql-port", "0"]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    running = RunningStack(home, process, log)
    try:
        eventually(
            lambda: "The lakehouse is up" in running.output(), "`lakehouse up`", 300, running
        )
        for name, value in running.state()["environment"].items():
            monkeypatch.setenv(name, value)  # the test's own instance reads the same database
        yield running
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        left_state = (home / "services.json").exists()
        shutil.copytree(home / "logs", tmp_path / "logs", dirs_exist_ok=True)  # kept by pytest
        shutil.rmtree(home, ignore_errors=True)
    assert process.returncode == 0, running.output()[-3000:]
    assert "Stopping the PostgreSQL server" in running.output()
    assert not left_state


def produce(lake: Path, wave: dict[str, Any], files: bool = True) -> sample_data.SampleData:
    """The wave's Kafka records and, with ``files``, its landing files: what was produced."""
    batch = sample_data.generate(**wave)
    if not files:
        batch = dataclasses.replace(batch, files=[])
    sample_data.write_landing(lake, batch.files)
    sample_data.produce(os.environ["KAFKA_BOOTSTRAP_SERVERS"], batch.messages)
    return batch


def runs(instance: dg.DagsterInstance, statuses: list[dg.DagsterRunStatus], layer: str) -> list:
    """The runs in ``statuses`` that materialize a table of ``layer``."""
    records = instance.get_run_records(filters=dg.RunsFilter(statuses=statuses))
    return [
        r.dagster_run
        for r in records
        if any(key.path[0] == layer for key in r.dagster_run.asset_selection or ())
    ]


def worker_pid(instance: dg.DagsterInstance, run: dg.DagsterRun) -> int | None:
    """The process id of a run's worker, once it started."""
    starts = instance.get_records_for_run(
        run.run_id, of_type=dg.DagsterEventType.RUN_START, limit=1, ascending=False
    ).records
    event = starts[0].event_log_entry.dagster_event if starts else None
    return event.pid if event else None


def started_run_worker(instance: dg.DagsterInstance, layer: str) -> int | None:
    """The worker of a run of ``layer`` in progress, if there is one."""
    for run in runs(instance, [dg.DagsterRunStatus.STARTED], layer):
        if pid := worker_pid(instance, run):
            return pid
    return None


def run_history(instance: dg.DagsterInstance) -> str:
    """One line per run: its status, tables, partition, retry tags and the reason it failed."""
    lines = []
    for record in reversed(instance.get_run_records()):
        run = record.dagster_run
        tables = ",".join("/".join(k.path) for k in run.asset_selection or ())
        tags = {k: v for k, v in run.tags.items() if "retry" in k or k == "dagster/partition"}
        failures = [
            entry.message
            for entry in instance.all_logs(run.run_id)
            if entry.dagster_event
            and (entry.dagster_event.event_type in FAILURES or "retry" in entry.message.lower())
        ]
        lines.append(f"{record.create_timestamp:%H:%M:%S} {run.run_id[:8]} {run.status.value} "
                     f"{tables} {tags} {' | '.join(failures)[:300]}")  # fmt: skip
    return "\n".join(lines)


def assert_bronze_exactly_once(lake: LakeResource, batches: list[sample_data.SampleData]) -> None:
    """Each produced record once in its bronze table; each landing line once."""
    for topic in KAFKA_TOPICS:
        table = DeltaTable(lake.table_uri(BRONZE, topic)).to_pyarrow_table(
            columns=["partition", "offset"]
        )
        produced = sum(1 for b in batches for m in b.messages if m.topic == topic)
        distinct = len(table.group_by(["partition", "offset"]).aggregate([]))
        assert (table.num_rows, distinct) == (produced, produced), topic
    for source in LANDING_COLUMNS:
        table = DeltaTable(lake.table_uri(BRONZE, source)).to_pyarrow_table(columns=["source_file"])
        lines = {
            f.name: len(f.text.splitlines()) for b in batches for f in b.files if f.source == source
        }
        counts = table.group_by("source_file").aggregate([([], "count_all")]).to_pylist()
        assert {Path(row["source_file"]).name: row["count_all"] for row in counts} == lines


def assert_settled(lake: LakeResource, batches: list[sample_data.SampleData]) -> bool:
    with dg.DagsterInstance.get() as instance:
        unfinished = instance.get_run_records(filters=dg.RunsFilter(statuses=UNFINISHED))
        assert not unfinished, [r.dagster_run.run_id for r in unfinished]
    assert_bronze_exactly_once(lake, batches)
    gold = {t: DeltaTable(lake.table_uri(GOLD, t)).to_pyarrow_table().to_pylist()
            for t in (WORKOUT_BPM_SUMMARY, GYM_SUMMARY)}  # fmt: skip
    assert_reports_match(gold[WORKOUT_BPM_SUMMARY], gold[GYM_SUMMARY], lake, batches)
    return True


def test_nothing_is_lost_or_doubled_when_services_die(stack: RunningStack, tmp_path: Path) -> None:
    lake_root = Path(os.environ["LAKEHOUSE_ROOT"])
    lake = LakeResource(root=str(lake_root))
    batches = [produce(lake_root, WAVES[0])]
    with dg.DagsterInstance.get() as instance:
        # 1. The daemon's container lost while bronze runs, and the run's worker: monitoring
        # fails the run, the sensors launch the work again.
        worker = eventually(
            lambda: started_run_worker(instance, BRONZE), "a bronze run", 600, stack
        )
        daemon = stack.pid("dagster-daemon")
        os.killpg(daemon, signal.SIGKILL)
        os.kill(worker, signal.SIGKILL)
        stack.wait_restarted("dagster-daemon", daemon)

        # 2. The Spark Connect server killed during a silver merge; run retries run it again.
        eventually(lambda: started_run_worker(instance, SILVER), "a silver run", 600, stack)
        spark = stack.pid("Spark Connect server")
        os.killpg(spark, signal.SIGKILL)
        stack.wait_restarted("Spark Connect server", spark)

        # 3. The broker frozen while bronze reads from it and, while it is (the other streams'
        # runs queued or running), PostgreSQL killed.
        batches.append(produce(lake_root, WAVES[1], files=False))
        eventually(lambda: started_run_worker(instance, BRONZE), "a bronze run", 600, stack)
        broker = stack.pid("embedded Kafka broker")
        os.kill(broker, signal.SIGSTOP)
        frozen = time.monotonic()
        postgres = stack.pid("PostgreSQL server")
        os.killpg(postgres, signal.SIGKILL)
        stack.wait_restarted("PostgreSQL server", postgres)
        time.sleep(max(0.0, FROZEN_S - (time.monotonic() - frozen)))
        os.kill(broker, signal.SIGCONT)

        try:
            eventually(lambda: assert_settled(lake, batches), "the lake to settle", SETTLE_S, stack)
        except AssertionError as error:
            raise AssertionError(
                f"{error}\nThe runs, oldest first:\n{run_history(instance)}"
            ) from None
        finally:
            (tmp_path / "runs.txt").write_text(run_history(instance))
        failed = instance.get_run_records(
            filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE])
        )
        assert failed, "the faults failed no run: they did not hit what they were aimed at"
