"""Debezium's PostgreSQL connector in Kafka Connect standalone, writing change events to a Kafka
broker: the real thing a CDC source reads, run from its jars (``lakehouse jars`` resolves them
into a folder of their own; see ``lakehouse_tools/jars.toml``).

The worker writes as Debezium's users run it by default: Kafka Connect's ``JsonConverter`` with
schemas, for keys and values. Its source offsets are kept in ``data_dir``: a worker started again
on the same folder goes on from where it stopped (the replication slot keeps what it has not
confirmed). The database needs ``wal_level=logical`` (``PostgresServer(settings=...)``).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lakehouse_tools.jars import DEBEZIUM_JARS_DIR
from lakehouse_tools.service import LOOPBACK, LocalService, free_port
from resources.spark_jvm import java

__all__ = ["KafkaConnect", "KafkaConnectError", "postgres_connector"]

STANDALONE_CLASS = "org.apache.kafka.connect.cli.ConnectStandalone"
CONNECTOR_CLASS = "io.debezium.connector.postgresql.PostgresConnector"
CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
JVM_OPTIONS = ["-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=info"]


class KafkaConnectError(RuntimeError):
    """Kafka Connect, or its connector, could not be started."""


def class_path() -> str:
    """Kafka Connect's runtime, Debezium's PostgreSQL connector and their dependencies.

    Raises:
        KafkaConnectError: the jars were never resolved.
    """
    jars = sorted(DEBEZIUM_JARS_DIR.glob("*.jar"))
    if not jars:
        raise KafkaConnectError(
            f"Debezium's and Kafka Connect's jars are not in {DEBEZIUM_JARS_DIR}: run "
            "`lakehouse jars` (`make install` does)."
        )
    return os.pathsep.join(str(jar) for jar in jars)


def postgres_connector(
    name: str,
    host: str,
    port: int,
    user: str,
    database: str,
    tables: list[str],
    **settings: str,
) -> dict[str, str]:
    """The settings of Debezium's PostgreSQL connector for ``tables`` (``schema.table``) of
    ``database``, at its defaults but for what a test or demo needs: ``pgoutput`` (built into
    PostgreSQL), a publication of those tables only, the topic prefix ``name`` (topics
    ``<name>.<schema>.<table>``), a slot of the connector's own; ``settings`` add or override
    (``skipped.operations=none`` to send truncates)."""
    return {
        "name": name,
        "connector.class": CONNECTOR_CLASS,
        "plugin.name": "pgoutput",
        "database.hostname": host,
        "database.port": str(port),
        "database.user": user,
        "database.password": "",
        "database.dbname": database,
        "topic.prefix": name,
        "table.include.list": ",".join(tables),
        "slot.name": f"{name}_slot",
        "publication.name": f"{name}_publication",
        "publication.autocreate.mode": "filtered",
        **settings,
    }


class KafkaConnect(LocalService):
    """A Kafka Connect standalone worker running one connector; a context manager::

    with KafkaConnect(broker.bootstrap_servers, postgres_connector(...)) as connect:
        ...  # the connector's task is running: changes flow to the broker

    ``worker_settings`` add to or override the worker's (``offset.flush.interval.ms``: how
    often it writes its source offsets, every second here).
    """

    name = "Kafka Connect worker"
    error = KafkaConnectError

    def __init__(
        self,
        bootstrap_servers: str,
        connector: Mapping[str, str],
        data_dir: Path | None = None,
        timeout_s: float = 120.0,
        keep_log: bool = False,
        log_file: Path | None = None,
        worker_settings: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(timeout_s, keep_log, log_file)
        self.bootstrap_servers = bootstrap_servers
        self.connector = dict(connector)
        self.worker_settings = dict(worker_settings or {})
        self.port = free_port()
        self.data_dir = data_dir

    @property
    def address(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> KafkaConnect:
        """Start the worker and wait until its connector's task runs.

        Raises:
            KafkaConnectError: the jars are missing, the worker exited, or the connector or its
                task failed (the message holds Connect's trace) or did not run in time.
        """
        data_dir = self._data_folder(self.data_dir, "kafka-connect-")
        data_dir.mkdir(parents=True, exist_ok=True)
        worker = {
            "bootstrap.servers": self.bootstrap_servers,
            "key.converter": CONVERTER,
            "value.converter": CONVERTER,
            "key.converter.schemas.enable": "true",
            "value.converter.schemas.enable": "true",
            "offset.storage.file.filename": str(data_dir / "offsets"),
            "offset.flush.interval.ms": "1000",
            "listeners": self.address,
            # The connector's jars declare their plugins: no scan of the class path at start.
            "plugin.discovery": "service_load",
            **self.worker_settings,
        }  # no plugin.path: the connector is on the class path (an empty one is refused)
        worker_file = _properties(data_dir / "worker.properties", worker)
        connector_file = _properties(data_dir / "connector.properties", self.connector)
        command = [java(), *JVM_OPTIONS, "-cp", class_path(), STANDALONE_CLASS]
        self._launch([*command, str(worker_file), str(connector_file)], self._task_runs)
        return self

    def status(self) -> dict[str, Any] | None:
        """The connector's status from the worker's REST API; None while it does not answer."""
        url = f"{self.address}/connectors/{self.connector['name']}/status"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            return None

    def _task_runs(self) -> bool:
        status = self.status()
        if status is None:
            return False
        states = [status["connector"], *status.get("tasks", [])]
        failed = [state for state in states if state.get("state") == "FAILED"]
        if failed:
            self._fail(f"its connector failed: {failed[0].get('trace', '')[:2000]}")
        return len(states) > 1 and all(state.get("state") == "RUNNING" for state in states)


def _properties(path: Path, settings: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return path
