"""Benchmark: Kafka -> bronze Delta ingestion, the project's stream against a plain baseline.

What it measures
----------------
N heart-rate records (``{"device_id", "time", "heartrate"}`` JSON, keyed by device id) are
produced to the topic ``bpm`` (P partitions) of the embedded broker (Apache Kafka), or of the Kafka
cluster named by ``KAFKA_BOOTSTRAP_SERVERS``. Producing is timed and printed, but is not part of
the comparison. Then the same records are ingested into fresh Delta tables, one invocation
measuring every mode side by side:

* **baseline**: what a user might write instead: one kafka-python ``KafkaConsumer`` polling all
  partitions from the beginning, turning each poll into a pyarrow table with the project's bronze
  Kafka columns, and appending to Delta with ``deltalake.write_deltalake`` every ~250k records.
  It does less than the project: no ``ingested_at`` column, no ``date`` partitioning, no
  exactly-once transaction markers, no checkpoint and no consumer-group commits.
* **project, new local application**: ``dagster.materialize`` of the asset ``bronze/bpm``
  (Spark's Kafka source, ``trigger(availableNow=True)``, Delta Lake's streaming sink: exactly
  once by Delta's transaction ids) in a process with no ``SPARK_REMOTE``: it starts a local Spark
  application of its own, what a run without a server pays. The session is started before the
  clock (its start-up is printed separately); the materialization is timed.
* **project, warm Connect server**: the benchmark starts one Spark Connect server (untimed; its
  ``spark.driver.memory`` is ``--driver-memory`` when given) and warms it with ``--warm-ups``
  untimed ingestions (3 by default) of the same records into other lakes, as a server that has
  been up a while is. Then a new process, as a Dagster run's
  process is, materializes ``bronze/bpm`` as a client of the server (resources built with
  ``SPARK_REMOTE`` = the server's URL); connecting its session is untimed and printed, the
  materialization is timed. The server's executors do the work.
* **project, warm Connect server, no new records**: ``--idle-runs`` more such processes (20 by
  default) materialize the same asset into the same lake, one after the other, while Kafka holds
  nothing new, as the stream sensors' runs often do. The first one's materialization is the
  figure (the target is at most 1 s); the whole process's time, from its start to its exit, is
  printed beside it. The server's memory is sampled during each: its peak in the first runs and
  the last shows whether a server that takes run after run grows.

Each ingestion runs in its own child process (this script re-invoked with ``--mode``); every
table must hold exactly N rows afterwards (also after the run with no new records), or the
benchmark fails. A thread in the child sums the resident set size (``VmRSS``) of the child and
all of its descendants (for a local application: its Spark JVM and Spark's Python workers) every
0.2 s; the peak of that sum is reported, with the peak of the summed proportional set size
(``Pss``, which counts pages shared by forked Python workers once; sampled every 1 s and at the
end, because reading it is costly) and the child's ``getrusage`` high-water marks (the largest
*single* process, not the sum). During the timed Connect ingestion a second sampler in the child
does the same for the server's process tree (its JVM and its Python workers), reported
separately. The broker's memory is not counted in any figure.

Usage::

    .venv/bin/python benchmarks/bronze_ingest.py [--records N] [--partitions P]
        [--driver-memory 1g] [--connect-only] [--keep DIR]
        [--conf '{"spark.sql.codegen.wholeStage": "false"}']
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a plain script from anywhere
    sys.path.insert(0, str(REPO_ROOT))
from benchmarks.lake_schemas import lake_schemas, own_metastore  # noqa: E402

own_metastore()  # before any Spark starts: the benchmark's catalog is its own

TOPIC = "bpm"
BASELINE = "baseline"
LOCAL = "project-local"
WARM_UP = "project-connect-warm-up"
CONNECT = "project-connect"
IDLE = "project-connect-idle"
MODES = (BASELINE, LOCAL, WARM_UP, CONNECT, IDLE)
LABELS = {
    BASELINE: "baseline",
    LOCAL: "project, new local application",
    CONNECT: "project, warm Connect server",
    IDLE: "project, warm Connect server, no new records",
}
IDLE_TARGET_S = 1.0  # the target for a run that finds nothing new
IDLE_RUNS = 20
# A server that has ingested before: its JIT compiles the hot paths over the first few runs (a
# million records took 16.7 s after one earlier run, 9.6 s after five on one server).
WARM_UPS = 3
DEVICES = 1_000
# Baseline choices: records per poll, and records buffered between two Delta commits.
BASELINE_POLL_RECORDS = 50_000
BASELINE_COMMIT_EVERY = 250_000
# Fetch sizes of the baseline's consumer (kafka-python's defaults are 1 MiB and 50 MiB).
MAX_PARTITION_FETCH_BYTES = 8 * 1024 * 1024
FETCH_MAX_BYTES = 64 * 1024 * 1024
SAMPLE_INTERVAL_S = 0.2
# Pss costs the kernel a page-table walk (~20 ms for Spark's ~2 GB tree), RSS almost nothing:
# sample Pss every 5th time only (1 s), to keep the sampler's own CPU use near 1 % of a core.
PSS_EVERY_N_SAMPLES = 5
STALL_TIMEOUT_S = 120.0
# Spark settings of the child's environment, passed through to the project's resources (the
# benchmark sets SPARK_REMOTE for the Connect runs and removes it for the others).
SPARK_ENV_PASSTHROUGH = ("SPARK_MASTER", "LAKEHOUSE_SPARK_CONF", "SPARK_REMOTE")
DRIVER_MEMORY = "spark.driver.memory"


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
    """Samples the summed RSS (and PSS) of a process and its descendants in a background thread.

    Args:
        root: the process at the root of the tree; this process when None.
        interval_s: seconds between two samples.
    """

    def __init__(self, root: int | None = None, interval_s: float = SAMPLE_INTERVAL_S) -> None:
        self.root = os.getpid() if root is None else root
        self.interval_s = interval_s
        self.peak_rss_kib = 0
        self.peak_pss_kib = 0
        self.peak_processes = 0
        self._samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def sample(self, with_pss: bool = False) -> None:
        pids = process_tree(self.root)
        total = sum(rss_kib(pid) for pid in pids)
        if total > self.peak_rss_kib:
            self.peak_rss_kib, self.peak_processes = total, len(pids)
        if with_pss or self._samples % PSS_EVERY_N_SAMPLES == 0:
            pss = sum(pss_kib(pid) for pid in pids)
            self.peak_pss_kib = max(self.peak_pss_kib, pss)
        self._samples += 1

    def figures(self) -> dict[str, int]:
        """The peaks so far: summed RSS and PSS in KiB, and the processes at the RSS peak."""
        return {
            "peak_tree_rss_kib": self.peak_rss_kib,
            "peak_tree_pss_kib": self.peak_pss_kib,
            "peak_tree_processes": self.peak_processes,
        }

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
    """Produce ``records`` heart-rate messages to ``TOPIC``; returns the elapsed seconds.

    With librdkafka (confluent-kafka): ten million records take about a minute, not eight.
    """
    from confluent_kafka import Producer

    failures: list[Any] = []

    def delivered(error: Any, _message: Any) -> None:
        if error is not None:
            failures.append(error)

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    started = time.perf_counter()
    for count, (key, value) in enumerate(heart_rates(records)):
        while True:
            try:
                producer.produce(TOPIC, key=key, value=value, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        if count % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120) or failures:
        raise BenchmarkError(f"Not every record was produced: {failures[:1]!r}")
    return time.perf_counter() - started


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


# ----- the baseline: one consumer loop and write_deltalake -------------------------------------
def to_arrow(records: list[Any]) -> Any:
    """Polled Kafka records as a pyarrow table with the bronze Kafka columns."""
    import pyarrow as pa

    headers = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    return pa.table(
        {
            "key": pa.array([r.key for r in records], pa.binary()),
            "value": pa.array([r.value for r in records], pa.binary()),
            "topic": pa.array([r.topic for r in records], pa.string()),
            "partition": pa.array([r.partition for r in records], pa.int32()),
            "offset": pa.array([r.offset for r in records], pa.int64()),
            "timestamp": pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(
                pa.timestamp("us", tz="UTC")
            ),
            "timestampType": pa.array([r.timestamp_type for r in records], pa.int32()),
            "headers": pa.array(
                [[{"key": k, "value": v} for k, v in r.headers or ()] for r in records], headers
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

    Stops once it has read the number of records produced.
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


# ----- the project's bronze stream, on a local application or a Connect server -----------------
def project_env(bootstrap: str, lake_root: str) -> dict[str, str]:
    """The environment the project's resources are built from."""
    from resources import ENV_KAFKA_BOOTSTRAP_SERVERS, ENV_LAKEHOUSE_ROOT

    passthrough = {k: os.environ[k] for k in SPARK_ENV_PASSTHROUGH if k in os.environ}
    return {
        **passthrough,
        **lake_schemas(),
        ENV_KAFKA_BOOTSTRAP_SERVERS: bootstrap,
        ENV_LAKEHOUSE_ROOT: lake_root,
    }


