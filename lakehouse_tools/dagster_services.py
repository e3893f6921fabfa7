"""The Dagster services of the production shape (`lakehouse up`, docker-compose.yml): the code
server of the project's definitions, dagster-daemon and dagster-webserver, their command lines as
both shapes run them, and how each is known to be ready.

The code server is a service of its own, as Dagster's deployment guides run it, not one that
dagster-daemon starts from a ``python_module`` workspace: the daemon replaces such a code server
with a new process every 60 s (``RELOAD_WORKSPACE_INTERVAL`` in Dagster's daemon controller), each
importing the project anew: 13 processes and 153 CPU seconds in one 16-minute fault matrix run,
about a sixth of a core for as long as the stack runs. The runs are the code server's processes.
"""

from __future__ import annotations

import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Self

from lakehouse_tools.service import LocalService

# The production shape's code location: the code server at DAGSTER_CODE_SERVER_HOST and _PORT.
WORKSPACE_FILE = "docker/workspace.yaml"
DEFINITIONS_MODULE = "lakehouse_assets.definitions"
ENV_CODE_SERVER_HOST, ENV_CODE_SERVER_PORT = "DAGSTER_CODE_SERVER_HOST", "DAGSTER_CODE_SERVER_PORT"


def code_server_command(host: str, port: int) -> list[str]:
    """The Dagster code server of the project's definitions, on ``host:port``, named as the
    ``python_module`` workspace names it (``workspace.yaml``: `lakehouse dev`), so the UI's
    addresses and the sensors' state are the same in both."""
    return [
        "dagster", "code-server", "start", "-h", host, "-p", str(port),
        "-m", DEFINITIONS_MODULE, "--location-name", DEFINITIONS_MODULE,
    ]  # fmt: skip


def daemon_command() -> list[str]:
    """dagster-daemon as the compose deployment runs it."""
    return ["dagster-daemon", "run", "-w", WORKSPACE_FILE]


def webserver_command(host: str, port: int) -> list[str]:
    """dagster-webserver as the compose deployment runs it, on ``host:port``."""
    return ["dagster-webserver", "-h", host, "-p", str(port), "-w", WORKSPACE_FILE]


class DagsterProcess(LocalService):
    """The code server, dagster-daemon or dagster-webserver, from this environment's scripts, in
    the project folder (where ``docker/workspace.yaml`` is)."""

    stop_signal = signal.SIGINT  # Dagster's processes shut down cleanly on an interrupt
    stop_timeout_s = 30.0

    def __init__(
        self,
        name: str,
        command: list[str],
        ready: Callable[[float], bool],
        address: str,
        log_file: Path,
    ) -> None:
        super().__init__(timeout_s=180.0, log_file=log_file)
        self.name = name
        self.command = command
        self._ready = ready
        self._address = address

    @property
    def address(self) -> str:
        return self._address

    def start(self) -> Self:
        started = time.time()
        executable = str(Path(sys.executable).parent / self.command[0])
        self._launch([executable, *self.command[1:]], lambda: self._ready(started))
        return self


def serves_http(url: str) -> Callable[[float], bool]:
    """Readiness of a web server: ``url`` answers."""

    def ready(_started: float) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return True
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    return ready


def serves_code(host: str, port: int) -> Callable[[float], bool]:
    """Readiness of the code server: it lists the code location (it answers once the project's
    definitions are loaded)."""
    from dagster._grpc.client import DagsterGrpcClient  # the client Dagster's tools use

    def ready(_started: float) -> bool:
        try:
            DagsterGrpcClient(port=port, host=host).list_repositories()
        except Exception:  # not listening yet, or still loading the definitions
            return False
        return True

    return ready


def daemons_beat(home: Path) -> Callable[[float], bool]:
    """Readiness of dagster-daemon: each daemon the instance needs sent a heartbeat since the
    process started."""
    import dagster as dg

    instance: list[dg.DagsterInstance] = []  # opened on first use, once the database is up

    def ready(started: float) -> bool:
        try:
            if not instance:
                instance.append(dg.DagsterInstance.from_config(str(home)))
            beats = instance[0].get_daemon_heartbeats()
            required = instance[0].get_required_daemon_types()
        except Exception:  # the database restarting
            return False
        return all(t in beats and beats[t].timestamp >= started for t in required)

    return ready
