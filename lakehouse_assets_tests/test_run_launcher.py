"""Run monitoring of the default launcher's run workers, by process id
(lakehouse_assets/run_launcher.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import dagster as dg
import pytest
import yaml

from lakehouse_assets.run_launcher import MonitoredRunLauncher, process_start_time, worker_health
from lakehouse_assets_tests.test_stack import REPO_ROOT

RUNNING, FAILED = "RUNNING", "FAILED"


def test_a_live_worker_is_running() -> None:
    assert worker_health(os.getpid(), time.time()).status.value == RUNNING


def test_a_worker_that_exited_has_failed() -> None:
    worker = subprocess.Popen([sys.executable, "-c", "pass"])
    started = time.time()
    worker.wait()
    health = worker_health(worker.pid, started)
    assert health.status.value == FAILED
    assert f"process {worker.pid} is no longer running" in (health.msg or "")


def test_a_pid_reused_by_a_later_process_is_not_the_worker() -> None:
    # This process started after a worker that recorded its pid an hour ago: another process.
    assert worker_health(os.getpid(), time.time() - 3600).status.value == FAILED


def test_the_start_time_of_a_new_process_is_now() -> None:
    before = time.time()
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        started = process_start_time(worker.pid)
        # /proc/stat's boot time is in whole seconds and a start in clock ticks: up to 1.01 s early
        assert started is not None and before - 2 <= started <= time.time()
    finally:
        worker.kill()
        worker.wait()


@pytest.mark.parametrize("instance_file", ["docker/dagster.yaml", "dagster.yaml"])
def test_both_instances_use_the_monitored_launcher(instance_file: str) -> None:
    config = yaml.safe_load((REPO_ROOT / instance_file).read_text())
    launcher = config["run_launcher"]
    assert (launcher["module"], launcher["class"]) == (
        MonitoredRunLauncher.__module__,
        MonitoredRunLauncher.__name__,
    )
    assert config["run_monitoring"]["enabled"] is True
    assert config["run_monitoring"]["start_timeout_seconds"] == 90  # not Dagster's 180
    assert MonitoredRunLauncher().supports_check_run_worker_health
    assert isinstance(MonitoredRunLauncher(), dg.DefaultRunLauncher)
