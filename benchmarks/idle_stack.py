"""Benchmark: what the production shape costs while it waits for data.

It starts `lakehouse up` (every service its own process, sensors every ``--interval`` seconds) in
a new home with no data produced, waits until it is up and its first runs are done (the sensors
create the empty tables, and the automation what follows them: no run queued or in progress and
none for a minute; at most ``--settle`` minutes), and then counts the CPU seconds of its
whole process tree over ``--minutes``: each live process's own time and that of the children it
already reaped (a code server that ended and was waited for counts to its parent, less what it
had used before the count began). It prints them
per minute, by service, and how many processes each service started meanwhile.

Run it from the checkout to measure; run it at once from another checkout (``--repo``) to compare
two versions side by side in one sitting.

Usage::

    .venv/bin/python benchmarks/idle_stack.py [--minutes 5] [--settle 10] [--interval 5]
        [--repo PATH]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TICK_S = os.sysconf("SC_CLK_TCK")


def processes() -> dict[int, tuple[int, float]]:
    """Every process: its parent and its CPU seconds (its own and its reaped children's)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
        found[int(entry.name)] = (int(fields[1]), ticks / TICK_S)
    return found


def tree(root: int, table: dict[int, tuple[int, float]]) -> set[int]:
    """``root`` and its descendants in ``table``."""
    members, grew = {root}, True
    while grew:
        grew = False
        for pid, (parent, _) in table.items():
            if parent in members and pid not in members:
                members.add(pid)
                grew = True
    return members


def service_of(pid: int, services: dict[int, str], table: dict[int, tuple[int, float]]) -> str:
    """The service whose process ``pid`` is or descends from."""
    while pid in table:
        if pid in services:
            return services[pid]
        pid = table[pid][0]
    return "lakehouse up"


def wait_for_quiet_runs(state: dict, limit_s: float) -> None:
    """Until the stack's Dagster instance has had no run in progress for a minute (at most
    ``limit_s``)."""
    os.environ.update(state["environment"])
    import dagster as dg

    in_progress = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING,
                   dg.DagsterRunStatus.STARTED]  # fmt: skip
    deadline = time.monotonic() + limit_s
    with dg.DagsterInstance.get() as instance:
        while True:
            latest = instance.get_run_records(limit=1)
            active = instance.get_run_records(dg.RunsFilter(statuses=in_progress))
            ended = latest[0].end_time if latest else None
            if latest and not active and ended and time.time() - ended > 60:
                return
            if time.monotonic() > deadline:
                break
            time.sleep(5)
    going = [(r.dagster_run.status.value, r.dagster_run.asset_selection) for r in active]
    print(f"(runs still going after {limit_s / 60:g} minutes: counting anyway: {going})")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument(
        "--settle", type=float, default=10.0, help="at most this many minutes of first runs"
    )
    parser.add_argument("--interval", type=int, default=5, help="sensor interval, seconds")
    parser.add_argument("--repo", type=Path, default=REPO_ROOT, help="the checkout to run")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the stack on the way out
    repo = args.repo.resolve()
    home = Path(tempfile.mkdtemp(prefix="lakehouse-idle-"))
    home.chmod(0o755)  # under root, PostgreSQL runs as `postgres`
    env = {**os.environ, "LAKEHOUSE_SENSOR_INTERVAL_S": str(args.interval)}
    for name in ("SPARK_REMOTE", "KAFKA_BOOTSTRAP_SERVERS", "DAGSTER_HOME", "LAKEHOUSE_ROOT"):
        env.pop(name, None)
    log = home / "lakehouse-up.log"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [
        str(repo / ".venv" / "bin" / "lakehouse"),
        "up",
        "--home",
        str(home),
        "--port",
        str(port),
    ]
    with log.open("wb") as output:
        stack = subprocess.Popen(
            command, cwd=repo, env=env, stdout=output, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        while "The lakehouse is up" not in log.read_text(errors="replace"):
            if stack.poll() is not None:
                raise SystemExit(f"`lakehouse up` exited:\n{log.read_text()[-3000:]}")
            time.sleep(1)
        state = json.loads((home / "services.json").read_text())
        services = {v["pid"]: name for name, v in state.items() if "pid" in v}
        wait_for_quiet_runs(state, args.settle * 60)
        before = processes()
        members_before = tree(stack.pid, before)
        time.sleep(args.minutes * 60)
        after = processes()
        members_after = tree(stack.pid, after)
        cpu: dict[str, float] = collections.defaultdict(float)
        started: collections.Counter[str] = collections.Counter()
        for pid in members_after:
            name = service_of(pid, services, after)
            was = before[pid][1] if pid in members_before else 0.0
            cpu[name] += after[pid][1] - was
            started[name] += pid not in members_before
        gone = [pid for pid in members_before if pid not in members_after]
        # An ended process's whole time is now its parent's (reaped): take off what it had used.
        for pid in gone:
            cpu[service_of(pid, services, before)] -= before[pid][1]
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True
        ).stdout.strip()
        print(f"{repo} ({commit}): {sum(cpu.values()):.1f} CPU s in {args.minutes:g} min idle, "
              f"{sum(cpu.values()) / args.minutes:.1f} per minute "
              f"({len(gone)} processes of the tree ended meanwhile)")  # fmt: skip
        for name, seconds in sorted(cpu.items(), key=lambda item: -item[1]):
            print(f"  {seconds:7.1f} s  {started[name]:3d} new processes  {name}")
    finally:
        stack.send_signal(signal.SIGTERM)
        try:
            stack.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(stack.pid, signal.SIGKILL)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