def run_project(bootstrap: str, lake_root: str, server_pid: int | None) -> dict[str, Any]:
    """Materialize ``bronze/bpm`` once, timed, on a Spark session started before the clock.

    A client of the Connect server named by ``SPARK_REMOTE``, or a local Spark application in
    this process when it is unset.

    Args:
        bootstrap: the Kafka bootstrap servers.
        lake_root: the lake to ingest into.
        server_pid: the Connect server's process id: its process tree's memory is sampled
            during the materialization.
    """
    import dagster as dg

    from lakehouse_assets.fitness.pipeline import bronze_kafka_assets
    from resources import ENV_SPARK_REMOTE, build_resources

    env = project_env(bootstrap, lake_root)
    asset = next(a for a in bronze_kafka_assets if a.key == dg.AssetKey(["bronze", TOPIC]))
    started = time.perf_counter()
    session = build_resources(env)["spark"].get_session()  # JVM or connection, not timed
    session_s = time.perf_counter() - started
    resources = build_resources(env)
    server = TreeRssSampler(server_pid) if server_pid else contextlib.nullcontext()
    # A run's worker has its Dagster instance before its step starts: made before the clock, so
    # the figure does not include importing the instance's storage (about 1.5 s in a new process).
    with dg.DagsterInstance.ephemeral() as instance, server as server_sampler:
        started = time.perf_counter()
        result = dg.materialize([asset], resources=resources, instance=instance)
        elapsed = time.perf_counter() - started
    if not result.success:
        raise BenchmarkError("The materialization of bronze/bpm failed.")
    metadata = result.asset_materializations_for_node(f"bronze__{TOPIC}")[0].metadata
    figures = {
        "seconds": elapsed,
        "session_seconds": session_s,
        "rows": resources["lake"].row_count("bronze", TOPIC),
        "commits": metadata["batches_committed"].value,
    }
    if server_sampler is not None:
        figures["server"] = server_sampler.figures()
    release_spark(session, remote=bool(env.get(ENV_SPARK_REMOTE)))
    return figures


