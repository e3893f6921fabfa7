"""A service stops on its stop signal even when this process ignores that signal (a background
job that ran Dagster does): the service gets the signal's default action, not the ignoring. Its
port is one that no socket bound to port 0 can take before the service binds it."""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from typing import Self

import pytest

from lakehouse_tools.service import EPHEMERAL_PORTS, LOOPBACK, LocalService, free_port

# Reports its SIGTERM disposition, then sleeps: only the default action ends it early.
CHILD = (
    "import signal, sys, time\n"
    "print(signal.getsignal(signal.SIGTERM) == signal.SIG_IGN, flush=True)\n"
    "time.sleep(60)\n"
)


class Sleeper(LocalService):
    name = "sleeper"
    stop_timeout_s = 20.0

    @property
    def address(self) -> str:
        return "nowhere"

    def start(self) -> Self:
        self._launch([sys.executable, "-c", CHILD], self._reported)
        return self

    def _reported(self) -> bool:
        return bool(self.log_path and self.log_path.read_text().strip())


@pytest.fixture
def sigterm_ignored() -> Iterator[None]:
    before = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def test_a_service_ends_on_sigterm_that_this_process_ignores(sigterm_ignored: None) -> None:
    service = Sleeper(timeout_s=30, keep_log=True).start()
    assert service.log_path is not None
    log = service.log_path
    try:
        assert log.read_text().strip() == "False"  # the child does not ignore it
        started = time.monotonic()
        process = service._process
        service.stop()
        assert time.monotonic() - started < 10  # not the SIGKILL after stop_timeout_s
        assert process is not None and process.returncode == -signal.SIGTERM
    finally:
        log.unlink(missing_ok=True)


def test_no_python_runs_in_the_forked_child_before_exec(sigterm_ignored: None) -> None:
    """A child forked from a process holding gRPC threads (a Spark Connect client) can abort if
    Python runs in it before exec (gRPC's fork handlers: a ``preexec_fn``). Python's after-fork
    hooks run in the forked child exactly when it runs Python code there: they must not run."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    watching = [True]  # a hook cannot be unregistered: it writes only during this test

    def report() -> None:
        if watching[0]:
            os.write(write_end, b"python ran\n")

    os.register_at_fork(after_in_child=report)
    try:
        for _ in range(3):
            Sleeper(timeout_s=30).start().stop()
        with pytest.raises(BlockingIOError):  # nothing was written
            os.read(read_end, 100)
    finally:
        watching[0] = False
        os.close(read_end)
        os.close(write_end)


def test_a_chosen_port_is_outside_the_range_the_kernel_hands_out_to_port_0() -> None:
    # A Spark Connect server once bound its driver's port (port 0) to the port chosen for its gRPC
    # service a moment before, and exited; the port answered meanwhile, so it looked started.
    low, high = map(int, EPHEMERAL_PORTS.read_text().split())
    taken = []
    try:
        for _ in range(50):  # sockets the kernel placed, kept bound while ports are chosen
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            taken.append(sock)
        ports = {free_port() for _ in range(50)}
        assert all(1024 <= port < low for port in ports), sorted(ports)
        assert all(low <= sock.getsockname()[1] <= high for sock in taken)
        for port in ports:  # nothing holds a port it chose
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.bind((LOOPBACK, port))
    finally:
        for sock in taken:
            sock.close()
