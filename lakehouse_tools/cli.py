"""The ``lakehouse`` command: the demo, the embedded services, and the lake's admin commands."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from lakehouse_tools import sql_auth
from lakehouse_tools.admin import migrate, produce_sample, profile, replay, sources, sql
from lakehouse_tools.broker import DEFAULT_BROKER_PORT, EmbeddedBroker, EmbeddedBrokerError
from lakehouse_tools.demo import demo
from lakehouse_tools.kafka_connect import KafkaConnectError
from lakehouse_tools.postgres import PostgresServerError
from lakehouse_tools.service import LocalService, local_service
from lakehouse_tools.spark_server import (
    DEFAULT_CONNECT_PORT,
    DEFAULT_SQL_PORT,
    SparkConnectServer,
    SparkServerError,
)
from resources import ENV_KAFKA_BOOTSTRAP_SERVERS, ENV_SPARK_MASTER, ENV_SPARK_REMOTE, spark_conf
from resources.derby import MetastoreInUse
from resources.metastore import MetastoreSettingError, MetastoreUnavailable
from resources.object_store import LakeRootUnreachable
from resources.settings import DEFAULT_SPARK_MASTER
from resources.spark_connect import SparkConnectUnreachable
from resources.spark_jvm import SparkJarsMissing

SQL_PORT_HELP = (
    f"the Spark server's SQL endpoint's port, for JDBC and ODBC clients and BI tools (default "
    f"{DEFAULT_SQL_PORT}; 0: a free one)"
)


def serve(service: LocalService, variable: str) -> None:
    """Run ``service`` in the foreground until interrupted (Ctrl-C or SIGTERM); its log is kept."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leave the block: the service stops
    print(f"Starting the {service.name}...", file=sys.stderr, flush=True)
    with service:
        print(f"The {service.name} is listening on {service.address}; Ctrl-C stops it.")
        if service.also:
            print(service.also)
        print(f"Its log: {service.log_path}")
        print(f"export {variable}={service.address}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


def dev(port: int, sql_port: int) -> None:
    """`dagster dev` with every run a client of one Spark Connect server (started unless
    SPARK_REMOTE names one), which serves SQL on ``sql_port``."""
    import subprocess

    from lakehouse_tools.stack import AUTOMATION_SETTLE

    command = [str(Path(sys.executable).parent / "dagster"), "dev", "-w", "workspace.yaml"]
    for name, value in AUTOMATION_SETTLE.items():
        os.environ.setdefault(name, value)
    with (
        local_service(ENV_SPARK_REMOTE, lambda: SparkConnectServer(sql_port=sql_port)),
        contextlib.suppress(KeyboardInterrupt),
    ):
        subprocess.run([*command, "-p", str(port)], check=False)


def spark_archive() -> None:
    """Write the Spark driver's class archive (see ``lakehouse_tools.jvm_archive``)."""
    from lakehouse_tools.jvm_archive import write_archive

    started = time.perf_counter()
    try:
        path = write_archive()
    except RuntimeError as error:
        sys.exit(str(error))
    print(f"Wrote the Spark driver class archive {path} in {time.perf_counter() - started:.0f} s")


def jars() -> None:
    """Resolve the pinned JVM packages (see ``lakehouse_tools.jars``)."""
    from lakehouse_tools import s3proxy
    from lakehouse_tools.jars import JarResolutionError, resolve_all
    from lakehouse_tools.java_classes import build_delta_agent, build_s3_commits

    started = time.perf_counter()
    try:
        resolved = resolve_all()
    except JarResolutionError as error:
        sys.exit(str(error))
    seconds = time.perf_counter() - started
    for user, jars in resolved.items():
        print(f"Resolved {len(jars)} jars for {user} into {jars[0].parent}")
    print(f"Resolved the JVM packages in {seconds:.0f} s")
    s3_commits = build_s3_commits()
    if s3_commits is None:
        print(
            "No javac (a JRE, not a JDK): the classes that commit to s3a:// lakes are not "
            "compiled, and a lake root on S3 is refused until they are"
        )
    else:
        print(f"Compiled the Delta log store and checkpoint files of s3a:// lakes: {s3_commits}")
    try:
        fixed = s3proxy.build()
    except s3proxy.S3ProxyFixError as error:
        sys.exit(str(error))
    if fixed is None:
        print("No javac (a JRE, not a JDK): the tests' S3 server (S3Proxy) lacks its listing fix")
    else:
        print(f"Compiled the listing fix of the tests' S3 server into {fixed}")
    agent = build_delta_agent()
    if agent is None:
        print("No javac (a JRE, not a JDK): Delta snapshots rebuild their state for every answer")
    else:
        print(f"Compiled the Delta agent that answers from a table's checksum: {agent}")
    compiled = sql_auth.build()
    if compiled is None:
        print("No javac (a JRE, not a JDK): the SQL endpoint cannot require a password")
    else:
        print(f"Compiled the SQL endpoint's password check into {compiled}")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``lakehouse`` command."""
    parser = argparse.ArgumentParser(prog="lakehouse", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run_demo = commands.add_parser("demo", help="sample data through the whole asset graph")
    sample = commands.add_parser(
        "produce-sample", help="sample events into Kafka and landing files into the lake"
    )
    for sub in (run_demo, sample):
        sub.add_argument("--users", type=int, default=20, help="number of users (default 20)")
        sub.add_argument("--days", type=int, default=2, help="number of days (default 2)")
    run_broker = commands.add_parser("broker", help="run the embedded Kafka broker")
    run_broker.add_argument("--port", type=int, default=DEFAULT_BROKER_PORT)
    run_broker.add_argument(
        "--data",
        type=Path,
        default=Path(".lakehouse") / "kafka",
        help="the broker's records, kept across restarts (default .lakehouse/kafka, as `up`'s)",
    )
    run_server = commands.add_parser("spark-server", help="run a Spark Connect server")
    run_server.add_argument("--port", type=int, default=DEFAULT_CONNECT_PORT)
    run_server.add_argument("--host", default="127.0.0.1", help="address to listen on")
    run_server.add_argument("--sql-port", type=int, default=DEFAULT_SQL_PORT, help=SQL_PORT_HELP)
    run_server.add_argument(
        "--master", default=os.environ.get(ENV_SPARK_MASTER, DEFAULT_SPARK_MASTER)
    )
    run_dev = commands.add_parser("dev", help="`dagster dev` on a Spark Connect server")
    run_dev.add_argument("--port", type=int, default=3000, help="the UI's port (default 3000)")
    run_dev.add_argument("--sql-port", type=int, default=DEFAULT_SQL_PORT, help=SQL_PORT_HELP)
    run_up = commands.add_parser(
        "up", help="the production shape: PostgreSQL, broker, Spark Connect, daemon, webserver"
    )
    run_up.add_argument("--port", type=int, default=3000, help="the UI's port (default 3000)")
    run_up.add_argument("--host", default="127.0.0.1", help="the UI's address")
    run_up.add_argument("--sql-port", type=int, default=DEFAULT_SQL_PORT, help=SQL_PORT_HELP)
    run_up.add_argument(
        "--home", type=Path, default=Path(".lakehouse"), help="state and logs (default .lakehouse)"
    )
    run_up.add_argument(
        "--s3",
        action="store_true",
        help="the lake on object storage: LAKEHOUSE_ROOT (default s3a://lakehouse/lake) on the "
        "endpoint of AWS_ENDPOINT_URL, else on a local S3 endpoint started first (in memory)",
    )
    # The commands that may start a local Spark: quiet unless asked.
    spark_client = argparse.ArgumentParser(add_help=False)
    spark_client.add_argument(
        "--verbose", action="store_true", help="print the log of a local Spark (none by default)"
    )
    commands.add_parser(
        "migrate",
        help="take over a lake written by earlier versions (run once, no run writing)",
        parents=[spark_client],
    )
    commands.add_parser("sources", help="list the declared sources; fail on invalid files")
    run_replay = commands.add_parser(
        "replay",
        help="replay a source's quarantine: its open records parsed again by today's rules",
        parents=[spark_client],
    )
    run_replay.add_argument("source", help="the source (its bronze table), e.g. bpm")
    run_replay.add_argument(
        "--reason", help="only records whose reason matches this SQL LIKE pattern"
    )
    run_replay.add_argument(
        "--since", help="only records bronze ingested at or after this ISO date-time (UTC)"
    )
    run_replay.add_argument(
        "--until", help="only records bronze ingested before this ISO date-time (UTC)"
    )
    run_sql = commands.add_parser(
        "sql",
        help="run a SQL query on the lake's catalog and print its result as a table",
        parents=[spark_client],
    )
    run_sql.add_argument("query", help='e.g. "SELECT count(*) FROM gold.workout_bpm_summary"')
    run_sql.add_argument(
        "--max-rows", type=int, default=100, help="rows printed at most (default 100)"
    )
    commands.add_parser(
        "cdc-demo",
        help="PostgreSQL changes through Debezium's connector and Kafka into silver, checked",
    )
    run_profile = commands.add_parser(
        "profile", help="print the column profile of a table", parents=[spark_client]
    )
    run_profile.add_argument("layer", help="bronze, silver or gold")
    run_profile.add_argument("table", help="the table's name, e.g. heart_rate")
    commands.add_parser(
        "spark-archive", help="write the class archive that makes Spark's driver start sooner"
    )
    commands.add_parser(
        "jars",
        help="resolve the pinned JVM packages (Delta Lake, Spark's Kafka source, Kafka) once",
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            demo(args.users, args.days)
        elif args.command == "produce-sample":
            produce_sample(args.users, args.days)
        elif args.command == "spark-archive":
            spark_archive()
        elif args.command == "jars":
            jars()
        elif args.command == "migrate":
            migrate(args.verbose)
        elif args.command == "sources":
            sources()
        elif args.command == "replay":
            replay(args.source, args.reason, args.since, args.until, args.verbose)
        elif args.command == "sql":
            sql(args.query, args.max_rows, args.verbose)
        elif args.command == "cdc-demo":
            from lakehouse_tools.cdc_demo import cdc_demo

            cdc_demo()
        elif args.command == "profile":
            profile(args.layer, args.table, args.verbose)
        elif args.command == "spark-server":
            conf = spark_conf()  # LAKEHOUSE_SPARK_CONF: the application's settings too
            server = SparkConnectServer(
                args.port, args.host, args.master, conf=conf, keep_log=True, sql_port=args.sql_port
            )
            serve(server, ENV_SPARK_REMOTE)
        elif args.command == "dev":
            dev(args.port, args.sql_port)
        elif args.command == "up":
            from lakehouse_tools.stack import up

            up(args.home, args.port, args.host, args.s3, args.sql_port)
        else:
            broker = EmbeddedBroker(port=args.port, data_dir=args.data, keep_log=True)
            serve(broker, ENV_KAFKA_BOOTSTRAP_SERVERS)
    except (
        EmbeddedBrokerError,
        SparkServerError,
        PostgresServerError,
        KafkaConnectError,
        LakeRootUnreachable,
        MetastoreInUse,
        MetastoreSettingError,
        MetastoreUnavailable,
        SparkConnectUnreachable,
        SparkJarsMissing,
    ) as error:
        sys.exit(str(error))
