"""A Spark Connect server started from the pyspark wheel: one long-lived Spark application that the
Dagster runs share as clients (``SPARK_REMOTE=sc://127.0.0.1:PORT``).

The wheel ships Spark's jars, Spark Connect's among them, but no start script for the server, so
it is launched the way that script does: ``spark-submit --class ...SparkConnectServer
spark-internal``. Its Python workers (``mapInArrow``, UDFs) run this
interpreter, which has the project installed. The master may be ``local[*]`` or a cluster's.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from lakehouse_tools import sql_auth
from lakehouse_tools.python_daemons import DaemonReaper
from lakehouse_tools.service import LOOPBACK, LocalService, free_port, port_is_taken
from resources import derby
from resources import metastore as metastores
from resources.settings import ENV_METASTORE, lake_root
from resources.settings import metastore as configured_metastore
from resources.spark import LOCAL_DEFAULTS
from resources.spark_jvm import (
    DEFAULT_ARCHIVE,
    delta_agent_option,
    driver_class_path,
    jvm_settings,
    pinned_jars,
    quick_start_options,
    spark_home,
    without_connect,
    write_properties,
)

# Spark's Thrift server (HiveServer2's protocol: JDBC and ODBC clients, BI tools), with Spark
# Connect as a plugin of the same application: both kinds of client share one catalog and cache.
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SQL_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
CONNECT_PLUGIN = "org.apache.spark.sql.connect.SparkConnectPlugin"
DEFAULT_CONNECT_PORT = 15002
DEFAULT_SQL_PORT = 10000  # HiveServer2's
# Settings of the server's application; the master and extra settings come from the caller.
SERVER_DEFAULTS: dict[str, str] = {
    **LOCAL_DEFAULTS,
    "spark.ui.enabled": "false",
    "spark.log.level": "WARN",
    # One run's streams may run beside another's: no query waits for a scheduler slot.
    "spark.scheduler.mode": "FAIR",
}
# The JIT's optimizing tier (C2) takes a method after 8x the JDK's default calls and loop turns.
# A server runs many short queries of different shapes: their planning code is warm, seldom hot,
# and C2 spends its CPU compiling code that never repays it. Code that is hot, a task's loop over
# many rows, reaches these thresholds in moments.
LATE_C2_OPTIONS = (
    "-XX:Tier4InvocationThreshold=40000 -XX:Tier4MinInvocationThreshold=4800 "
    "-XX:Tier4CompileThreshold=120000 -XX:Tier4BackEdgeThreshold=320000"
)


class SparkServerError(RuntimeError):
    """The Spark Connect server could not be started."""


def secret(setting: str) -> bool:
    """Whether a Spark setting holds a credential (a metastore's password, an S3A secret key)."""
    name = setting.lower()
    return any(word in name for word in ("password", "secret", "token", "credential"))


class SparkConnectServer(LocalService):
    """A Spark Connect server on a loopback port, started and stopped by this process, which
    also serves SQL to JDBC and ODBC clients (HiveServer2's protocol) on ``sql_port``.

    Use it as a context manager::

        with SparkConnectServer() as server:
            print(server.url)  # sc://127.0.0.1:PORT
            print(server.jdbc_url)  # jdbc:hive2://127.0.0.1:SQL_PORT/default
    """

    name = "Spark Connect server"
    error = SparkServerError
    stop_timeout_s = 30.0

    def __init__(
        self,
        port: int | None = None,
        host: str = LOOPBACK,
        master: str = "local[*]",
        conf: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float = 120.0,
        keep_log: bool = False,
        log_file: Path | None = None,
        daemon_idle_s: float = 300.0,
        java_options: str = "",
        metastore: str | None = None,
        sql_port: int | None = None,
    ) -> None:
        """Prepare a server.

        Args:
            port: gRPC port to listen on; a free one is chosen when None.
            host: address to listen on (0.0.0.0: every interface, as in a container).
            master: the application's master: local[*], spark://host:7077, ...
            conf: extra Spark settings of the application.
            env: extra environment variables of the server and its Python workers.
            timeout_s: how long to wait for the server to accept connections.
            keep_log: keep the server's log file after a clean stop.
            log_file: append the output to this file (kept) instead of a temporary one.
            daemon_idle_s: end the Python worker daemons a closed session left once they have
                had no worker for this long (see ``python_daemons``).
            java_options: more options of the driver JVM, after the quick-start ones (unless
                ``conf`` sets ``spark.driver.extraJavaOptions`` itself).
            metastore: the catalog's metastore (a folder or a PostgreSQL URL,
                ``resources.metastore``); ``LAKEHOUSE_METASTORE`` when None.
            sql_port: the SQL endpoint's port (0: a free one); none when None. With
                ``LAKEHOUSE_SQL_PASSWORD`` in the environment, it takes only that password.
        """
        super().__init__(timeout_s, keep_log, log_file)
        self.port = port if port is not None else free_port()
        self.sql_port = free_port() if sql_port == 0 else sql_port
        self.host = host
        self.master = master
        self.conf = dict(conf or {})
        # The driver maps Spark's classes from the installed class archive when there is one (a
        # faster start) and keeps the full JIT with C2 later than the JDK's default
        # (``LATE_C2_OPTIONS``): the quick tier alone suits a run of seconds, but a server works
        # for minutes, long enough for C2 to repay itself.
        archive = quick_start_options(DEFAULT_ARCHIVE, quick_jit=False)
        self.metastore = metastore or configured_metastore()
        derby = metastores.java_options(self.metastore)
        agent = delta_agent_option()
        options = " ".join(filter(None, [archive, LATE_C2_OPTIONS, derby, agent, java_options]))
        self.conf.setdefault("spark.driver.extraJavaOptions", options)
        self.env = dict(env or {})
        self.daemon_idle_s = daemon_idle_s
        self._reaper: DaemonReaper | None = None

    @property
    def url(self) -> str:
        """The ``SPARK_REMOTE`` URL clients connect to."""
        host = LOOPBACK if self.host == "0.0.0.0" else self.host
        return f"sc://{host}:{self.port}"

    @property
    def jdbc_url(self) -> str:
        """The SQL endpoint's JDBC URL (HiveServer2's protocol)."""
        host = LOOPBACK if self.host == "0.0.0.0" else self.host
        return f"jdbc:hive2://{host}:{self.sql_port}/default"

    @property
    def address(self) -> str:
        return self.url

    def diagnosis(self, output: str) -> str:
        """A start that failed in the catalog's metastore names the setting and the cause."""
        if "HiveMetaStore" not in output:
            return ""
        causes = [line for line in output.splitlines() if line.startswith("Caused by: ")]
        cause = causes[-1].removeprefix("Caused by: ") if causes else "see its output"
        return (
            f"It could not use its catalog's metastore {metastores.shown(self.metastore)} "
            f"({ENV_METASTORE}): {cause}."
        )

    @property
    def also(self) -> str:
        if self.sql_port is None:
            return ""
        return f"Its SQL endpoint (JDBC, ODBC, BI tools): {self.jdbc_url}"

    def start(self) -> SparkConnectServer:
        """Start the server and wait until it accepts connections; its streaming queries and
        Python workers end with it.

        Raises:
            SparkServerError: the port is taken, or the server exited or did not answer in time.
        """
        if port_is_taken(LOOPBACK, self.port):
            raise SparkServerError(
                f"Cannot start a Spark Connect server: port {self.port} is already in use. "
                "Choose another port, or set SPARK_REMOTE to the server listening there."
            )
        if self.sql_port is not None and port_is_taken(LOOPBACK, self.sql_port):
            raise SparkServerError(
                f"Cannot start a Spark Connect server: its SQL port {self.sql_port} is already in "
                "use. Choose another (`lakehouse spark-server --sql-port`)."
            )
        env = {
            **without_connect(os.environ),  # the server is the application, not a client of one
            "SPARK_HOME": str(spark_home()),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": LOOPBACK,
            **self.env,
        }
        try:
            auth_jar = sql_auth.required_jar(env) if self.sql_port is not None else None
            metastores.prepare(self.metastore)
        except (
            sql_auth.SqlAuthUnavailable,
            metastores.MetastoreUnavailable,
            derby.MetastoreInUse,
        ) as error:
            raise SparkServerError(str(error)) from error
        # Every jar on the JVM's class path too: the threads of the SQL endpoint that open a
        # client's session load its catalog (Delta's) from there, not from spark.jars.
        env.update(driver_class_path([*pinned_jars(), *filter(None, [auth_jar])], env))
        ports = [port for port in (self.port, self.sql_port) if port is not None]
        with tempfile.TemporaryDirectory() as folder:  # read by the server as it starts
            command = self._command(auth_jar, Path(folder) / "secrets.properties", lake_root(env))
            self._launch(command, lambda: all(port_is_taken(LOOPBACK, p) for p in ports), env)
        assert self.pid is not None
        self._reaper = DaemonReaper(self.pid, self.daemon_idle_s).start()
        if not metastores.is_postgres(self.metastore):
            derby.record_server(self.metastore, self.url)
        return self

    def _command(self, sql_auth_jar: Path | None, secrets_file: Path, root: str) -> list[str]:
        """The server's ``spark-submit`` command line: Spark Connect on ``host:port`` and, with a
        ``sql_port``, SQL (HiveServer2's protocol) there, which with ``sql_auth_jar`` takes only
        the user and password of the server's environment (``lakehouse_tools.sql_auth``). The
        settings that hold a credential (``secret``) are written to ``secrets_file``, readable by
        this user alone, not onto the command line that any user's ``ps`` shows. ``root``: the
        lake root whose warehouse folder a shared metastore's new schemas take."""
        settings = {
            **SERVER_DEFAULTS,
            **jvm_settings(),
            **metastores.spark_settings(self.metastore, root=root),
            **self.conf,
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.port),
        }
        # HiveServer2's own settings, given as its start script gives them.
        hive: dict[str, str] = {}
        if self.sql_port is not None:
            plugins = [self.conf.get("spark.plugins"), CONNECT_PLUGIN]
            settings["spark.plugins"] = ",".join(filter(None, plugins))
            hive = {
                "hive.server2.thrift.bind.host": self.host,
                "hive.server2.thrift.port": str(self.sql_port),
            }
        if self.sql_port is not None and sql_auth_jar is not None:
            settings["spark.jars"] = f"{settings['spark.jars']},{sql_auth_jar}"
            hive.update(sql_auth.HIVE_SETTINGS)
        server_class = CONNECT_SERVER_CLASS if self.sql_port is None else SQL_SERVER_CLASS
        command = [str(spark_home() / "bin" / "spark-submit"), "--class", server_class]
        command += ["--master", self.master, "--name", "lakehouse-connect"]
        hidden = {key: value for key, value in settings.items() if secret(key)}
        if hidden:
            write_properties(secrets_file, hidden)
            command += ["--properties-file", str(secrets_file)]
        for key, value in settings.items():
            if key not in hidden:
                command += ["--conf", f"{key}={value}"]
        command.append("spark-internal")
        for key, value in hive.items():
            command += ["--hiveconf", f"{key}={value}"]
        return command

    def stop(self) -> None:
        if not metastores.is_postgres(self.metastore):
            derby.forget_server(self.metastore, self.url)
        if self._reaper is not None:
            self._reaper.stop()
            self._reaper = None
        super().stop()
