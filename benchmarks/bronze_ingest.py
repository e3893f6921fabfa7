"""Benchmark: Kafka -> bronze Delta ingestion, the project's stream against a plain baseline.

What it measures
----------------
N heart-rate records (``{"device_id", "time", "heartrate"}`` JSON, keyed by device id) are
produced to the topic ``bpm`` (P partitions) of the embedded tansu broker, or of the Kafka
cluster named by ``KAFKA_BOOTSTRAP_SERVERS``. Producing is timed and printed, but is not part of
the comparison. Then the same records are ingested three times into fresh Delta tables:

* **project**: ``dagster.materialize`` of the asset ``bronze/bpm`` (the Spark Python streaming
  source with ``trigger(availableNow=True)``, exactly-once ``foreachBatch`` commits through
  delta-rs). The Spark session is started once before the clock starts; its start-up time is
  printed separately. The timed part is the materialization only. This is the headline figure:
  every Dagster run starts a new Spark application, so it pays Spark's cold start of the Python
  data-source processes and workers (about 6 s here from the run's start to the first record).
* **project-warm**: the same, after an untimed first ingestion (into another lake) in the same
  process warmed those processes: the throughput of the data path itself.
* **baseline**: what a user might write instead: one kafka-python ``KafkaConsumer`` polling all
  partitions from the beginning, turning each poll into a pyarrow table with the project's bronze
  Kafka columns, and appending to Delta with ``deltalake.write_deltalake`` every ~250k records.
  It does less than the project: no ``ingested_at`` column, no ``date`` partitioning, no
  exactly-once transaction markers, no checkpoint and no consumer-group commits.

Each ingestion runs in its own child process (this script re-invoked with ``--mode``). A thread
in the child sums the resident set size (``VmRSS``) of the child and all of its descendants
(for the project: the Spark JVM and Spark's Python workers) every 0.2 s; the peak of that sum is
the reported memory (the peak of the summed proportional set size, ``Pss``, which counts pages
shared by Spark's forked Python workers once, is printed beside it; it is sampled every 1 s
and at the end, because reading it is costly). The child's ``getrusage``
high-water marks are reported too: they show the largest *single* process, not the sum. The
broker's memory is not counted in any figure.

Both runs verify that their Delta table holds exactly N rows and fail loudly otherwise.

Usage::

    .venv/bin/python benchmarks/bronze_ingest.py [--records N] [--partitions P]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a plain script from anywhere
    sys.path.insert(0, str(REPO_ROOT))

TOPIC = "bpm"
MODES = ("project", "project-warm", "baseline")
DEVICES = 1_000
# Baseline choices: records per poll, and records buffered between two Delta commits.
BASELINE_POLL_RECORDS = 50_000
BASELINE_COMMIT_EVERY = 250_000
# Same fetch sizes as the project's source (resources/kafka_source.read_range), so the
# comparison measures the pipelines rather than Kafka client tuning.
MAX_PARTITION_FETCH_BYTES = 8 * 1024 * 1024
FETCH_MAX_BYTES = 64 * 1024 * 1024
SAMPLE_INTERVAL_S = 0.2
# Pss costs the kernel a page-table walk (~20 ms for Spark's ~2 GB tree), RSS almost nothing:
# sample Pss every 5th time only (1 s), to keep the sampler's own CPU use near 1 % of a core.
PSS_EVERY_N_SAMPLES = 5
STALL_TIMEOUT_S = 120.0
# Spark settings of the environment, passed through to the project's resources.
SPARK_ENV_PASSTHROUGH = ("SPARK_MASTER", "LAKEHOUSE_SPARK_CONF")


class BenchmarkError(RuntimeError):
    """A run did not ingest exactly the records that were produced."""


# ----- memory: peak RSS of a process tree -------------------------------------------------------
def _children_from_proc_files(pid: int) -> list[int] | None:
    """Children listed by /proc/<pid>/task/*/children, or None when the kernel lacks them."""
    try:
        files = [task / "children" for task in Path(f"/proc/{pid}/task").iterdir()]
    except OSError:  # the process is gone
        return []
    if not files or not files[0].exists():
        return None
    children: list[int] = []
    for path in files:
        with contextlib.suppress(OSError):
            children.extend(int(child) for child in path.read_text().split())
    return children


def _parent_map() -> dict[int, list[int]]:
    """``{ppid: [pid, ...]}`` for every process, read from /proc/<pid>/stat."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def process_tree(root: int) -> list[int]:
    """``root`` and all of its live descendants."""
    use_files = _children_from_proc_files(root) is not None
    by_parent = {} if use_files else _parent_map()
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        kids = _children_from_proc_files(pid) if use_files else by_parent.get(pid, [])
        pending.extend(kids or [])
    return found


def _proc_field_kib(path: str, field: str) -> int:
    """A ``<field>: <n> kB`` line of a /proc file, in KiB (0 if the process is gone)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path(path).read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def rss_kib(pid: int) -> int:
    """The resident set size of ``pid`` in KiB: pages shared with other processes count fully."""
    return _proc_field_kib(f"/proc/{pid}/status", "VmRSS:")


def pss_kib(pid: int) -> int:
    """The proportional set size of ``pid`` in KiB: shared pages split among their sharers."""
    return _proc_field_kib(f"/proc/{pid}/smaps_rollup", "Pss:")


class TreeRssSampler:
    """Samples the summed RSS of this process and its descendants in a background thread."""

    def __init__(self, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.peak_rss_kib = 0
        self.peak_pss_kib = 0
        self.peak_processes = 0
        self._samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def sample(self, with_pss: bool = False) -> None:
        pids = process_tree(os.getpid())
        total = sum(rss_kib(pid) for pid in pids)
        if total > self.peak_rss_kib:
            self.peak_rss_kib, self.peak_processes = total, len(pids)
        if with_pss or self._samples % PSS_EVERY_N_SAMPLES == 0:
            pss = sum(pss_kib(pid) for pid in pids)
            self.peak_pss_kib = max(self.peak_pss_kib, pss)
        self._samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> TreeRssSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample(with_pss=True)


# ----- producing -------------------------------------------------------------------------------
def heart_rates(records: int, seed: int = 7) -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` pairs: JSON heart-rate readings of ``DEVICES`` devices, one per second."""
    rng = random.Random(seed)
    start = int(time.time()) - records // DEVICES - 1
    for i in range(records):
        device = i % DEVICES
        reading = {
            "device_id": device,
            "time": start + i // DEVICES,
            "heartrate": round(rng.gauss(75.0, 12.0), 1),
        }
        yield str(device).encode(), json.dumps(reading).encode()


def produce(bootstrap: str, records: int) -> float:
    """Produce ``records`` heart-rate messages to ``TOPIC``; returns the elapsed seconds."""
    from kafka import KafkaProducer

    failures: list[BaseException] = []
    producer = KafkaProducer(
        bootstrap_servers=bootstrap.split(","), linger_ms=20, batch_size=256 * 1024
    )
    started = time.perf_counter()
    for key, value in heart_rates(records):
        producer.send(TOPIC, key=key, value=value).add_errback(failures.append)
    producer.flush()
    elapsed = time.perf_counter() - started
    producer.close()
    if failures:
        raise BenchmarkError(f"{len(failures)} records were not produced: {failures[0]!r}")
    return elapsed


def prepare_topic(bootstrap: str, partitions: int, external: bool) -> None:
    """Create ``TOPIC``; on an external cluster, refuse a topic that already holds records."""
    from resources import KafkaResource

    kafka = KafkaResource(bootstrap_servers=bootstrap)
    if external and TOPIC in kafka.topics():
        raise BenchmarkError(
            f"Topic '{TOPIC}' already exists on {bootstrap}: its old records would spoil the "
            "row counts. Delete it first, or unset KAFKA_BOOTSTRAP_SERVERS to use the "
            "embedded broker."
        )
    kafka.create_topic(TOPIC, partitions)


# ----- (a) the project's bronze stream ---------------------------------------------------------
def project_env(bootstrap: str, lake_root: str) -> dict[str, str]:
    """The environment the project's resources are built from."""
    passthrough = {k: os.environ[k] for k in SPARK_ENV_PASSTHROUGH if k in os.environ}
    return {**passthrough, "KAFKA_BOOTSTRAP_SERVERS": bootstrap, "LAKEHOUSE_ROOT": lake_root}


def run_project(bootstrap: str, records: int, lake_root: str, warm: bool = False) -> dict[str, Any]:
    """Materialize ``bronze/bpm`` once and check it holds ``records`` rows.

    With ``warm``, the same ingestion runs first, untimed, into another lake: Spark's Python
    data-source processes, workers and streaming code are then warm, as they are for every
    stream after the first in a long-lived Spark application.
    """
    import dagster as dg

    from lakehouse_assets.bronze.assets import bronze_kafka_assets
    from resources import build_resources
    from resources.spark import stop_spark

    env = project_env(bootstrap, lake_root)
    asset = next(a for a in bronze_kafka_assets if a.key == dg.AssetKey(["bronze", TOPIC]))
    started = time.perf_counter()
    build_resources(env)["spark"].get_session()  # warm-up: JVM and session start, not timed
    resources = build_resources(env)
    if warm:
        warm_up = build_resources(project_env(bootstrap, f"{lake_root}-warm-up"))
        dg.materialize([asset], resources=warm_up)
    warm_up_s = time.perf_counter() - started
    started = time.perf_counter()
    result = dg.materialize([asset], resources=resources)
    elapsed = time.perf_counter() - started
    if not result.success:
        raise BenchmarkError("The materialization of bronze/bpm failed.")
    metadata = result.asset_materializations_for_node(f"bronze__{TOPIC}")[0].metadata
    rows = resources["lake"].row_count("bronze", TOPIC)
    stop_spark()  # waits for the JVM, so getrusage accounts for it
    return {
        "seconds": elapsed,
        "session_seconds": warm_up_s,
        "rows": rows,
        "commits": metadata["batches_committed"].value,
    }


# ----- (b) the baseline: one consumer loop and write_deltalake ---------------------------------
def to_arrow(records: list[Any]) -> Any:
    """Polled Kafka records as a pyarrow table with the bronze Kafka columns."""
    import pyarrow as pa

    return pa.table(
        {
            "topic": pa.array([r.topic for r in records], pa.string()),
            "partition": pa.array([r.partition for r in records], pa.int32()),
            "offset": pa.array([r.offset for r in records], pa.int64()),
            "key": pa.array([r.key for r in records], pa.binary()).cast(pa.string()),
            "value": pa.array([r.value for r in records], pa.binary()).cast(pa.string()),
            "timestamp": pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(
                pa.timestamp("us", tz="UTC")
            ),
        }
    )


def delta_row_count(uri: str) -> int:
    """Rows in a Delta table's current snapshot, from its file statistics."""
    import pyarrow as pa
    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(uri).get_add_actions(flatten=True))
    return sum(count or 0 for count in actions["num_records"].to_pylist())


def consume_into_delta(consumer: Any, records: int, uri: str) -> int:
    """Poll until ``records`` were read, appending every ~250k to Delta; returns commits.

    Stops by counting records: the embedded broker under-reports end offsets.
    """
    import pyarrow as pa
    from deltalake import write_deltalake

    buffered: list[Any] = []
    read = pending = commits = 0
    last_progress = time.monotonic()
    while read < records:
        polled = consumer.poll(timeout_ms=1000, max_records=BASELINE_POLL_RECORDS)
        batch = [record for partition in polled.values() for record in partition]
        if not batch:
            if time.monotonic() - last_progress > STALL_TIMEOUT_S:
                raise BenchmarkError(f"baseline: stuck after {read} of {records} records")
            continue
        last_progress = time.monotonic()
        buffered.append(to_arrow(batch))
        read += len(batch)
        pending += len(batch)
        if pending >= BASELINE_COMMIT_EVERY or read >= records:
            write_deltalake(uri, pa.concat_tables(buffered), mode="append")
            buffered, pending, commits = [], 0, commits + 1
    return commits


def run_baseline(bootstrap: str, records: int, lake_root: str) -> dict[str, Any]:
    """Read every record of ``TOPIC`` with one consumer into a Delta table."""
    from kafka import KafkaConsumer
    from kafka.structs import TopicPartition

    uri = f"{lake_root}/baseline/{TOPIC}"
    started = time.perf_counter()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap.split(","),
        enable_auto_commit=False,
        max_partition_fetch_bytes=MAX_PARTITION_FETCH_BYTES,
        fetch_max_bytes=FETCH_MAX_BYTES,
    )
    partitions = [TopicPartition(TOPIC, p) for p in sorted(consumer.partitions_for_topic(TOPIC))]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    commits = consume_into_delta(consumer, records, uri)
    consumer.close()
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "rows": delta_row_count(uri), "commits": commits}


# ----- child processes -------------------------------------------------------------------------
def child_main(args: argparse.Namespace) -> None:
    """Run one ingestion under the RSS sampler and write its figures to ``args.result``."""
    with TreeRssSampler() as sampler:
        if args.mode == "baseline":
            figures = run_baseline(args.bootstrap, args.records, args.lake_root)
        else:
            warm = args.mode == "project-warm"
            figures = run_project(args.bootstrap, args.records, args.lake_root, warm)
    figures["peak_tree_rss_kib"] = sampler.peak_rss_kib
    figures["peak_tree_pss_kib"] = sampler.peak_pss_kib
    figures["peak_tree_processes"] = sampler.peak_processes
    figures["maxrss_self_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    figures["maxrss_children_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    Path(args.result).write_text(json.dumps(figures))


def run_child(mode: str, bootstrap: str, records: int, workdir: Path) -> dict[str, Any]:
    """Run ``mode`` in a fresh Python process; its output goes to ``<workdir>/<mode>.log``."""
    result, log = workdir / f"{mode}.json", workdir / f"{mode}.log"
    command = [sys.executable, str(Path(__file__).resolve()), "--mode", mode]
    command += ["--records", str(records), "--bootstrap", bootstrap]
    command += ["--lake-root", str(workdir / f"lake-{mode}"), "--result", str(result)]
    with log.open("wb") as out:
        code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    if code != 0 or not result.exists():
        tail = log.read_text(errors="replace")[-4000:]
        raise BenchmarkError(f"{mode} run failed (exit code {code}); end of {log}:\n{tail}")
    figures = json.loads(result.read_text())
    if figures["rows"] != records:
        raise BenchmarkError(f"{mode}: the Delta table holds {figures['rows']} rows, not {records}")
    return figures


# ----- the driver ------------------------------------------------------------------------------
def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def report(records: int, runs: dict[str, dict[str, Any]]) -> None:
    """Print throughput, the ratios to the baseline and peak memory of every run."""
    described = {
        "project": "dagster.materialize bronze/bpm on a new Spark session",
        "project-warm": "the same, after an untimed first ingestion warmed Spark's workers",
        "baseline": f"KafkaConsumer poll {BASELINE_POLL_RECORDS:,} records, write_deltalake "
        f"every ~{BASELINE_COMMIT_EVERY:,} records",
    }
    rates = {mode: records / figures["seconds"] for mode, figures in runs.items()}
    for mode, figures in runs.items():
        untimed = figures.get("session_seconds")
        note = f"; untimed start-up {untimed:.1f} s" if untimed is not None else ""
        print(f"\n{mode:13} ({described[mode]}{note})")
        print(
            f"  {figures['seconds']:8.2f} s  {rates[mode]:12,.0f} records/s  "
            f"{figures['commits']} Delta commits"
        )
    print()
    for mode in ("project", "project-warm"):
        print(f"throughput ratio {mode}/baseline: {rates[mode] / rates['baseline']:.2f}")
    print("peak memory of each child process + all its descendants")
    print("  (RSS sum, every 0.2 s: shared pages counted in every process;")
    print("   PSS sum, every 1 s and at the end: shared pages split among their sharers;")
    print("   getrusage: the largest single process, as RUSAGE_CHILDREN would report it)")
    for mode, figures in runs.items():
        largest = max(figures["maxrss_self_kib"], figures["maxrss_children_kib"])
        print(
            f"  {mode:13}  RSS sum {mib(figures['peak_tree_rss_kib']):>10}  "
            f"PSS sum {mib(figures['peak_tree_pss_kib']):>10}  "
            f"getrusage {mib(largest):>10}  ({figures['peak_tree_processes']} processes at peak)"
        )


@contextlib.contextmanager
def workspace(keep: str | None) -> Iterator[Path]:
    """The folder for lakes, logs and results: ``keep`` (kept), or a temporary one."""
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=False)
        yield Path(keep).resolve()
        return
    with tempfile.TemporaryDirectory(prefix="bronze-bench-") as tmp:
        yield Path(tmp)


def benchmark(bootstrap: str, args: argparse.Namespace, external: bool) -> None:
    """Produce, then run both ingestions in child processes and report."""
    prepare_topic(bootstrap, args.partitions, external)
    seconds = produce(bootstrap, args.records)
    print(
        f"produced {args.records:,} records in {seconds:.1f} s "
        f"({args.records / seconds:,.0f} records/s; not part of the comparison)",
        flush=True,
    )
    runs: dict[str, dict[str, Any]] = {}
    with workspace(args.keep) as workdir:
        for mode in MODES:
            print(f"running {mode}...", flush=True)
            runs[mode] = run_child(mode, bootstrap, args.records, workdir)
    report(args.records, runs)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records to produce")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic")
    parser.add_argument(
        "--keep", metavar="DIR", help="keep the lakes and child logs in DIR (must not exist)"
    )
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--lake-root", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.mode:
        child_main(args)
        return
    print(
        f"bronze ingest benchmark: {args.records:,} records, topic '{TOPIC}', "
        f"{args.partitions} partitions"
    )
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        print(f"broker: {external} (KAFKA_BOOTSTRAP_SERVERS)")
        benchmark(external, args, external=True)
        return
    from lakehouse_assets.devtools.broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        print(f"broker: embedded tansu at {broker.bootstrap_servers}")
        benchmark(broker.bootstrap_servers, args, external=False)


if __name__ == "__main__":
    main()
