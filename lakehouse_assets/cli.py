"""The ``lakehouse`` command: embedded broker, sample data, and the end-to-end demo."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse_assets.admin import migrate, produce_sample, profile, sources
from lakehouse_assets.devtools.broker import (
    DEFAULT_BROKER_PORT,
    EmbeddedBroker,
    EmbeddedBrokerError,
)
from lakehouse_assets.devtools.postgres import PostgresServerError
from lakehouse_assets.devtools.service import LocalService
from lakehouse_assets.devtools.spark_server import (
    DEFAULT_CONNECT_PORT,
    SparkConnectServer,
    SparkServerError,
)
from resources import ENV_KAFKA_BOOTSTRAP_SERVERS, ENV_LAKEHOUSE_ROOT, ENV_SPARK_REMOTE

if TYPE_CHECKING:
    import dagster as dg

NAME_WIDTH = 40  # of the table column in the printed row counts
# Marks a lake filled from a demo's own embedded broker: safe to reset on the next demo.
DEMO_MARKER = ".embedded-broker-demo"
# The demo's lake when LAKEHOUSE_ROOT is unset: its own, apart from `lake`, which `make dev` and
# `produce-sample` fill from `make broker`'s broker (another cluster than the demo's).
DEMO_LAKE = "demo-lake"


@contextlib.contextmanager
def local_service(variable: str, service: Callable[[], LocalService]) -> Iterator[str]:
    """The address in the environment variable ``variable`` when it is set; otherwise a local
    ``service`` for the duration of the block, its address exported in ``variable`` (so the
    resources and the processes the block starts use it)."""
    configured = os.environ.get(variable)
    if configured:
        yield configured
        return
    starting = service()
    print(f"Starting the {starting.name}...", flush=True)
    with starting as running:
        os.environ[variable] = running.address
        print(f"The {running.name} is listening on {running.address}", flush=True)
        try:
            yield running.address
        finally:
            del os.environ[variable]


def prepare_demo_lake(root: Path, embedded: bool) -> None:
    """Reset a lake left by an earlier demo on the embedded broker; never touch any other lake.

    Each demo starts a new embedded broker (in a temporary folder), so the checkpoints of an
    earlier embedded demo point at offsets the new broker does not have.
    """
    if not embedded:
        return
    if root.exists() and any(root.iterdir()):
        if not (root / DEMO_MARKER).exists():
            raise SystemExit(
                f"The lake at {root} was not made by an embedded-broker demo, and its stream "
                "checkpoints would not match the demo's new broker. Set LAKEHOUSE_ROOT to an "
                "empty folder, or KAFKA_BOOTSTRAP_SERVERS to the Kafka this lake was filled from."
            )
        print(f"Resetting the demo lake at {root} (the demo's broker starts empty)")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / DEMO_MARKER).write_text("made by `lakehouse demo` on the embedded broker\n")


def demo(users: int, days: int) -> None:
    """Sample data through the whole asset graph; prints row counts and both gold reports."""
    from lakehouse_assets import sample_data
    from resources import build_resources

    root = Path(os.environ.setdefault(ENV_LAKEHOUSE_ROOT, DEMO_LAKE))
    prepare_demo_lake(root, embedded=ENV_KAFKA_BOOTSTRAP_SERVERS not in os.environ)
    with (
        local_service(ENV_KAFKA_BOOTSTRAP_SERVERS, EmbeddedBroker) as bootstrap_servers,
        # The full JIT: the server works through the whole graph (minutes), see quick_jit.
        local_service(
            ENV_SPARK_REMOTE,
            functools.partial(SparkConnectServer, quick_start=True, quick_jit=False),
        ),
    ):
        sample = sample_data.generate(users, days)
        sample_data.write_landing(root, sample.files)
        counts = sample_data.produce(bootstrap_servers, sample.messages)
        print(f"Sample data: {counts} Kafka records, {len(sample.files)} landing files")
        started = time.monotonic()
        resources = build_resources()  # after the embedded broker set KAFKA_BOOTSTRAP_SERVERS
        results = materialize_graph(resources)
        print(f"Materialized the asset graph in {time.monotonic() - started:.1f} s")
        for result in results:
            print_row_counts(result)
        if not all(result.success for result in results):
            raise SystemExit("A run failed; see the log above.")
        print_gold_reports(resources)
        resources["spark"].get_session().stop()  # releases the session while the server runs


def materialize_graph(
    resources: dict[str, Any],
    days: tuple[date, date] | None = None,
    instance: dg.DagsterInstance | None = None,
) -> list[dg.ExecuteInProcessResult]:
    """Bronze and silver in one run, then gold for ``days`` (first, last; by default every day
    silver holds) in one run."""
    import dagster as dg

    from lakehouse_assets.constants import BRONZE, GOLD, SILVER
    from lakehouse_assets.definitions import all_assets

    instance = instance or dg.DagsterInstance.ephemeral()
    logging = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    run = functools.partial(
        dg.materialize, all_assets, instance=instance, resources=resources, run_config=logging
    )
    results = [run(selection=dg.AssetSelection.groups(BRONZE, SILVER))]
    days = days or silver_days(resources)
    if days:
        tags = {
            "dagster/asset_partition_range_start": days[0].isoformat(),
            "dagster/asset_partition_range_end": days[1].isoformat(),
        }
        results.append(run(selection=dg.AssetSelection.groups(GOLD), tags=tags))
    return results


def silver_days(resources: dict[str, Any]) -> tuple[date, date] | None:
    """The first and last day of the workouts and gym visits silver holds."""
    from pyspark.sql import functions as F

    from lakehouse_assets.constants import COMPLETED_WORKOUTS, GYM_LOGS, SILVER

    spark, lake = resources["spark"].get_session(), resources["lake"]
    days = (
        lake.read(spark, SILVER, COMPLETED_WORKOUTS)
        .select(F.to_date("start_time").alias("day"))
        .unionByName(lake.read(spark, SILVER, GYM_LOGS).select(F.to_date("login").alias("day")))
        .agg(F.min("day"), F.max("day"))
        .first()
    )
    return (days[0], days[1]) if days and days[0] else None


def print_gold_reports(resources: dict[str, Any]) -> None:
    """Print both gold tables."""
    from lakehouse_assets.constants import GOLD, GYM_SUMMARY, WORKOUT_BPM_SUMMARY

    spark, lake = resources["spark"].get_session(), resources["lake"]
    for table, order in ((WORKOUT_BPM_SUMMARY, ["date", "user_id", "workout_id", "session_id"]),
                         (GYM_SUMMARY, ["date", "gym", "mac_address"])):  # fmt: skip
        report = lake.read(spark, GOLD, table).orderBy(*order)
        print(f"\n{GOLD}.{table} ({report.count()} rows)")
        report.show(report.count(), truncate=False)


def print_row_counts(result: dg.ExecuteInProcessResult) -> None:
    """Print ``layer.table  rows  seconds`` for each table a run materialized: its latest row
    count and the wall time of the step that wrote it."""
    seconds = step_seconds(result)
    latest = {e.asset_key: e for e in _materializations(result) if e.asset_key}
    print(f"{'table':<{NAME_WIDTH}}{'rows':>12}{'seconds':>10}")
    for key in sorted(latest, key=lambda k: k.to_user_string()):
        event = latest[key]
        rows = event.materialization.metadata.get("dagster/row_count")
        took = seconds.get(event.step_key or "")
        print(
            f"{'.'.join(key.path):<{NAME_WIDTH}}{rows.value if rows else '-':>12}"
            f"{'-' if took is None else f'{took:.1f}':>10}"
        )


def step_seconds(result: dg.ExecuteInProcessResult) -> dict[str, float]:
    """The wall time of each step of a run that succeeded, by step key."""
    return {
        event.step_key: event.step_success_data.duration_ms / 1000
        for event in result.get_step_success_events()
        if event.step_key
    }


def _materializations(result: dg.ExecuteInProcessResult) -> list[dg.DagsterEvent]:
    return [e for e in result.get_asset_materialization_events() if e.materialization]


def serve(service: LocalService, variable: str) -> None:
    """Run ``service`` in the foreground until interrupted (Ctrl-C or SIGTERM); its log is kept."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leave the block: the service stops
    print(f"Starting the {service.name}...", file=sys.stderr, flush=True)
    with service:
        print(f"The {service.name} is listening on {service.address}; Ctrl-C stops it.")
        print(f"Its log: {service.log_path}")
        print(f"export {variable}={service.address}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


def dev(port: int) -> None:
    """`dagster dev` with every run a client of one Spark Connect server (started unless
    SPARK_REMOTE names one)."""
    import subprocess

    command = [str(Path(sys.executable).parent / "dagster"), "dev", "-w", "workspace.yaml"]
    with (
        local_service(ENV_SPARK_REMOTE, SparkConnectServer),
        contextlib.suppress(KeyboardInterrupt),
    ):
        subprocess.run([*command, "-p", str(port)], check=False)


def spark_archive() -> None:
    """Write the Spark driver's class archive (see ``lakehouse_assets.devtools.jvm_archive``)."""
    from lakehouse_assets.devtools.jvm_archive import write_archive

    started = time.perf_counter()
    try:
        path = write_archive()
    except RuntimeError as error:
        sys.exit(str(error))
    print(f"Wrote the Spark driver class archive {path} in {time.perf_counter() - started:.0f} s")


def jars() -> None:
    """Resolve the pinned JVM packages (see ``lakehouse_assets.devtools.jars``)."""
    from lakehouse_assets.devtools.jars import JarResolutionError, resolve_all

    started = time.perf_counter()
    try:
        resolved = resolve_all()
    except JarResolutionError as error:
        sys.exit(str(error))
    seconds = time.perf_counter() - started
    for user, jars in resolved.items():
        print(f"Resolved {len(jars)} jars for {user} into {jars[0].parent}")
    print(f"Resolved the JVM packages in {seconds:.0f} s")


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
    run_server.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[*]"))
    run_dev = commands.add_parser("dev", help="`dagster dev` on a Spark Connect server")
    run_dev.add_argument("--port", type=int, default=3000, help="the UI's port (default 3000)")
    run_up = commands.add_parser(
        "up", help="the production shape: PostgreSQL, broker, Spark Connect, daemon, webserver"
    )
    run_up.add_argument("--port", type=int, default=3000, help="the UI's port (default 3000)")
    run_up.add_argument("--host", default="127.0.0.1", help="the UI's address")
    run_up.add_argument(
        "--home", type=Path, default=Path(".lakehouse"), help="state and logs (default .lakehouse)"
    )
    commands.add_parser(
        "migrate", help="upgrade the lake's tables written by earlier versions of the lakehouse"
    )
    commands.add_parser("sources", help="list the declared sources; fail on invalid files")
    run_profile = commands.add_parser("profile", help="print the column profile of a table")
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
            migrate()
        elif args.command == "sources":
            sources()
        elif args.command == "profile":
            profile(args.layer, args.table)
        elif args.command == "spark-server":
            server = SparkConnectServer(args.port, args.host, args.master, keep_log=True)
            serve(server, ENV_SPARK_REMOTE)
        elif args.command == "dev":
            dev(args.port)
        elif args.command == "up":
            from lakehouse_assets.devtools.stack import up

            up(args.home, args.port, args.host)
        else:
            broker = EmbeddedBroker(port=args.port, data_dir=args.data, keep_log=True)
            serve(broker, ENV_KAFKA_BOOTSTRAP_SERVERS)
    except (EmbeddedBrokerError, SparkServerError, PostgresServerError) as error:
        sys.exit(str(error))
