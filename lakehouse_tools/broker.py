"""The embedded Kafka broker: Apache Kafka itself, a single-node KRaft cluster (one process both
broker and controller), run from its jars (``lakehouse jars`` resolves them; see
``lakehouse_tools/jars.toml``). Its records are on disk in ``data_dir``: a broker started again on
the same folder has every topic and offset it had.
"""

from __future__ import annotations

import base64
import contextlib
import os
import subprocess
import uuid
from pathlib import Path

from lakehouse_tools.jars import KAFKA_JARS_DIR, wheel_scala_jars
from lakehouse_tools.service import LOOPBACK, LocalService, free_port, port_is_taken
from resources.spark_jvm import java

__all__ = ["DEFAULT_BROKER_PORT", "EmbeddedBroker", "EmbeddedBrokerError", "free_port"]

DEFAULT_BROKER_PORT = 9092  # `lakehouse broker` listens here, as Kafka does by default
SERVER_CLASS = "kafka.Kafka"
STORAGE_TOOL_CLASS = "kafka.tools.StorageTool"
# A laptop's single node: every internal topic on one replica, no wait before a group's first
# rebalance, records kept until deleted (a demo's data outlives Kafka's 7-day default), and
# record batches up to 16 MiB (Kafka's default is 1 MiB; clusters often raise it).
SETTINGS: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "log.retention.ms": "-1",
    "message.max.bytes": str(16 * 1024 * 1024),
}
JVM_OPTIONS = ["-Xmx1g", "-Dorg.apache.logging.log4j.level=WARN"]


class EmbeddedBrokerError(RuntimeError):
    """The embedded broker could not be started."""


def class_path() -> str:
    """Kafka's jars, and the Scala library of the pyspark wheel (Spark's resolver leaves Scala
    out, since Spark ships it).

    Raises:
        EmbeddedBrokerError: Kafka's jars were never resolved.
    """
    jars = sorted(KAFKA_JARS_DIR.glob("*.jar"))
    if not jars:
        raise EmbeddedBrokerError(
            f"Apache Kafka's jars are not in {KAFKA_JARS_DIR}: run `lakehouse jars` (`make "
            "install` does), or set KAFKA_BOOTSTRAP_SERVERS to a running Kafka cluster."
        )
    return os.pathsep.join(str(jar) for jar in [*jars, *wheel_scala_jars()])


class EmbeddedBroker(LocalService):
    """Apache Kafka on a loopback port, started and stopped by this process.

    Use it as a context manager::

        with EmbeddedBroker() as broker:
            print(broker.bootstrap_servers)
    """

    name = "embedded Kafka broker"
    error = EmbeddedBrokerError

    def __init__(
        self,
        port: int | None = None,
        data_dir: Path | None = None,
        timeout_s: float = 90.0,
        keep_log: bool = False,
        log_file: Path | None = None,
    ) -> None:
        """Prepare a broker.

        Args:
            port: TCP port clients connect to; a free one is chosen when None.
            data_dir: the broker's records and metadata, kept; a temporary folder, removed when
                the broker stops, when None.
            timeout_s: how long to wait for the broker to answer Kafka requests.
            keep_log: keep the broker's log file after a clean stop.
            log_file: append the output to this file (kept) instead of a temporary one.
        """
        super().__init__(timeout_s, keep_log, log_file)
        self.port = port if port is not None else free_port(LOOPBACK)
        self.data_dir = data_dir

    @property
    def bootstrap_servers(self) -> str:
        """The ``host:port`` Kafka clients connect to."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def address(self) -> str:
        return self.bootstrap_servers

    def start(self) -> EmbeddedBroker:
        """Start the broker (formatting its storage on first use) and wait until it answers a
        metadata request.

        Raises:
            EmbeddedBrokerError: the port is taken, Kafka's jars are missing, or the broker did
                not answer in time.
        """
        if port_is_taken(LOOPBACK, self.port):
            raise EmbeddedBrokerError(
                f"Cannot start the embedded Kafka broker: port {self.port} on {LOOPBACK} is "
                "already in use. Choose another port, stop what listens there, or set "
                "KAFKA_BOOTSTRAP_SERVERS to use that broker."
            )
        data_dir = self._data_folder(self.data_dir, "embedded-kafka-")
        properties = self._write_properties(data_dir)
        java_command = [java(), *JVM_OPTIONS, "-cp", class_path()]
        if not (data_dir / "log" / "meta.properties").is_file():
            self._format(java_command, properties)
        self._launch([*java_command, SERVER_CLASS, str(properties)], self._answers)
        return self

    def _write_properties(self, data_dir: Path) -> Path:
        """The server's settings, for this start's ports (a single voter may move)."""
        controller = free_port(LOOPBACK)
        settings = {
            **SETTINGS,
            "listeners": f"PLAINTEXT://{self.bootstrap_servers},CONTROLLER://{LOOPBACK}:{controller}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap_servers}",
            "controller.quorum.voters": f"1@{LOOPBACK}:{controller}",
            "log.dirs": str(data_dir / "log"),
        }
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / "server.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        return path

    def _format(self, java_command: list[str], properties: Path) -> None:
        """Format the storage of a new cluster (a new cluster id)."""
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        # One argument: an id may begin with "-", which would read as an option.
        command = [*java_command, STORAGE_TOOL_CLASS, "format", f"--cluster-id={cluster_id}"]
        done = subprocess.run(
            [*command, "-c", str(properties)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise EmbeddedBrokerError(
                f"Could not format the embedded Kafka broker's storage in {properties.parent}: "
                f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )

    def _answers(self) -> bool:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        if not port_is_taken(LOOPBACK, self.port):  # not listening yet: no client to wait on
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
