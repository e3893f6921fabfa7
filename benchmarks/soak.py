"""Soak: the production shape (`lakehouse up`: PostgreSQL, the embedded broker, the Spark Connect
server, dagster-daemon, dagster-webserver) under a steady producer, with the daemon driving every
layer. Nothing is materialized by hand.

A producer sends heart-rate readings of 100 registered devices at ``--rate`` records per second
for ``--minutes``; every ``--sample-every`` seconds one complete workout of a new id is produced
too, and its produce-to-gold latency is the time until its row is in gold/workout_bpm_summary.
At the end it prints:

- the latency percentiles (p50, p90, max) over the samples;
- the memory (resident set, every process of the service's process group) of each service at
  the start (once the first workout reached gold) and at the end;
- the lag the sensors recorded (``lag/records_waiting`` observations of each bronze Kafka
  table): its maximum, and a plot over time (``--plot``, default docs/soak_lag.png);
- once the producer stopped, how long bronze took to hold every record of each topic (the lag
  back to zero), and then, per topic, the records lost (in Kafka, not in bronze) and duplicated
  (in bronze more than once), by (partition, offset).

``--s3`` puts the lake on object storage (``lakehouse up --s3``: a local S3 server, S3Proxy).
``--kill-spark-at M`` kills the Spark Connect server (SIGKILL, its whole process group) M minutes
into the run; the stack starts it again, and the runs it cut off are retried.

Usage::

    .venv/bin/python benchmarks/soak.py [--rate 2000] [--minutes 10] [--plot docs/soak_lag.png]
        [--s3] [--kill-spark-at 5]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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

from benchmarks.produce_to_gold_latency import visible_in_gold, workout  # noqa: E402
from lakehouse_assets.constants import BRONZE  # noqa: E402
from lakehouse_assets.fitness.names import KAFKA_TOPICS  # noqa: E402
from lakehouse_assets.sensors.streams import LAG_RECORDS  # noqa: E402
from resources import delta_log, files  # noqa: E402

DEVICES = range(1001, 1101)  # of users 1..100; the latency workouts are user 1's (device 1001)
REGISTRATION = "user_id,device_id,mac_address,registration_timestamp\n" + "".join(
    f"{d - 1000},{d},aa:{d - 1000:02x},1700000000\n" for d in DEVICES
)


def steady_readings(servers: str, rate: int, stop: threading.Event) -> None:
    """``rate`` readings per second, in 10 chunks a second, until ``stop``."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=20, batch_size=256_000)
    chunk, sent, started = max(rate // 10, 1), 0, time.monotonic()
    while not stop.is_set():
        now = int(time.time())
        for i in range(chunk):
            device = DEVICES[(sent + i) % len(DEVICES)]
            value = json.dumps({"device_id": device, "time": now, "heartrate": 60.0 + i % 90})
            producer.send("bpm", key=str(device).encode(), value=value.encode())
        sent += chunk
        stop.wait(max(0.0, started + sent / rate - time.monotonic()))
    producer.close()


def group_rss_mb(pgid: int) -> float:
    """The resident memory of every process in process group ``pgid``, in MB."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # field 5 of proc(5): the process group
            total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # field 24: rss in pages
    return total / 1e6


def memory(home: Path) -> dict[str, float]:
    state = json.loads((home / "services.json").read_text())
    return {name: group_rss_mb(s["pid"]) for name, s in state.items() if "pid" in s}


def lag_observations(home: Path) -> dict[str, list[tuple[float, float]]]:
    """``{bronze table: [(time, records waiting)]}`` from the sensors' observations."""
    import dagster as dg

    state = json.loads((home / "services.json").read_text())
    os.environ.update(state["environment"])
    series: dict[str, list[tuple[float, float]]] = {}
    with dg.DagsterInstance.get() as instance:
        for topic in KAFKA_TOPICS:
            points, cursor = [], None
            while True:
                page = instance.fetch_observations(
                    dg.AssetKey([BRONZE, topic]), limit=1000, cursor=cursor, ascending=True
                )
                for record in page.records:
                    observation = record.asset_observation
                    value = observation.metadata.get(LAG_RECORDS) if observation else None
                    if isinstance(value, dg.IntMetadataValue):
                        points.append((record.timestamp, float(value.value or 0)))
                if not page.has_more:
                    break
                cursor = page.cursor
            series[topic] = points
    return series


def plot(series: dict[str, list[tuple[float, float]]], start: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 3.5))
    for topic, points in series.items():
        if points:
            axes.plot([(t - start) / 60 for t, _ in points], [v for _, v in points], label=topic)
    axes.set_xlabel("minutes since the producer started")
    axes.set_ylabel("records waiting (sensor observations)")
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)


