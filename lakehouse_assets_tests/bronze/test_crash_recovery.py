"""A bronze run that dies in the middle of a batch, then runs again, loses nothing and
duplicates nothing.

A batch of Delta's streaming sink passes through three states on disk: its offsets recorded in
the checkpoint (``offsets/<batch>``), its files written and committed to the table
(``_delta_log/<version>.json``, with the query id and batch id), and the batch recorded as done
(``commits/<batch>``). A crash leaves one of two states: the files written but not committed, or
the commit made but the batch not recorded as done. The first tests build each state exactly as
a crash leaves it (from a clean run, its last commit or its done-marker removed); the last kills
the writing process (a local Spark application: driver and executors) while it streams to a lake
on object storage (an ``s3a://`` root on the session's S3 endpoint), and the one after it stops
the object store itself between a batch's data files and its commit.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE, CHECKPOINTS_DIR, stream_name
from lakehouse_assets.fitness.names import TOPIC_BPM
from lakehouse_assets_tests.bronze import crash_run
from lakehouse_assets_tests.bronze.helpers import (
    bronze_sequence_numbers,
    delta_rs_sequence_numbers,
    heart_rates,
    materialize_bpm,
)
from lakehouse_assets_tests.conftest import empty, produce
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.s3_endpoint import S3Endpoint
from resources import ENV_SPARK_REMOTE, KafkaResource, build_resources, files
from resources.object_store import delta_rs_options
from resources.settings import ENV_SCHEMA_PREFIX

PER_BATCH = 1000
LAST_BATCH = 4  # 5000 records, 1000 a batch: batches 0 to 4, table versions 0 to 4
NEW = 700  # records produced after the crash, before the run again
FILES_NOT_COMMITTED = "files written, not committed"
COMMITTED_NOT_DONE = "committed, not done"


def delta_log(lake_root: Path) -> Path:
    return lake_root / BRONZE / TOPIC_BPM / "_delta_log"


def checkpoint(lake_root: Path) -> Path:
    return lake_root / CHECKPOINTS_DIR / stream_name(BRONZE, TOPIC_BPM)


def remove(file: Path) -> None:
    """Remove a file as if it had never been written: with the checksum file Hadoop's local file
    system keeps beside it (``.<name>.crc``)."""
    file.unlink()
    file.with_name(f".{file.name}.crc").unlink()


def lake_in(root: Path, servers: str, spark_remote: str | None) -> dict[str, Any]:
    # Schemas of the lake's own in the catalog: the module's lake and each test's copy of it.
    prefix = "t" + hashlib.sha1(str(root).encode()).hexdigest()[:12]
    env = {"KAFKA_BOOTSTRAP_SERVERS": servers, "LAKEHOUSE_ROOT": str(root)}
    env[ENV_SCHEMA_PREFIX] = prefix
    if spark_remote:
        env[ENV_SPARK_REMOTE] = spark_remote
    resources = build_resources(env)
    resources["kafka"] = KafkaResource(bootstrap_servers=servers, max_records_per_trigger=PER_BATCH)
    return resources


@pytest.fixture(scope="module")
def five_batches(
    tmp_path_factory: pytest.TempPathFactory,
    session_broker: EmbeddedBroker,
    spark_remote: str | None,
) -> Path:
    """A lake whose bpm stream committed batches 0 to 4 of 5000 records, and NEW records more
    in the topic. Each test works on a copy at a path of its own, so no Spark of this session
    has that table's log cached when the test changes it."""
    servers = session_broker.bootstrap_servers
    empty(servers)
    # One partition: batches of exactly PER_BATCH records (Spark splits a limit across partitions
    # in proportion to their backlogs, rounding).
    KafkaResource(bootstrap_servers=servers).create_topic(TOPIC_BPM, partitions=1)
    produce(servers, TOPIC_BPM, heart_rates(0, 5000))
    root = tmp_path_factory.mktemp("five") / "lake"
    materialize_bpm(lake_in(root, servers, spark_remote))
    assert (checkpoint(root) / "commits" / str(LAST_BATCH)).is_file()
    assert not (checkpoint(root) / "offsets" / str(LAST_BATCH + 1)).exists()
    produce(servers, TOPIC_BPM, heart_rates(5000, NEW))  # new data meanwhile
    return root


@pytest.mark.parametrize("crash", [FILES_NOT_COMMITTED, COMMITTED_NOT_DONE])
def test_a_batch_interrupted_then_run_again_is_exactly_once(
    crash: str,
    five_batches: Path,
    session_broker: EmbeddedBroker,
    tmp_path: Path,
    spark: SparkSession,
    spark_remote: str | None,
) -> None:
    root = tmp_path / "lake"
    shutil.copytree(five_batches, root)
    remove(checkpoint(root) / "commits" / str(LAST_BATCH))  # the batch is not done
    if crash == FILES_NOT_COMMITTED:
        remove(delta_log(root) / f"{LAST_BATCH:020d}.json")
        remove(delta_log(root) / f"{LAST_BATCH:020d}.crc")  # Delta's summary of the version
    files_before = set((root / BRONZE / TOPIC_BPM).rglob("*.parquet"))
    resources = lake_in(root, session_broker.bootstrap_servers, spark_remote)

    result = materialize_bpm(resources)

    assert bronze_sequence_numbers(spark, resources) == list(range(5000 + NEW))
    metadata = result.asset_materializations_for_node("bronze__bpm")[0].metadata
    run_again = crash == FILES_NOT_COMMITTED  # the batch is committed by this run
    assert metadata["batches_skipped"].value == ([] if run_again else [LAST_BATCH])
    assert metadata["rows_written"].value == (PER_BATCH + NEW if run_again else NEW)
    snapshot = {Path(uri) for uri in resources["lake"].table(BRONZE, TOPIC_BPM).file_uris()}
    # The files of the batch never committed are in no snapshot: VACUUM's to remove.
    assert bool(files_before - snapshot) == run_again