def release_spark(session: Any, remote: bool) -> None:
    """End this process's Spark session: a Connect session is released on its server (which
    keeps running); a local application is stopped, waiting for its JVM so that getrusage
    accounts for it."""
    from resources.spark_jvm import stop_spark

    if remote:
        session.stop()
    else:
        stop_spark()


# ----- child processes -------------------------------------------------------------------------
def child_main(args: argparse.Namespace) -> None:
    """Run one ingestion under the RSS sampler and write its figures to ``args.result``."""
    with TreeRssSampler() as sampler:
        if args.mode == BASELINE:
            figures = run_baseline(args.bootstrap, args.records, args.lake_root)
        else:
            figures = run_project(args.bootstrap, args.lake_root, args.server_pid)
    figures.update(sampler.figures())
    figures["maxrss_self_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    figures["maxrss_children_kib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    Path(args.result).write_text(json.dumps(figures))


@dataclass(frozen=True)
class Invocation:
    """What every child process of one invocation shares."""

    bootstrap: str
    records: int
    workdir: Path


def child_environ(remote: str | None) -> dict[str, str]:
    """The child's process environment: a Connect client of ``remote``, or a process that may
    start a local Spark (no ``SPARK_REMOTE``, whatever this process's environment says)."""
    from resources import ENV_SPARK_REMOTE
    from resources.spark_jvm import without_connect

    env = without_connect(os.environ)
    return {**env, ENV_SPARK_REMOTE: remote} if remote else env


def run_child(
    invocation: Invocation,
    mode: str,
    lake: str,
    remote: str | None = None,
    server_pid: int | None = None,
) -> dict[str, Any]:
    """Run ``mode`` into ``<workdir>/<lake>`` in a fresh Python process and check the table then
    holds exactly the produced records; the output goes to ``<workdir>/<mode>.log``.

    Raises:
        BenchmarkError: the child failed, or the table holds another number of rows.
    """
    result, log = invocation.workdir / f"{mode}.json", invocation.workdir / f"{mode}.log"
    command = [sys.executable, str(Path(__file__).resolve()), "--mode", mode]
    command += ["--records", str(invocation.records), "--bootstrap", invocation.bootstrap]
    command += ["--lake-root", str(invocation.workdir / lake), "--result", str(result)]
    command += ["--server-pid", str(server_pid)] if server_pid else []
    started = time.perf_counter()
    with log.open("wb") as out:
        code = subprocess.call(
            command, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=child_environ(remote)
        )
    if code != 0 or not result.exists():
        tail = log.read_text(errors="replace")[-4000:]
        raise BenchmarkError(f"{mode} run failed (exit code {code}); end of {log}:\n{tail}")
    figures = json.loads(result.read_text())
    figures["process_seconds"] = time.perf_counter() - started
    if figures["rows"] != invocation.records:
        raise BenchmarkError(
            f"{mode}: the Delta table holds {figures['rows']} rows, not {invocation.records}"
        )
    return figures


def connect_runs(
    invocation: Invocation,
    driver_memory: str | None,
    warm_ups: int,
    idle_runs: int,
    extra: dict[str, str],
) -> dict[str, dict[str, Any]]:
    """Start a Connect server (untimed), warm it with ``warm_ups`` ingestions, then time a run
    of all the records and ``idle_runs`` runs that find nothing new, each in a new client
    process."""
    from lakehouse_tools.spark_server import SERVER_DEFAULTS, SparkConnectServer
    from resources import ENV_SPARK_MASTER

    conf = {**extra, **({DRIVER_MEMORY: driver_memory} if driver_memory else {})}
    master = os.environ.get(ENV_SPARK_MASTER, "local[*]")
    started = time.perf_counter()
    with SparkConnectServer(master=master, conf=conf) as server:
        memory = conf.get(DRIVER_MEMORY, SERVER_DEFAULTS[DRIVER_MEMORY])
        print(
            f"Spark Connect server on {server.url} (driver memory {memory}) started in "
            f"{time.perf_counter() - started:.1f} s; its log: {server.log_path}",
            flush=True,
        )
        for number in range(warm_ups):
            print(f"running {WARM_UP} {number + 1} of {warm_ups} (untimed)...", flush=True)
            run_child(invocation, WARM_UP, f"lake-connect-warm-up-{number}", server.url)
        print(f"running {CONNECT}...", flush=True)
        runs = {CONNECT: run_child(invocation, CONNECT, "lake-connect", server.url, server.pid)}
        print(f"running {IDLE} {idle_runs} times...", flush=True)
        idle = [
            run_child(invocation, IDLE, "lake-connect", server.url, server.pid)
            for _ in range(idle_runs)
        ]
        runs[IDLE] = {**idle[0], "series": idle}
    return runs


# ----- the report ------------------------------------------------------------------------------
def mib(kib: int) -> str:
    return f"{kib / 1024:,.0f} MiB"


def report_throughput(records: int, runs: dict[str, dict[str, Any]]) -> None:
    """Print records/s and the ratio to the baseline of each ingestion of all the records."""
    print(
        f"\nbaseline: KafkaConsumer poll {BASELINE_POLL_RECORDS:,} records, write_deltalake "
        f"every ~{BASELINE_COMMIT_EVERY:,} records; project: dagster.materialize bronze/bpm"
    )
    print(f"\n{'run':46}{'seconds':>9}{'records/s':>12}{'ratio':>7}{'commits':>9}  untimed")
    baseline_rate = records / runs[BASELINE]["seconds"] if BASELINE in runs else None
    for mode in (BASELINE, LOCAL, CONNECT):
        if mode not in runs:
            continue
        figures = runs[mode]
        rate = records / figures["seconds"]
        untimed = figures.get("session_seconds")
        note = f"  session start {untimed:.1f} s" if untimed is not None else ""
        print(
            f"{LABELS[mode]:46}{figures['seconds']:9.2f}{rate:12,.0f}"
            f"{rate / baseline_rate if baseline_rate else 0:7.2f}{figures['commits']:9}{note}"
        )
    idle = runs[IDLE]
    verdict = "within" if idle["seconds"] <= IDLE_TARGET_S else "over"
    seconds = [run["seconds"] for run in idle["series"]]
    print(
        f"\n{LABELS[IDLE]}: {idle['seconds']:.2f} s ({verdict} the {IDLE_TARGET_S:.0f} s "
        f"target; {idle['commits']} commits)\n  the run's whole process, from its start to its "
        f"exit: {idle['process_seconds']:.1f} s (session start {idle['session_seconds']:.1f} s)"
        f"\n  {len(seconds)} such runs back to back: median {statistics.median(seconds):.2f} s, "
        f"slowest {max(seconds):.2f} s"
    )


def memory_row(label: str, tree: dict[str, Any], baseline_pss: int, largest: str) -> None:
    """Print one process tree's peak memory, its PSS beside the baseline's."""
    print(
        f"  {label:68}{mib(tree['peak_tree_rss_kib']):>11}{mib(tree['peak_tree_pss_kib']):>11}"
        f"{tree['peak_tree_pss_kib'] / baseline_pss:7.1f}x{largest:>11}"
        f"{tree['peak_tree_processes']:>6}"
    )


def report_memory(runs: dict[str, dict[str, Any]]) -> None:
    """Print the peak memory of each run's process tree and of the Connect server's."""
    print("\npeak memory of a process tree (the process and all its descendants)")
    print("  RSS sum, every 0.2 s: shared pages counted in every process;")
    print("  PSS sum, every 1 s and at the end: shared pages split among their sharers, and its")
    print("  ratio to the baseline's; getrusage: the largest single process of the run's tree")
    print(f"  {'':68}{'RSS sum':>11}{'PSS sum':>11}{'ratio':>8}{'getrusage':>11}{'procs':>6}")
    baseline_pss = runs[BASELINE]["peak_tree_pss_kib"] or 1
    for mode in (BASELINE, LOCAL, CONNECT):
        figures = runs[mode]
        largest = mib(max(figures["maxrss_self_kib"], figures["maxrss_children_kib"]))
        memory_row(f"{LABELS[mode]}: the run's process", figures, baseline_pss, largest)
    server = runs[CONNECT]["server"]
    label = f"{LABELS[CONNECT]}: the server, during the run"
    memory_row(label, server, baseline_pss, "-")
    series = [run["server"] for run in runs[IDLE]["series"]]
    for number in sorted({1, 2, len(series) // 2, len(series)} & set(range(1, len(series) + 1))):
        label = f"{LABELS[IDLE]} {number} of {len(series)}: the server"
        memory_row(label, series[number - 1], baseline_pss, "-")


# ----- the driver ------------------------------------------------------------------------------
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
    """Produce, then run every ingestion in child processes and report."""
    prepare_topic(bootstrap, args.partitions, external)
    seconds = produce(bootstrap, args.records)
    print(
        f"produced {args.records:,} records in {seconds:.1f} s "
        f"({args.records / seconds:,.0f} records/s; not part of the comparison)",
        flush=True,
    )
    with workspace(args.keep) as workdir:
        invocation = Invocation(bootstrap, args.records, workdir)
        runs: dict[str, dict[str, Any]] = {}
        others = () if args.connect_only else (BASELINE, LOCAL)
        for mode in others:  # before the server starts: it would share the cores
            print(f"running {mode}...", flush=True)
            runs[mode] = run_child(invocation, mode, f"lake-{mode}")
        runs.update(
            connect_runs(
                invocation, args.driver_memory, args.warm_ups, args.idle_runs, json.loads(args.conf)
            )
        )
    report_throughput(args.records, runs)
    if not args.connect_only:
        report_memory(runs)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records to produce")
    parser.add_argument("--partitions", type=int, default=4, help="partitions of the topic")
    parser.add_argument(
        "--driver-memory",
        metavar="SIZE",
        help="spark.driver.memory of the Connect server, e.g. 1g (default: the server's own)",
    )
    parser.add_argument(
        "--conf", default="{}", metavar="JSON",
        help="Spark settings of the Connect server beside its own, as a JSON object",
    )  # fmt: skip
    parser.add_argument(
        "--warm-ups", type=int, default=WARM_UPS,
        help=f"untimed ingestions that warm the server first (default {WARM_UPS})",
    )  # fmt: skip
    parser.add_argument(
        "--idle-runs", type=int, default=IDLE_RUNS,
        help=f"runs with no new records after the timed one (default {IDLE_RUNS})",
    )  # fmt: skip
    parser.add_argument(
        "--connect-only", action="store_true",
        help="only the Connect server's runs (no baseline, no local application)",
    )  # fmt: skip
    parser.add_argument(
        "--keep", metavar="DIR", help="keep the lakes and child logs in DIR (must not exist)"
    )
    parser.add_argument("--mode", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--lake-root", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    parser.add_argument("--server-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.idle_runs < 1:
        parser.error("--idle-runs must be at least 1")
    return args


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
    from lakehouse_tools.broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        print(f"broker: embedded Apache Kafka at {broker.bootstrap_servers}")
        benchmark(broker.bootstrap_servers, args, external=False)


if __name__ == "__main__":
    main()
