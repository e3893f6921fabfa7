"""Ending the Python worker daemons that a Spark Connect server's sessions leave behind.

Spark starts one Python worker daemon (``python -m pyspark.daemon``, which forks the workers)
for each set of worker environment variables, and keeps it until the application ends. A Connect
session's data source creations, and the planning of each streaming query of a Python data
source, run with their own ``SPARK_JOB_ARTIFACT_UUID``: a Dagster run that streams from the Kafka
source leaves a daemon of its session and one per stream, 48 MB resident each, for as long as the
server lives (PySpark 4.2.1; SPARK-54055 upstream): a server that sensors keep busy gathers them
by the hundred within hours.

``DaemonReaper`` ends such a daemon (its artifact UUID is not ``default``) once it has had no
worker for ``idle_after_s``: SIGTERM, on which the daemon ends its own process group. Spark starts
a daemon anew when a session needs one it has lost, so a session that is still open goes on
working (tested); the one exception is a worker asked of the daemon in the very instant it ends,
which fails that Spark job. Only this machine's processes are seen, through Linux's ``/proc``
(elsewhere nothing is ended): on a cluster, daemons on the executors stay (those of the sessions'
planning run on the driver, here).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

PROC = Path("/proc")
DAEMON_MODULE = "pyspark.daemon"
DEFAULT_ARTIFACT = "SPARK_JOB_ARTIFACT_UUID=default"


def _process_table() -> dict[int, tuple[int, str]]:
    """``{pid: (parent pid, command line)}`` of this machine's processes."""
    table: dict[int, tuple[int, str]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            table[int(entry.name)] = (parent, command)
    return table


def _environment(pid: int) -> list[str]:
    try:
        return (PROC / str(pid) / "environ").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def session_daemons(root: int) -> dict[int, bool]:
    """The Python worker daemons of sessions under the process ``root``: ``{pid: has workers}``.

    A daemon's workers are its forked children, with its command line; the daemons Spark keeps for
    work outside any session (artifact UUID ``default``) are left out.
    """
    if not PROC.is_dir():  # not Linux: nothing to look at, nothing ended
        return {}
    table = _process_table()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in table.items():
        children.setdefault(parent, []).append(pid)
    daemons: dict[int, bool] = {}
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        if DAEMON_MODULE in table[pid][1]:
            if DEFAULT_ARTIFACT not in _environment(pid):
                daemons[pid] = bool(children.get(pid))
            continue  # its children are its workers
        pending.extend(children.get(pid, []))
    return daemons


class DaemonReaper:
    """Ends the session daemons under ``root`` that have had no worker for ``idle_after_s``,
    looking every ``interval_s`` in a background thread (``start``, ``stop``)."""

    def __init__(
        self,
        root: int,
        idle_after_s: float = 300.0,
        interval_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.idle_after_s = idle_after_s
        self.interval_s = interval_s
        self.clock = clock
        self._idle_since: dict[int, float] = {}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="python-daemon-reaper", daemon=True)

    def sweep(self) -> list[int]:
        """Look once; end the daemons idle long enough and return their ids."""
        now = self.clock()
        daemons = session_daemons(self.root)
        self._idle_since = {
            pid: self._idle_since.get(pid, now) for pid, busy in daemons.items() if not busy
        }
        ended = [pid for pid, since in self._idle_since.items() if now - since >= self.idle_after_s]
        for pid in ended:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            del self._idle_since[pid]
        if ended:
            log.info("Ended %d idle Python worker daemons of Connect sessions", len(ended))
        return ended

    def _loop(self) -> None:
        while not self._stopped.wait(self.interval_s):
            try:
                self.sweep()
            except Exception:  # never let a look at /proc end the server's supervision
                log.exception("Looking for idle Python worker daemons failed")

    def start(self) -> DaemonReaper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
