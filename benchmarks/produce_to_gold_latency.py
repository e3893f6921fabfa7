"""Benchmark: how long a produced record takes to show in gold with the Dagster daemon running.

It starts the embedded broker, a Spark Connect server and ``dagster-daemon`` (a fresh DAGSTER_HOME
with the project's dagster.yaml, a fresh lake; every run is a client of the server, as in
production), keeps a producer sending heart-rate readings in the background, and
then, once per sample, produces one complete workout (start, readings, stop) of a new workout id,
dated today, and polls ``gold/workout_bpm_summary`` until that workout's row appears. Nothing is
materialized by hand: the Kafka lag sensors launch bronze, the automation sensor silver and gold.

It prints each sample's latency and the median and worst. Sensors are evaluated every
``--interval`` seconds (``LAKEHOUSE_SENSOR_INTERVAL_S``). The first sample waits for the
server's first queries; the median is the figure.

Usage::

    .venv/bin/python benchmarks/produce_to_gold_latency.py [--samples 10] [--interval 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
from benchmarks.lake_schemas import lake_schemas, own_metastore  # noqa: E402
from lakehouse_tools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_tools.sample_data import Message, produce  # noqa: E402
from lakehouse_tools.spark_server import SparkConnectServer  # noqa: E402
from resources import ENV_SPARK_REMOTE  # noqa: E402

own_metastore()  # before any Spark starts: the benchmark's catalog is its own

USER_ID, DEVICE_ID = 1, 1001
REGISTRATION = "user_id,device_id,mac_address,registration_timestamp\n1,1001,aa:01,1700000000\n"


def reading(device_id: int, at: int, heartrate: float) -> Message:
    value = {"device_id": device_id, "time": at, "heartrate": heartrate}
    return Message("bpm", str(device_id), json.dumps(value))


def workout(workout_id: int, start: int) -> list[Message]:
    """A 5-minute workout of the user: start, a reading every 10 s, stop."""
    actions = []
    for action, at in (("start", start), ("stop", start + 300)):
        value = {"user_id": USER_ID, "workout_id": workout_id, "session_id": 1}
        value |= {"action": action, "timestamp": at}
        actions.append(Message("workout", str(USER_ID), json.dumps(value)))
    readings = [reading(DEVICE_ID, t, 120.0) for t in range(start + 10, start + 300, 10)]
    return [*actions, *readings]


def background_readings(servers: str, stop: threading.Event) -> None:
    """The generator producing continuously: a reading of another device every 0.2 s."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=20)
    while not stop.is_set():
        message = reading(2002, int(time.time()), 70.0)
        producer.send(message.topic, key=b"2002", value=str(message.value).encode())
        stop.wait(0.2)
    producer.close()


def visible_in_gold(lake_root: Path | str, workout_id: int) -> bool:
    """Whether gold/workout_bpm_summary under ``lake_root`` (a folder or an object store's URI,
    reached with the process's variables) holds the workout."""
    from resources import delta_log

    table = delta_log.find(f"{lake_root}/gold/workout_bpm_summary")
    if table is None:
        return False
    return workout_id in table.to_pyarrow_table(columns=["workout_id"])["workout_id"].to_pylist()


def start_daemon(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    daemon = str(Path(sys.executable).parent / "dagster-daemon")
    with log.open("wb") as out:
        return subprocess.Popen(
            [daemon, "run", "-w", "workspace.yaml"],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def wait_for_runs(home: Path, timeout_s: float = 180) -> None:
    """Until no run has a worker (the daemon stopped: no queued run starts), so that each ends on
    the server rather than waiting for a server that stopped, with the daemon's code server."""
    import dagster as dg

    running = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    deadline = time.monotonic() + timeout_s
    with dg.DagsterInstance.from_config(str(home)) as instance:
        while instance.get_run_records(dg.RunsFilter(statuses=running), limit=1):
            if time.monotonic() > deadline:
                print(f"runs still in progress after {timeout_s:.0f} s", file=sys.stderr)
                return
            time.sleep(1)


def measure(servers: str, lake_root: Path, samples: int, timeout_s: float) -> list[float]:
    latencies = []
    for sample in range(samples):
        workout_id = 900_000 + sample
        produced_at = time.time()
        produce(servers, workout(workout_id, int(produced_at) - 600))
        while not visible_in_gold(lake_root, workout_id):
            if time.time() - produced_at > timeout_s:
                raise TimeoutError(f"workout {workout_id} not in gold after {timeout_s:.0f} s")
            time.sleep(1)
        latencies.append(time.time() - produced_at)
        print(f"sample {sample + 1}: {latencies[-1]:.1f} s", flush=True)
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--interval", type=int, default=5, help="sensor interval, seconds")
    parser.add_argument("--timeout", type=float, default=600, help="per sample, seconds")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="latency-bench-"))
    home, lake_root = work / "dagster_home", work / "lake"
    home.mkdir()
    shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
    (lake_root / "landing" / "registered_users").mkdir(parents=True)
    (lake_root / "landing" / "registered_users" / "users.csv").write_text(REGISTRATION)
    stop = threading.Event()
    with EmbeddedBroker() as broker, SparkConnectServer() as server:
        env = {
            **os.environ,
            ENV_SPARK_REMOTE: server.url,
            "DAGSTER_HOME": str(home),
            "LAKEHOUSE_ROOT": str(lake_root),
            **lake_schemas(),
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
            "LAKEHOUSE_SENSOR_INTERVAL_S": str(args.interval),
            "LAKEHOUSE_AS_OF_DATE": datetime.now(UTC).date().isoformat(),
        }
        daemon = start_daemon(env, work / "daemon.log")
        producer = threading.Thread(
            target=background_readings, args=(broker.bootstrap_servers, stop)
        )
        producer.start()
        try:
            latencies = measure(broker.bootstrap_servers, lake_root, args.samples, args.timeout)
        finally:
            stop.set()
            producer.join()
            daemon.terminate()
            daemon.wait(timeout=60)
            wait_for_runs(home)
    print(
        f"\nproduce-to-gold latency over {len(latencies)} samples (sensor interval "
        f"{args.interval} s): median {statistics.median(latencies):.1f} s, "
        f"worst {max(latencies):.1f} s; daemon log and lake in {work}"
    )


if __name__ == "__main__":
    main()
