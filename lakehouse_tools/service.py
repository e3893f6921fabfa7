"""A local service (the embedded broker, a Spark Connect server): a process this one starts, waits
for and stops. Its output goes to a log file, removed when the service stops after a clean run and
kept when it failed to start or its ``with`` block raised, so the error can name it."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, Self

LOOPBACK = "127.0.0.1"


# Where the kernel picks the ports of sockets bound to port 0 and of outgoing connections.
EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")
# Below the ephemeral range, a service's port is chosen among this many.
SERVICE_PORTS = 16384


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing listens on right now, below the kernel's ephemeral
    range where it can tell that range.

    A service binds its port seconds after it is chosen. An ephemeral port can be taken in
    between: the JVM of a Spark Connect server binds its driver's and block manager's ports to
    port 0 before its gRPC port, and every outgoing connection takes one. A port the kernel does
    not hand out can be taken only by another caller of this function choosing the same one.
    """
    low = _ephemeral_low()
    if low is not None and low - SERVICE_PORTS >= 1024:
        for _ in range(100):
            port = random.randrange(low - SERVICE_PORTS, low)
            if not port_is_taken(host, port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _ephemeral_low() -> int | None:
    """The first port of the kernel's ephemeral range; None where it cannot be read."""
    try:
        return int(EPHEMERAL_PORTS.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def port_is_taken(host: str, port: int) -> bool:
    """Whether something listens on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As servers bind: a port whose old connections linger in TIME_WAIT is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


# Execs its arguments with one signal (argv[1], a number) back to its default action.
_DEFAULT_SIGNAL_THEN_EXEC = (
    "import os, signal, sys; signal.signal(int(sys.argv[1]), signal.SIG_DFL); "
    "os.execvp(sys.argv[2], sys.argv[2:])"
)


def obeying(stop_signal: signal.Signals, command: list[str]) -> list[str]:
    """``command``, run so that it obeys ``stop_signal`` even where this process ignores it.

    An ignored signal stays ignored across exec, and a JVM then installs no handler for it: the
    service would end only by SIGKILL. This process ignores SIGTERM when it was started with SIGINT
    ignored (a background job) and has run Dagster, which points SIGTERM at SIGINT's handler. The
    disposition is reset by a small launcher the child execs, not by a ``preexec_fn``: Python run
    in a forked child of a process holding gRPC threads (a Spark Connect client) can abort there.
    """
    if signal.getsignal(stop_signal) != signal.SIG_IGN:
        return command
    launcher = [sys.executable, "-I", "-S", "-c", _DEFAULT_SIGNAL_THEN_EXEC, str(int(stop_signal))]
    return [*launcher, *command]


class LocalService:
    """A service process started and stopped by this process; a context manager."""

    name = "service"  # in messages: "The <name> on <address> failed: ..."
    error: type[RuntimeError] = RuntimeError
    stop_timeout_s = 10.0
    stop_signal = signal.SIGTERM

    def __init__(
        self, timeout_s: float, keep_log: bool = False, log_file: Path | None = None
    ) -> None:
        """Prepare a service; its output goes to ``log_file`` (appended to, always kept) or to a
        temporary file (kept when ``keep_log``)."""
        self.timeout_s = timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._log_file = log_file
        self._keep_log = keep_log or log_file is not None
        self._temporary: Path | None = None  # a data folder of its own, removed by ``stop``

    @property
    def address(self) -> str:
        """Where clients reach the service, for messages."""
        raise NotImplementedError

    @property
    def also(self) -> str:
        """What else clients reach, a line for messages (none by default)."""
        return ""

    @property
    def log_path(self) -> Path | None:
        """The file holding the service's own output, once started."""
        return Path(self._log.name) if self._log else None

    @property
    def returncode(self) -> int | None:
        """None while the service runs; its exit code once it exited (-1: not started)."""
        return -1 if self._process is None else self._process.poll()

    @property
    def pid(self) -> int | None:
        """The service's process id while it runs."""
        return self._process.pid if self._process else None

    def start(self) -> Self:
        """Start the service and wait until it is ready."""
        raise NotImplementedError

    def _data_folder(self, folder: Path | None, prefix: str) -> Path:
        """``folder``, or when None a temporary folder of the service's that ``stop`` removes."""
        if folder is not None:
            return folder
        if self._temporary is None:
            self._temporary = Path(tempfile.mkdtemp(prefix=prefix))
        return self._temporary

    def _launch(
        self, command: list[str], ready: Callable[[], bool], env: Mapping[str, str] | None = None
    ) -> None:
        """Run ``command`` in its own session and wait until ``ready()`` (polled)."""
        if self._log_file is not None:
            self._log_file.parent.mkdir(parents=True, exist_ok=True)
            self._log = self._log_file.open("ab")
        else:
            self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (open while it runs)
                prefix=f"{self.name.replace(' ', '-')}-", suffix=".log", delete=False
            )
        self._process = subprocess.Popen(
            obeying(self.stop_signal, command),
            env=None if env is None else dict(env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._fail(f"it exited with code {self._process.returncode}")
            if ready():
                return
            time.sleep(0.1)
        self._fail(f"it was not ready within {self.timeout_s:.0f} s")

    def _fail(self, reason: str) -> None:
        self._keep_log = True
        self.stop()
        whole = self.log_path.read_text(errors="replace") if self.log_path else ""
        cause = self.diagnosis(whole)
        raise self.error(
            f"The {self.name} on {self.address} failed: {reason}.{f' {cause}' if cause else ''} "
            f"Its output ({self.log_path}):\n{whole[-3000:]}"
        )

    def diagnosis(self, output: str) -> str:
        """What a failed start's ``output`` says went wrong, in a sentence (none by default)."""
        return ""

    def stop(self) -> None:
        """Stop the service (``stop_signal``, then SIGKILL after ``stop_timeout_s``), then what
        is left of its process group (workers it started); remove its temporary data folder."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.send_signal(self.stop_signal)
                try:
                    self._process.wait(timeout=self.stop_timeout_s)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._process.pid, signal.SIGKILL)  # its session's group: its own
            self._process = None
        if self._log is not None:
            self._log.close()
            if not self._keep_log:
                Path(self._log.name).unlink(missing_ok=True)
        if self._temporary is not None:
            shutil.rmtree(self._temporary, ignore_errors=True)
            self._temporary = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._keep_log = self._keep_log or exc is not None
        self.stop()


@contextlib.contextmanager
def local_service(variable: str, service: Callable[[], LocalService]) -> Iterator[str]:
    """The address in the environment variable ``variable`` when it is set; otherwise a local
    ``service`` for the duration of the block, its address exported in ``variable`` (so the
    resources and the processes the block starts use it)."""
    configured = os.environ.get(variable)
    if configured:
        yield configured
        return
    starting = service()
    print(f"Starting the {starting.name}...", flush=True)
    with starting as running:
        os.environ[variable] = running.address
        print(f"The {running.name} is listening on {running.address}", flush=True)
        if running.also:
            print(running.also, flush=True)
        try:
            yield running.address
        finally:
            del os.environ[variable]
