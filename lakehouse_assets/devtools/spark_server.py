"""A Spark Connect server started from the pyspark wheel: one long-lived Spark application that the
Dagster runs share as clients (``SPARK_REMOTE=sc://127.0.0.1:PORT``).

The wheel ships Spark's jars, Spark Connect's among them, but no start script for the server, so
it is launched the way that script does: ``spark-submit --class ...SparkConnectServer
spark-internal``. Its Python workers (the Kafka source, ``foreachBatch`` sinks, UDFs) run this
interpreter, which has the project installed. The master may be ``local[*]`` or a cluster's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import pyspark

from lakehouse_assets.devtools.broker import LOOPBACK, free_port, port_is_taken
from resources.spark import SESSION_DEFAULTS, without_connect

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_CONNECT_PORT = 15002
# Settings of the server's application; the master and extra settings come from the caller.
SERVER_DEFAULTS: dict[str, str] = {
    **SESSION_DEFAULTS,
    "spark.driver.memory": "2g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "WARN",
    # One run's streams may run beside another's: no query waits for a scheduler slot.
    "spark.scheduler.mode": "FAIR",
}


class SparkServerError(RuntimeError):
    """The Spark Connect server could not be started."""


def spark_home() -> Path:
    """The installed pyspark package: Spark's jars and scripts."""
    return Path(pyspark.__file__).parent


def server_command(
    port: int, master: str, conf: Mapping[str, str], host: str = LOOPBACK
) -> list[str]:
    """The ``spark-submit`` command line of a Connect server on ``host:port``."""
    settings = {
        **SERVER_DEFAULTS,
        **conf,
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
    }
    command = [str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS]
    command += ["--master", master, "--name", "lakehouse-connect"]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, "spark-internal"]


class SparkConnectServer:
    """A Spark Connect server on a loopback port, started and stopped by this process.

    Use it as a context manager::

        with SparkConnectServer() as server:
            print(server.url)  # sc://127.0.0.1:PORT
    """

    def __init__(
        self,
        port: int | None = None,
        host: str = LOOPBACK,
        master: str = "local[*]",
        conf: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = 120.0,
    ) -> None:
        """Prepare a server.

        Args:
            port: gRPC port to listen on; a free one is chosen when None.
            host: address to listen on (0.0.0.0: every interface, as in a container).
            master: the application's master: local[*], spark://host:7077, ...
            conf: extra Spark settings of the application.
            env: extra environment variables of the server and its Python workers.
            timeout_s: how long to wait for the server to accept connections.
        """
        self.port = port if port is not None else free_port()
        self.host = host
        self.master = master
        self.conf = dict(conf or {})
        self.env = dict(env or {})
        self.timeout_s = timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (open while the server runs)
            prefix="spark-connect-", suffix=".log", delete=False
        )

    @property
    def url(self) -> str:
        """The ``SPARK_REMOTE`` URL clients connect to."""
        host = LOOPBACK if self.host == "0.0.0.0" else self.host
        return f"sc://{host}:{self.port}"

    @property
    def log_path(self) -> Path:
        """The file holding the server's own output."""
        return Path(self._log.name)

    @property
    def pid(self) -> int | None:
        """The process id of the server's JVM while it runs."""
        return self._process.pid if self._process else None

    def start(self) -> SparkConnectServer:
        """Start the server and wait until it accepts connections.

        Raises:
            SparkServerError: the port is taken, or the server exited or did not answer in time.
        """
        if port_is_taken(LOOPBACK, self.port):
            raise SparkServerError(
                f"Cannot start a Spark Connect server: port {self.port} is already in use. "
                "Choose another port, or set SPARK_REMOTE to the server listening there."
            )
        env = {
            **without_connect(os.environ),  # the server is the application, not a client of one
            "SPARK_HOME": str(spark_home()),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": LOOPBACK,
            **self.env,
        }
        command = server_command(self.port, self.master, self.conf, self.host)
        self._process = subprocess.Popen(
            command, env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                self._fail(f"the server exited with code {self._process.returncode}")
            if port_is_taken(LOOPBACK, self.port):
                return
            time.sleep(0.2)
        self._fail(f"the server did not listen within {self.timeout_s:.0f} s")

    def _fail(self, reason: str) -> None:
        self.stop()
        output = self.log_path.read_text(errors="replace")[-3000:]
        raise SparkServerError(f"Spark Connect server on {self.url} failed: {reason}.\n{output}")

    def stop(self) -> None:
        """Stop the server: its streaming queries end, its Python workers with it."""
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
