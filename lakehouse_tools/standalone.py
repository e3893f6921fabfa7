"""A Spark standalone cluster on this machine, started from the pyspark wheel: a master and its
workers, each its own JVM (``spark-class ...Master`` / ``...Worker``, as Spark's ``sbin`` scripts
do, which the wheel does not ship). A Connect server started with ``master=cluster.url`` runs its
executors on the workers: the shape of a real cluster, for tests and trials.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from lakehouse_tools.service import LOOPBACK, LocalService, free_port, port_is_taken
from lakehouse_tools.spark_server import SparkServerError
from resources.spark_jvm import spark_home, without_connect

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def _environment() -> dict[str, str]:
    return {
        **without_connect(os.environ),
        "SPARK_HOME": str(spark_home()),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": LOOPBACK,
    }


class StandaloneMaster(LocalService):
    """The cluster's master; workers and applications reach it at ``url``."""

    name = "Spark standalone master"
    error = SparkServerError

    def __init__(self, timeout_s: float = 60.0) -> None:
        super().__init__(timeout_s)
        self.port = free_port()
        self.ui_port = free_port()

    @property
    def url(self) -> str:
        """The master URL applications use (``SPARK_MASTER``)."""
        return f"spark://{LOOPBACK}:{self.port}"

    @property
    def address(self) -> str:
        return self.url

    @property
    def status_url(self) -> str:
        """The master's status as JSON (its workers and applications)."""
        return f"http://{LOOPBACK}:{self.ui_port}/json/"

    def start(self) -> StandaloneMaster:
        command = [str(spark_home() / "bin" / "spark-class"), MASTER_CLASS, "--host", LOOPBACK]
        command += ["--port", str(self.port), "--webui-port", str(self.ui_port)]
        self._launch(command, lambda: port_is_taken(LOOPBACK, self.ui_port), _environment())
        return self


class StandaloneWorker(LocalService):
    """A worker of ``master_url`` offering ``cores`` cores and ``memory`` to executors."""

    name = "Spark standalone worker"
    error = SparkServerError

    def __init__(
        self, master_url: str, cores: int = 1, memory: str = "1g", timeout_s: float = 60.0
    ) -> None:
        super().__init__(timeout_s)
        self.master_url = master_url
        self.cores = cores
        self.memory = memory

    @property
    def address(self) -> str:
        return self.master_url

    def start(self) -> StandaloneWorker:
        command = [str(spark_home() / "bin" / "spark-class"), WORKER_CLASS, "--host", LOOPBACK]
        command += ["--cores", str(self.cores), "--memory", self.memory]
        command += ["--webui-port", str(free_port()), self.master_url]
        self._launch(command, self._registered, _environment())
        return self

    def _registered(self) -> bool:
        log = self.log_path
        return log is not None and "Successfully registered with master" in log.read_text(
            errors="replace"
        )


@contextlib.contextmanager
def standalone_cluster(
    workers: int = 2, cores: int = 1, memory: str = "1g"
) -> Iterator[StandaloneMaster]:
    """A master and ``workers`` registered workers for the duration of the block."""
    with contextlib.ExitStack() as stack:
        master = stack.enter_context(StandaloneMaster())
        for _ in range(workers):
            stack.enter_context(StandaloneWorker(master.url, cores, memory))
        yield master
