"""The ``lakehouse`` command: embedded broker, sample data, and the end-to-end demo."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from resources import ENV_KAFKA_BOOTSTRAP_SERVERS, ENV_LAKEHOUSE_ROOT
from resources.broker import EmbeddedBroker, EmbeddedBrokerError

if TYPE_CHECKING:
    import dagster as dg

DEFAULT_BROKER_PORT = 9092
# Marks a lake filled from the memory-only embedded broker: safe to reset on the next demo.
DEMO_MARKER = ".embedded-broker-demo"


@contextlib.contextmanager
def kafka_for_demo(configured: str | None) -> Iterator[str]:
    """The configured Kafka cluster, or an embedded broker for the duration of the block."""
    if configured:
        yield configured
        return
    with EmbeddedBroker() as broker:
        os.environ[ENV_KAFKA_BOOTSTRAP_SERVERS] = broker.bootstrap_servers
        print(f"Embedded Kafka broker (tansu) on {broker.bootstrap_servers}")
        try:
            yield broker.bootstrap_servers
        finally:
            del os.environ[ENV_KAFKA_BOOTSTRAP_SERVERS]


def prepare_demo_lake(root: Path, embedded: bool) -> None:
    """Reset a lake left by an earlier demo on the embedded broker; never touch any other lake.

    The embedded broker forgets its records when it stops, so the checkpoints of an earlier
    embedded demo point at offsets the new broker does not have.
    """
    if not embedded:
        return
    if root.exists() and any(root.iterdir()):
        if not (root / DEMO_MARKER).exists():
            raise SystemExit(
                f"The lake at {root} was not made by an embedded-broker demo, and its stream "
                "checkpoints would not match the new in-memory broker. Set LAKEHOUSE_ROOT to an "
                "empty folder, or KAFKA_BOOTSTRAP_SERVERS to the Kafka this lake was filled from."
            )
        print(f"Resetting the demo lake at {root} (the embedded broker starts empty)")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / DEMO_MARKER).write_text("made by `lakehouse demo` on the embedded broker\n")


def demo(users: int, days: int) -> None:
    """Produce sample data, materialize the whole asset graph, print every table's row count."""
    from lakehouse_assets import sample_data

    configured = os.environ.get(ENV_KAFKA_BOOTSTRAP_SERVERS)
    root = Path(os.environ.get(ENV_LAKEHOUSE_ROOT, "lake"))
    prepare_demo_lake(root, embedded=not configured)
    with kafka_for_demo(configured) as bootstrap_servers:
        counts = sample_data.produce(bootstrap_servers, sample_data.generate(users, days))
        print(f"Produced sample records: {counts}")
        import dagster as dg

        from lakehouse_assets.definitions import defs

        started = time.monotonic()
        job = defs.resolve_implicit_global_asset_job_def()
        result = job.execute_in_process(
            instance=dg.DagsterInstance.ephemeral(),
            run_config={"loggers": {"console": {"config": {"log_level": "INFO"}}}},
        )
        print(f"Materialized the asset graph in {time.monotonic() - started:.1f} s")
        print_row_counts(result)
    if not result.success:
        raise SystemExit("The run failed; see the log above.")


def print_row_counts(result: dg.ExecuteInProcessResult) -> None:
    """Print ``layer.table  rows`` for each materialized asset of a run."""
    materializations = [e.materialization for e in result.get_asset_materialization_events()]
    print(f"{'table':<30}{'rows':>12}")
    for materialization in sorted(materializations, key=lambda m: m.asset_key.to_user_string()):
        rows = materialization.metadata.get("dagster/row_count")
        name = ".".join(materialization.asset_key.path)
        print(f"{name:<30}{rows.value if rows else '-':>12}")


def broker(port: int) -> None:
    """Run the embedded broker in the foreground until interrupted (Ctrl-C or SIGTERM)."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leave the block: tansu stops too
    with EmbeddedBroker(port=port) as running:
        print(f"Embedded Kafka broker on {running.bootstrap_servers} (listening); Ctrl-C stops it.")
        print(f"export {ENV_KAFKA_BOOTSTRAP_SERVERS}={running.bootstrap_servers}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


def produce_sample(users: int, days: int) -> None:
    """Produce the sample events into the configured Kafka."""
    from lakehouse_assets import sample_data

    servers = os.environ.get(ENV_KAFKA_BOOTSTRAP_SERVERS, f"127.0.0.1:{DEFAULT_BROKER_PORT}")
    counts = sample_data.produce(servers, sample_data.generate(users, days))
    print(f"Produced into {servers}: {counts}")


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``lakehouse`` command."""
    parser = argparse.ArgumentParser(prog="lakehouse", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run_demo = commands.add_parser("demo", help="sample data through the whole asset graph")
    sample = commands.add_parser("produce-sample", help="produce sample events into Kafka")
    for sub in (run_demo, sample):
        sub.add_argument("--users", type=int, default=20, help="number of users (default 20)")
        sub.add_argument("--days", type=int, default=2, help="number of days (default 2)")
    run_broker = commands.add_parser("broker", help="run the embedded Kafka broker")
    run_broker.add_argument("--port", type=int, default=DEFAULT_BROKER_PORT)
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            demo(args.users, args.days)
        elif args.command == "produce-sample":
            produce_sample(args.users, args.days)
        else:
            broker(args.port)
    except EmbeddedBrokerError as error:
        sys.exit(str(error))