def test_a_run_killed_while_it_streams_to_object_storage_then_run_again_is_exactly_once(
    broker: EmbeddedBroker, s3_lake_root: str, s3_resources: dict[str, Any], spark: SparkSession
) -> None:
    servers = broker.bootstrap_servers
    s3_resources["kafka"].create_topic(TOPIC_BPM, partitions=3)
    produce(servers, TOPIC_BPM, heart_rates(0, 5000))
    run = crash_run.start(servers, s3_lake_root, per_batch=250)  # 20 batches
    stream = f"{s3_lake_root}/{CHECKPOINTS_DIR}/{stream_name(BRONZE, TOPIC_BPM)}"
    deadline = time.monotonic() + 300
    while files.read_text(f"{stream}/offsets/3") is None:  # batch 3 planned: files being written
        assert run.poll() is None, run.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)  # a batch on S3 takes longer: it is still writing when killed
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert files.read_text(f"{stream}/commits/19") is None  # killed mid-stream

    produce(servers, TOPIC_BPM, heart_rates(5000, NEW))
    materialize_bpm(s3_resources)
    assert bronze_sequence_numbers(spark, s3_resources) == list(range(5000 + NEW))


def test_a_commit_cut_off_by_the_object_store_stopping_leaves_a_table_read_whole_then_once(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    # An S3 server of the test's own, stopped (SIGKILL) once a batch's first data file is on its
    # disk and before that batch's _delta_log/<version>.json is, then started again on the same
    # folder and port. The writer, which could commit nothing meanwhile, is then killed.
    servers = broker.bootstrap_servers
    # One partition: batches of exactly 250 records, in order (as `five_batches`).
    KafkaResource(bootstrap_servers=servers).create_topic(TOPIC_BPM, partitions=1)
    produce(servers, TOPIC_BPM, heart_rates(0, 5000))
    folder = tmp_path / "s3"
    s3 = S3Endpoint(buckets=["lake"], folder=folder).start()
    port, env, s3_pid = s3.port, s3.environment(), s3.pid
    assert s3_pid is not None
    root = "s3a://lake/lake"
    lake_on_disk = folder / "lake" / "lake"
    table_on_disk = lake_on_disk / BRONZE / TOPIC_BPM
    offsets = lake_on_disk / CHECKPOINTS_DIR / stream_name(BRONZE, TOPIC_BPM) / "offsets"
    try:
        run = crash_run.start(servers, root, per_batch=250, env=env)  # 20 batches
        try:
            deadline = time.monotonic() + 300
            while not (offsets / "3").is_file():  # batch 3 planned (version 3 is its commit)
                assert run.poll() is None, run.communicate()[1][-3000:]
                assert time.monotonic() < deadline
                time.sleep(0.01)
            written = set(table_on_disk.rglob("*.parquet"))
            while set(table_on_disk.rglob("*.parquet")) == written:  # batch 3's first data file
                assert run.poll() is None, run.communicate()[1][-3000:]
                assert time.monotonic() < deadline
                time.sleep(0.001)
            os.killpg(s3_pid, signal.SIGKILL)
            time.sleep(3)  # the writer cannot reach the store
        finally:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        s3.stop()
        assert not (table_on_disk / "_delta_log" / f"{3:020d}.json").exists()  # cut off

        s3 = S3Endpoint(port=port, buckets=["lake"], folder=folder).start()
        uri = "s3://lake/lake/" + f"{BRONZE}/{TOPIC_BPM}"
        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            options = delta_rs_options()
            # Readable, as of the last version committed: batches 0 to 2, whole, once.
            before = DeltaTable(uri, storage_options=options)
            assert before.version() == 2
            assert delta_rs_sequence_numbers(before) == list(range(3 * 250))
            committed = {Path(uri).name for uri in before.file_uris()}
            assert {f.name for f in table_on_disk.rglob("*.parquet")} - committed  # batch 3's
            produce(servers, TOPIC_BPM, heart_rates(5000, NEW))
            rerun = crash_run.start(servers, root, per_batch=5000 + NEW, env=env)
            _, errors = rerun.communicate(timeout=600)
            assert rerun.returncode == 0, errors[-3000:]
            after = DeltaTable(uri, storage_options=options)
            assert delta_rs_sequence_numbers(after) == list(range(5000 + NEW))  # every record, once
    finally:
        s3.stop()
