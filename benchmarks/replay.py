"""Benchmark: a replay of the quarantine against the stream that quarantined its records, per
record.

What it measures
----------------
A declared source ``payments`` (fields ``payment_id`` and ``amount``, both ``integer``) on the
embedded broker and a Spark Connect server started as ``make run`` starts it. ``--records``
records (100,000 by default) whose amounts are decimals are produced to its topic, so the
stream's run (bronze, then silver) quarantines every one (``wrong type amount``). The
declaration is then fixed (``amount: number``) and the quarantine replayed: every record reaches
silver, and the quarantine's replay log records each.

Printed per round, per 1,000 records: the stream's run (its bronze step, which reads the records
from Kafka, and its silver step, which quarantines them) and the replay's silver step (which
reads them from bronze, writes them to silver and logs them in the quarantine's replay log),
each a step's wall time from its STEP_SUCCESS event; and two ratios: the replay against the
stream's run (bronze and silver: the records from where they are to where they end), and against
the stream's silver step alone. Each round takes a new lake and topic, and one Dagster instance
for both runs, as a deployment has; the server stays warm. The target of issue 79: the replay at
most as slow per record as the stream.

Usage::

    .venv/bin/python benchmarks/replay.py [--records 100000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
import dagster as dg  # noqa: E402

from benchmarks.lake_schemas import lake_schemas, own_metastore  # noqa: E402
from lakehouse_assets.sources.assets import source_assets  # noqa: E402
from lakehouse_assets.sources.declaration.files import load_declaration  # noqa: E402
from lakehouse_tools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_tools.demo import step_seconds  # noqa: E402
from lakehouse_tools.sample_data import Message, produce  # noqa: E402
from lakehouse_tools.spark_server import SparkConnectServer  # noqa: E402
from resources import ENV_SPARK_REMOTE, build_resources  # noqa: E402

own_metastore()  # before any Spark starts: the benchmark's catalog is its own

DECLARATION = "topic: {topic}\nfields:\n  - {{name: payment_id, type: integer}}\n" \
    "  - {{name: amount, type: {amount}}}\n"  # fmt: skip
STEP = "silver_payments"


def sources(folder: Path, topic: str, amount: str) -> list[Any]:
    path = folder / "payments.yaml"
    path.write_text(DECLARATION.format(topic=topic, amount=amount))
    return source_assets(load_declaration(path))


def one_round(
    folder: Path, remote: str, broker: EmbeddedBroker, records: int, n: int
) -> tuple[float, float, float]:
    """The seconds of the stream's bronze and silver steps and of the replay's silver step, on
    a new lake."""
    topic = f"payments_{n}"
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
        "LAKEHOUSE_ROOT": str(folder / f"lake-{n}"),
        ENV_SPARK_REMOTE: remote,
        **lake_schemas(),
    }
    resources = build_resources(env)
    resources["kafka"].create_topic(topic, partitions=1)
    values = ({"payment_id": i, "amount": i + 0.25} for i in range(records))
    produce(broker.bootstrap_servers, [Message(topic, str(v["payment_id"]), json.dumps(v))
                                       for v in values])  # fmt: skip
    # One instance for the lake, as a deployment has: a run sees the materializations before it.
    instance = dg.DagsterInstance.ephemeral()
    stream = dg.materialize(
        sources(folder, topic, "integer"), resources=resources, instance=instance
    )
    lake = resources["lake"]
    if lake.row_count("silver", "payments_quarantine") != records:
        raise SystemExit("The stream did not quarantine every record")
    replay = dg.materialize(
        sources(folder, topic, "number"),
        resources=resources,
        run_config={"ops": {STEP: {"config": {"replay": {}}}}},
        instance=instance,
    )
    if lake.row_count("silver", "payments") != records:
        raise SystemExit("The replay did not bring every record into silver")
    resources["spark"].get_session().stop()  # the next round's resources open their own
    streamed = step_seconds(stream)
    return streamed["bronze__payments"], streamed[STEP], step_seconds(replay)[STEP]


def main() -> None:
    parser = argparse.ArgumentParser(description="A replay's cost per record against the stream's")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    ratios = []
    with (
        tempfile.TemporaryDirectory(prefix="replay-") as folder,
        SparkConnectServer() as server,  # as `make run` starts it
        EmbeddedBroker() as broker,
    ):
        for n in range(args.rounds):
            bronze, silver, replay = one_round(Path(folder), server.url, broker, args.records, n)
            per = 1000 / args.records
            ratios.append((replay / (bronze + silver), replay / silver))
            print(
                f"round {n + 1}: {args.records} records; per 1,000: stream {bronze * per:.3f} s "
                f"bronze + {silver * per:.3f} s silver, replay {replay * per:.3f} s; replay / "
                f"stream {ratios[-1][0]:.2f}x, replay / stream's silver step {ratios[-1][1]:.2f}x"
            )
    print(
        f"median replay / stream {statistics.median(r[0] for r in ratios):.2f}x (target at most "
        f"1.00x); replay / stream's silver step {statistics.median(r[1] for r in ratios):.2f}x"
    )


if __name__ == "__main__":
    main()
