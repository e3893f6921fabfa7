"""Benchmark: the lake on an S3 endpoint beside the lake in a local folder, in one run.

What it measures
----------------
One warm Spark Connect server and one local S3 server (S3Proxy on loopback, as in the tests) serve
two lakes: one in a temporary folder, one at ``s3a://bench/...`` on the endpoint. The endpoint
is on this machine, so the figures are the cost of the S3A connector, Delta's S3 log store and
the endpoint's own work, not of a network.

1. Bronze ingest: ``--records`` heart-rate records (one topic, four partitions, on the embedded
   broker) into bronze by the project's bronze asset, each lake a new table and checkpoint
   reading the same topic; after one untimed run (the server's first queries), ``--rounds``
   times, the lakes taking turns (folder first, then S3 first), so a noisy machine's drift falls
   on both. Each figure is the run's wall time.
2. The incremental-cost probe (``incremental_cost.py``) with the folder as its first lake and S3 as
   its second: both filled with ``--history`` days of sample data, then ``--rounds`` new days each,
   taking turns; per step and in total, the median and the ratio S3 / folder.

Usage::

    .venv/bin/python benchmarks/object_storage.py [--records 1000000] [--history 7] [--rounds 2]
        [--only bronze|graph]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
import dagster as dg  # noqa: E402

from benchmarks.bronze_ingest import produce  # noqa: E402
from benchmarks.incremental_cost import lake, measure, report  # noqa: E402
from benchmarks.lake_schemas import lake_schemas, own_metastore  # noqa: E402
from lakehouse_assets.constants import BRONZE, asset_key  # noqa: E402
from lakehouse_assets.fitness.names import TOPIC_BPM  # noqa: E402
from lakehouse_assets.fitness.pipeline import bronze_kafka_assets  # noqa: E402
from lakehouse_tools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_tools.s3_endpoint import S3Endpoint  # noqa: E402
from lakehouse_tools.spark_server import SparkConnectServer  # noqa: E402
from resources import ENV_SPARK_REMOTE, KafkaResource, SparkResource, build_resources  # noqa: E402

own_metastore()  # before any Spark starts: the benchmark's catalog is its own

BUCKET = "bench"
BPM_ASSET = next(a for a in bronze_kafka_assets if a.key == asset_key(BRONZE, TOPIC_BPM))


def bronze_seconds(bootstrap: str, remote: str, root: str) -> float:
    """Seconds of one bronze run reading the whole topic into a new lake at ``root``."""
    env = {"KAFKA_BOOTSTRAP_SERVERS": bootstrap, "LAKEHOUSE_ROOT": root, ENV_SPARK_REMOTE: remote}
    env.update(lake_schemas())
    resources = build_resources(env)
    started = time.monotonic()
    dg.materialize([BPM_ASSET], resources=resources)
    return time.monotonic() - started


def bronze_ingest(remote: str, roots: dict[str, str], records: int, rounds: int) -> None:
    """Time the bronze runs of ``records`` records into each lake, taking turns; print them."""
    with EmbeddedBroker() as broker:
        KafkaResource(bootstrap_servers=broker.bootstrap_servers).create_topic(TOPIC_BPM, 4)
        produce(broker.bootstrap_servers, records)
        warm_up = bronze_seconds(broker.bootstrap_servers, remote, f"{roots['folder']}/warm-up")
        print(f"warm-up (untimed): bronze into a folder lake in {warm_up:.1f} s")
        seconds: dict[str, list[float]] = {label: [] for label in roots}
        for round_ in range(rounds):
            order = list(roots) if round_ % 2 == 0 else list(reversed(roots))
            for label in order:
                root = f"{roots[label]}/bronze-{round_}"
                seconds[label].append(bronze_seconds(broker.bootstrap_servers, remote, root))
                print(f"round {round_ + 1}: bronze into the {label} lake in "
                      f"{seconds[label][-1]:.1f} s")  # fmt: skip
    folder, s3 = (statistics.median(seconds[label]) for label in roots)
    print(f"\nbronze, {records:,} records: folder {folder:.1f} s, S3 {s3:.1f} s, "
          f"ratio S3 / folder {s3 / folder:.2f}x\n")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--history", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=("bronze", "graph"), help="run one part alone")
    args = parser.parse_args()

    with S3Endpoint(buckets=[BUCKET]) as endpoint, tempfile.TemporaryDirectory() as folder:
        os.environ.update(endpoint.environment())  # before the server starts: its S3A settings
        roots = {"folder": folder, "S3": f"s3a://{BUCKET}/{uuid.uuid4().hex}"}
        with SparkConnectServer() as server:
            try:
                if args.only != "graph":
                    bronze_ingest(server.url, roots, args.records, args.rounds)
                if args.only != "bronze":
                    incremental(server.url, roots, args)
            finally:  # release the session while its server runs (at exit it would retry)
                SparkResource(remote=server.url).get_session().stop()


def incremental(remote: str, roots: dict[str, str], args: argparse.Namespace) -> None:
    """incremental_cost.py's probe with a folder lake and an S3 lake of the same history."""
    instance = dg.DagsterInstance.ephemeral()
    with (
        lake("folder", args.history, remote, f"{roots['folder']}/graph") as local,
        lake("S3", args.history, remote, f"{roots['S3']}/graph") as s3,
    ):
        measure(local, s3, args.users, args.rounds, instance)
        report(local, s3)


if __name__ == "__main__":
    main()
