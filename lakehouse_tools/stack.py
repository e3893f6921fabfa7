"""`lakehouse up`: the production shape on one machine, each service its own process, as the
compose deployment runs them (docker-compose.yml): PostgreSQL for Dagster's storage, the Kafka
broker, the Spark Connect server, the Dagster code server, dagster-daemon and dagster-webserver.
The Dagster instance is the compose deployment's own file, ``docker/dagster.yaml``; its workspace,
``docker/workspace.yaml``, names the code server.

The Dagster services and why the code server is one of its own: ``dagster_services``.

A service that exits is started again, as compose's ``restart: unless-stopped`` does, on the same
port and with the same data; Ctrl-C or SIGTERM stops them all, the last started first. Each
service's output goes to ``<home>/logs/<service>.log``; ``<home>/services.json`` names each
service's process id and address while the stack runs.

``lakehouse up --s3`` puts the lake on object storage: on the endpoint the ``AWS_*`` variables
name, or, when they name none, on a local S3 endpoint the stack starts first (``s3_endpoint``,
a dev dependency). That one keeps its objects in memory, so each such stack starts anew: its
broker's records and Dagster's storage are reset with it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Self, TypeVar

import yaml

from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.dagster_services import (
    ENV_CODE_SERVER_HOST,
    ENV_CODE_SERVER_PORT,
    DagsterProcess,
    code_server_command,
    daemon_command,
    daemons_beat,
    serves_code,
    serves_http,
    webserver_command,
)
from lakehouse_tools.postgres import PostgresServer
from lakehouse_tools.s3_endpoint import S3Endpoint
from lakehouse_tools.service import LOOPBACK, LocalService, free_port
from lakehouse_tools.spark_server import DEFAULT_SQL_PORT, SparkConnectServer
from resources import (
    ENV_KAFKA_BOOTSTRAP_SERVERS,
    ENV_LAKEHOUSE_ROOT,
    ENV_SPARK_REMOTE,
    object_store,
    spark_conf,
)
from resources.settings import ENV_METASTORE, max_concurrent_runs

S3_BUCKET = "lakehouse"  # the local S3 endpoint's bucket (lakehouse up --s3)
INSTANCE_FILE = Path("docker") / "dagster.yaml"  # the compose deployment's Dagster instance
METASTORE_DATABASE = "metastore"  # the catalog's, in the stack's PostgreSQL
# Dagster's automation tick takes the newest event id, then reads each asset's latest
# materialization from a table that a run updates just after writing the event: a materialization
# written between the two reads falls behind the cursor the tick keeps, and its downstream never
# follows (the fault matrix saw silver/gym_logs left behind bronze once, on a loaded machine).
# Dagster's own remedy, opt-in: wait this long after taking the id, then read no event beyond it.
AUTOMATION_SETTLE = {"DAGSTER_AUTOMATION_TICK_SETTLE_SECONDS": "2"}
ServiceT = TypeVar("ServiceT", bound=LocalService)
RESTART_DELAY_S = (1.0, 60.0)  # the first and the longest wait before a service starts again


class Stack:
    """The services of the production shape, started in order and kept running.

    Services whose address is already in the environment (``DAGSTER_POSTGRES_HOST``,
    ``KAFKA_BOOTSTRAP_SERVERS``, ``SPARK_REMOTE``) are used, not started. The embedded broker keeps
    its records in ``<home>/kafka``, so a stack started again goes on where it stopped; when that
    folder is new (a new cluster), the lake (``LAKEHOUSE_ROOT``, default ``<home>/lake``) and
    Dagster's database are reset too, since their offsets and history would not match it.
    """

    def __init__(
        self,
        home: Path,
        port: int = 3000,
        host: str = LOOPBACK,
        s3: bool = False,
        sql_port: int = DEFAULT_SQL_PORT,
    ) -> None:
        """``sql_port``: the Spark server's SQL endpoint's (0: a free one), on loopback."""
        self.home = home.resolve()
        self.sql_port = sql_port
        self.s3 = s3
        self.local_s3: dict[str, str] = {}  # the local S3 endpoint's variables, once started
        self.dagster_home = self.home / "dagster"
        self.port, self.host = port, host
        self.services: list[LocalService] = []
        self.env = os.environ  # the services inherit what the stack adds
        self._stopping = False

    def _log(self, service: str) -> Path:
        return self.home / "logs" / f"{service}.log"

    def start(self) -> Self:
        """Start every service, in dependency order; stop those started if one fails."""
        try:
            self._start_all()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_all(self) -> None:
        fresh = self._starts_new_broker()
        if self.s3 and not object_store.endpoint(self.env):
            s3 = S3Endpoint(buckets=[S3_BUCKET], log_file=self._log("s3"))
            self.local_s3 = self._run(s3).environment()
            self.env.update(self.local_s3)
            shutil.rmtree(self.kafka_data, ignore_errors=True)  # the lake it fed is gone
            fresh = ENV_KAFKA_BOOTSTRAP_SERVERS not in self.env
        if self.s3:
            self.env.setdefault(ENV_LAKEHOUSE_ROOT, f"s3a://{S3_BUCKET}/lake")
        self._prepare_home(fresh)
        if "DAGSTER_POSTGRES_HOST" not in self.env:
            data = self.home / "postgres"
            postgres = self._run(PostgresServer(data_dir=data, log_file=self._log("postgres")))
            self.env.update(postgres.environment)
            # The catalog's metastore: a database of its own beside Dagster's.
            postgres.create_database(METASTORE_DATABASE)
            self.env.setdefault(ENV_METASTORE, postgres.database_url(METASTORE_DATABASE))
        # Beside a PostgreSQL of the user's, an embedded metastore with the stack's other state.
        self.env.setdefault(ENV_METASTORE, str(self.home / "metastore"))
        if ENV_KAFKA_BOOTSTRAP_SERVERS not in self.env:
            broker = EmbeddedBroker(data_dir=self.kafka_data, log_file=self._log("kafka"))
            self._run(broker)
            self.env[ENV_KAFKA_BOOTSTRAP_SERVERS] = broker.address
        if ENV_SPARK_REMOTE not in self.env:
            server = SparkConnectServer(
                conf=spark_conf(self.env), log_file=self._log("spark"), sql_port=self.sql_port
            )
            spark = self._run(server)
            self.env[ENV_SPARK_REMOTE] = spark.address
        code_port = free_port()
        self.env.update({ENV_CODE_SERVER_HOST: LOOPBACK, ENV_CODE_SERVER_PORT: str(code_port)})
        self._run(
            DagsterProcess(
                "Dagster code server", code_server_command(LOOPBACK, code_port),
                serves_code(LOOPBACK, code_port), f"{LOOPBACK}:{code_port}",
                self._log("dagster-code-server"),
            )
        )  # fmt: skip
        self._run(
            DagsterProcess(
                "dagster-daemon", daemon_command(), daemons_beat(self.dagster_home),
                "sensors, schedules, automation, the run queue", self._log("dagster-daemon"),
            )
        )  # fmt: skip
        url = f"http://{LOOPBACK if self.host == '0.0.0.0' else self.host}:{self.port}"
        self._run(
            DagsterProcess(
                "dagster-webserver", webserver_command(self.host, self.port),
                serves_http(f"{url}/server_info"), url, self._log("dagster-webserver"),
            )
        )  # fmt: skip

    def _starts_new_broker(self) -> bool:
        """Whether the stack starts an embedded broker on a folder it never used: a new cluster."""
        return ENV_KAFKA_BOOTSTRAP_SERVERS not in self.env and not self.kafka_data.exists()

    @property
    def kafka_data(self) -> Path:
        """The embedded broker's records."""
        return self.home / "kafka"

    def _prepare_home(self, new_broker: bool) -> None:
        """The instance file and the lake's location; with a new embedded broker, an empty
        start."""
        from lakehouse_tools.demo import prepare_demo_lake

        lake = object_store.absolute(self.env.get(ENV_LAKEHOUSE_ROOT) or str(self.home / "lake"))
        object_store.check_root(lake)
        if new_broker:
            prepare_demo_lake(lake, embedded=True)
            shutil.rmtree(self.home / "postgres", ignore_errors=True)
        self.dagster_home.mkdir(parents=True, exist_ok=True)
        self._write_instance(self.dagster_home / "dagster.yaml")
        self.env.update({"DAGSTER_HOME": str(self.dagster_home), ENV_LAKEHOUSE_ROOT: lake})
        for name, value in AUTOMATION_SETTLE.items():
            self.env.setdefault(name, value)

    def _write_instance(self, path: Path) -> None:
        """The compose deployment's instance file, with ``LAKEHOUSE_MAX_CONCURRENT_RUNS`` if set."""
        try:
            limit = max_concurrent_runs(self.env)
        except ValueError as error:
            raise SystemExit(str(error)) from None
        if limit is None:
            shutil.copy(INSTANCE_FILE, path)
            return
        instance = yaml.safe_load(INSTANCE_FILE.read_text())
        instance["concurrency"]["runs"]["max_concurrent_runs"] = limit
        path.write_text(yaml.safe_dump(instance, sort_keys=False))

    def _run(self, service: ServiceT) -> ServiceT:
        print(f"Starting the {service.name}...", flush=True)
        service.start()
        print(f"The {service.name} is up: {service.address}", flush=True)
        if service.also:
            print(service.also, flush=True)
        self.services.append(service)
        self._write_state()
        return service

    def _write_state(self) -> None:
        state: dict[str, object] = {
            s.name: {"pid": s.pid, "address": s.address} for s in self.services
        }
        # What a client needs: the producer (broker, lake) and the `dagster` CLI (the instance).
        client = (ENV_KAFKA_BOOTSTRAP_SERVERS, ENV_LAKEHOUSE_ROOT, "DAGSTER_HOME")
        state["environment"] = {
            k: v for k, v in self.env.items() if k in client or k.startswith("DAGSTER_POSTGRES_")
        } | self.local_s3
        (self.home / "services.json").write_text(json.dumps(state, indent=2) + "\n")

    def supervise(self) -> None:
        """Start again, in place, each service that exited; until ``stop``."""
        delays = {id(s): RESTART_DELAY_S[0] for s in self.services}
        while not self._stopping:
            for service in self.services:
                code = service.returncode
                if code is None or self._stopping:
                    continue
                print(f"The {service.name} exited with code {code}; starting it again", flush=True)
                service.stop()
                try:
                    service.start()
                    delays[id(service)] = RESTART_DELAY_S[0]
                    print(f"The {service.name} is back: {service.address}", flush=True)
                except RuntimeError as error:
                    print(f"{error}\nRetrying in {delays[id(service)]:.0f} s", flush=True)
                    time.sleep(delays[id(service)])
                    delays[id(service)] = min(2 * delays[id(service)], RESTART_DELAY_S[1])
                self._write_state()
            time.sleep(1.0)

    def stop(self) -> None:
        """Stop every service, the last started first."""
        self._stopping = True
        for service in reversed(self.services):
            print(f"Stopping the {service.name}", flush=True)
            service.stop()
        self.services.clear()
        (self.home / "services.json").unlink(missing_ok=True)


def up(home: Path, port: int, host: str, s3: bool, sql_port: int) -> None:
    """The production shape: every service its own process, restarted when it exits, until
    Ctrl-C or SIGTERM: the `lakehouse up` command."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leave the block: the services stop
    # Ctrl-C stops it even when started where SIGINT is ignored (a shell's background job).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    stack = Stack(home, port, host, s3, sql_port)
    try:
        stack.start()
        print(f"The lakehouse is up: the Dagster UI is at http://{host}:{port}; Ctrl-C stops it.")
        print(f"Logs in {stack.home / 'logs'}. To produce the sample data from another shell:")
        for name in (ENV_KAFKA_BOOTSTRAP_SERVERS, ENV_LAKEHOUSE_ROOT, *stack.local_s3):
            print(f"  export {name}={os.environ[name]}")
        print("  lakehouse produce-sample", flush=True)
        stack.supervise()
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()
