"""Dagster's default run launcher, with run monitoring: a run whose worker process died (killed, or
lost with the container or host that ran it) is marked failed instead of staying STARTED forever.

The default launcher starts each run as a process of the code server; Dagster only monitors the
run workers of launchers that can tell whether a worker is alive (Kubernetes, Docker, ECS). This
one tells by the process id the run's worker recorded in its RUN_START event, which the daemon
sees (`lakehouse up` runs the code server on its machine; in the compose deployment the daemon
shares the code server's process namespace). The sensors and
automation then launch the work again; bronze is exactly-once, so the retry neither loses nor
duplicates a record.
"""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg
from dagster._core.launcher import CheckRunHealthResult, WorkerStatus

# A process whose start is later than the event its pid came from by more than this is another
# process that reused the pid (clock ticks round the start time to 10 ms).
PID_REUSE_MARGIN_S = 1.0


def process_start_time(pid: int) -> float | None:
    """When process ``pid`` started (epoch seconds), or None if no such process runs. Without
    /proc (macOS) a live process counts as started at the epoch: the pid-reuse check is skipped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self").exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:  # alive, owned by another user
            pass
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    if fields[0] == "Z":  # exited, not yet reaped by its parent
        return None
    ticks_since_boot = int(fields[19])  # field 22 of proc(5); fields[0] is field 3
    boot_time = next(
        float(line.split()[1])
        for line in Path("/proc/stat").read_text().splitlines()
        if line.startswith("btime ")
    )
    return boot_time + ticks_since_boot / os.sysconf("SC_CLK_TCK")


def worker_health(pid: int | None, started_at: float) -> CheckRunHealthResult:
    """The health of the run worker that recorded ``pid`` at ``started_at`` (epoch seconds). A
    worker that cannot be judged counts as running: monitoring fails runs that are not."""
    if pid is None:
        return CheckRunHealthResult(WorkerStatus.RUNNING, "the run recorded no process id")
    start = process_start_time(pid)
    if start is None or start > started_at + PID_REUSE_MARGIN_S:
        return CheckRunHealthResult(
            WorkerStatus.FAILED, f"the run's worker process {pid} is no longer running"
        )
    return CheckRunHealthResult(WorkerStatus.RUNNING, run_worker_id=str(pid))


class MonitoredRunLauncher(dg.DefaultRunLauncher):
    """``DefaultRunLauncher`` whose run workers the daemon's run monitoring checks by process id.

    Configure it in ``dagster.yaml`` with ``run_monitoring: enabled: true``.
    """

    @property
    def supports_check_run_worker_health(self) -> bool:
        return True

    def check_run_worker_health(self, run: dg.DagsterRun) -> CheckRunHealthResult:
        starts = self._instance.get_records_for_run(
            run.run_id, of_type=dg.DagsterEventType.RUN_START, limit=1, ascending=False
        ).records
        if not starts:  # STARTED is set by RUN_START, so this is a race with the worker
            return CheckRunHealthResult(WorkerStatus.RUNNING, "the run has not started yet")
        entry = starts[0].event_log_entry
        pid = entry.dagster_event.pid if entry.dagster_event else None
        return worker_health(pid, entry.timestamp)