def wait_for(lake: str, workout_id: int, since: float, timeout_s: float) -> float:
    while not visible_in_gold(lake, workout_id):
        if time.time() - since > timeout_s:
            raise TimeoutError(f"workout {workout_id} not in gold after {timeout_s:.0f} s")
        time.sleep(1)
    return time.time() - since


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rate", type=int, default=2000, help="readings per second")
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--sample-every", type=float, default=30, help="seconds")
    parser.add_argument("--interval", type=int, default=5, help="sensor interval, seconds")
    parser.add_argument("--plot", type=Path, default=REPO_ROOT / "docs" / "soak_lag.png")
    parser.add_argument("--s3", action="store_true", help="the lake on a local S3 server")
    parser.add_argument(
        "--kill-spark-at", type=float, help="minutes into the run to kill the Connect server"
    )
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="lakehouse-soak-"))
    home.chmod(0o755)  # PostgreSQL's user (under root) reaches its data
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "DAGSTER_HOME")},
        "LAKEHOUSE_SENSOR_INTERVAL_S": str(args.interval),
        "LAKEHOUSE_AS_OF_DATE": datetime.now(UTC).date().isoformat(),
    }
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    if not args.s3:
        env["LAKEHOUSE_ROOT"] = str(home / "lake")
    up = [str(Path(sys.executable).parent / "lakehouse"), "up", "--home", str(home)]
    up += ["--port", "3999", *(["--s3"] if args.s3 else [])]
    with (home / "up.log").open("wb") as log:
        stack = subprocess.Popen(up, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        while "The lakehouse is up" not in (home / "up.log").read_text():
            if stack.poll() is not None:
                raise SystemExit((home / "up.log").read_text())
            time.sleep(1)
        # The stack's variables (the lake root, a local S3 server's) for delta-rs and pyarrow.
        os.environ.update(json.loads((home / "services.json").read_text())["environment"])
        run(home, os.environ["LAKEHOUSE_ROOT"], args)
    finally:
        stack.terminate()
        stack.wait(timeout=180)
        print(f"Logs and lake in {home}")


def run(home: Path, lake: str, args: argparse.Namespace) -> None:
    servers = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    from lakehouse_tools.sample_data import produce

    files.write_text(f"{lake}/landing/registered_users/users.csv", REGISTRATION)
    first = time.time()
    produce(servers, workout(800_000, int(first) - 600))
    print(f"first workout in gold after {wait_for(lake, 800_000, first, 900):.1f} s (warm-up)")
    start_memory = memory(home)
    stop, started = threading.Event(), time.time()
    producer = threading.Thread(target=steady_readings, args=(servers, args.rate, stop))
    producer.start()
    killer = None
    if args.kill_spark_at is not None:
        killer = threading.Thread(target=kill_spark, args=(home, started + args.kill_spark_at * 60))
        killer.start()
    latencies: list[float] = []
    try:
        while time.time() - started < args.minutes * 60:
            workout_id, produced_at = 900_000 + len(latencies), time.time()
            produce(servers, workout(workout_id, int(produced_at) - 600))
            latencies.append(wait_for(lake, workout_id, produced_at, 900))
            print(f"sample {len(latencies)}: {latencies[-1]:.1f} s", flush=True)
            time.sleep(max(0.0, produced_at + args.sample_every - time.time()))
    finally:
        stop.set()
        producer.join()
        if killer:
            killer.join()
    stopped = time.time()
    caught_up = wait_until_bronze_holds_kafka(lake, servers, timeout_s=900)
    print(f"\nbronze held every record {caught_up - stopped:.1f} s after the producer stopped")
    for topic, (kafka, rows, distinct) in bronze_against_kafka(lake, servers).items():
        print(f"bronze/{topic}: {kafka} records in Kafka, {rows} rows; lost {kafka - distinct}, "
              f"duplicated {rows - distinct}")  # fmt: skip
    end_memory = memory(home)
    series = lag_observations(home)
    plot(series, started, args.plot)
    quantiles = statistics.quantiles(latencies, n=10) if len(latencies) > 1 else latencies * 9
    where = "on S3 (S3Proxy)" if args.s3 else "on a folder"
    print(f"\n{args.rate} readings/s for {args.minutes:g} min, sensors every {args.interval} s, "
          f"the lake {where}")  # fmt: skip
    print(
        f"produce-to-gold latency over {len(latencies)} samples: p50 {quantiles[4]:.1f} s, "
        f"p90 {quantiles[8]:.1f} s, max {max(latencies):.1f} s"
    )
    for name in start_memory:
        print(f"memory of the {name}: {start_memory[name]:.0f} MB at the start, "
              f"{end_memory.get(name, 0):.0f} MB at the end")  # fmt: skip
    for topic, points in series.items():
        peak = max((v for _, v in points), default=0)
        print(f"lag of bronze/{topic}: {len(points)} observations, at most {peak:.0f} waiting")
    print(f"lag plot: {args.plot}")


def kill_spark(home: Path, at: float) -> None:
    """At ``at``, kill the Spark Connect server's process group; report when it is back."""
    time.sleep(max(0.0, at - time.time()))
    name = "Spark Connect server"
    pid = json.loads((home / "services.json").read_text())[name]["pid"]
    os.killpg(pid, signal.SIGKILL)
    killed = time.time()
    while json.loads((home / "services.json").read_text())[name].get("pid") in (pid, None):
        time.sleep(0.5)
    print(f"killed the {name} (pid {pid}); started again in {time.time() - killed:.1f} s")


def bronze_rows(lake: str, topic: str) -> int:
    """Rows of bronze/<topic>, from its log's statistics."""
    table = delta_log.find(f"{lake}/{BRONZE}/{topic}")
    return delta_log.row_count(table) if table else 0


def kafka_records(servers: str) -> dict[str, int]:
    """Records of each topic: the sum of its partitions' end offsets (nothing is compacted or
    deleted, and the producer is not transactional, so offsets count records)."""
    from resources import KafkaResource

    ends = KafkaResource(bootstrap_servers=servers).end_offsets(KAFKA_TOPICS)
    return {topic: sum(o for (t, _), o in ends.items() if t == topic) for topic in KAFKA_TOPICS}


def wait_until_bronze_holds_kafka(lake: str, servers: str, timeout_s: float) -> float:
    """When every bronze Kafka table held as many rows as its topic has records."""
    expected, deadline = kafka_records(servers), time.time() + timeout_s
    while any(bronze_rows(lake, topic) < count for topic, count in expected.items()):
        if time.time() > deadline:
            raise TimeoutError(f"bronze short of {expected} after {timeout_s:.0f} s")
        time.sleep(2)
    return time.time()


def bronze_against_kafka(lake: str, servers: str) -> dict[str, tuple[int, int, int]]:
    """Per topic: its records in Kafka, bronze's rows, and bronze's distinct (partition, offset)."""
    found = {}
    for topic, count in kafka_records(servers).items():
        table = delta_log.find(f"{lake}/{BRONZE}/{topic}")
        if table is None:
            found[topic] = (count, 0, 0)
            continue
        rows = table.to_pyarrow_table(columns=["partition", "offset"])
        distinct = rows.group_by(["partition", "offset"]).aggregate([]).num_rows
        found[topic] = (count, rows.num_rows, distinct)
    return found


if __name__ == "__main__":
    main()
