"""Several writers committing to one ``s3a://`` table at once, on the session's S3 server
(S3Proxy): Spark applications, whose log store commits each version with S3's put-if-absent, and
delta-rs, which commits with the same condition; none replaces another's commit. And one bronze
stream run by two Spark applications at once, whose checkpoint files are created with the same
condition: every record lands once."""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE
from lakehouse_assets.fitness.names import TOPIC_BPM
from lakehouse_assets_tests.bronze import crash_run
from lakehouse_assets_tests.bronze.helpers import delta_rs_sequence_numbers, heart_rates
from lakehouse_assets_tests.conftest import (
    INTERPRETED,
    S3_BUCKET,
    TEST_SERVER_JAVA,
    new_metastore,
    produce,
)
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.s3_endpoint import S3Endpoint
from lakehouse_tools.spark_server import SparkConnectServer
from resources import ENV_SPARK_REMOTE, KafkaResource
from resources.object_store import delta_rs_options
from resources.spark_jvm import S3_LOG_STORE

pytestmark = [pytest.mark.external, pytest.mark.own_stack]  # an S3 server, two Spark servers

COMMITS = 50  # per application
ROWS = 3  # per commit


@contextlib.contextmanager
def connect_server() -> Iterator[SparkConnectServer]:
    """A Spark application of its own: a new Connect server, with a metastore of its own (an
    embedded metastore admits one application)."""
    metastore = new_metastore()
    with SparkConnectServer(
        conf=INTERPRETED, java_options=TEST_SERVER_JAVA, metastore=metastore
    ) as server:
        yield server


@contextlib.contextmanager
def application() -> Iterator[SparkSession]:
    """A session of a Spark application of its own (a new Connect server)."""
    with connect_server() as server:
        spark = SparkSession.builder.remote(server.url).create()
        try:
            yield spark
        finally:
            spark.stop()


def first_rows(writer: int) -> Iterator[int]:
    """The first row of each of a writer's ``COMMITS`` commits, distinct across writers."""
    return (((writer * COMMITS) + commit) * ROWS for commit in range(COMMITS))


def append_each(spark: SparkSession, table: str, writer: int) -> None:
    """``COMMITS`` appends of ``ROWS`` rows each, through Spark."""
    for first in first_rows(writer):
        rows = spark.range(first, first + ROWS).withColumnRenamed("id", "row")
        rows.write.format("delta").mode("append").save(table)


def append_each_with_delta_rs(table: str, writer: int) -> None:
    """``COMMITS`` appends of ``ROWS`` rows each, through delta-rs (its ``s3://`` URI)."""
    uri = "s3://" + table.removeprefix("s3a://")
    for first in first_rows(writer):
        rows = pa.table({"row": pa.array(range(first, first + ROWS), pa.int64())})
        write_deltalake(uri, rows, mode="append", storage_options=delta_rs_options())


def data_commits(spark: SparkSession, table: str) -> int:
    """How many versions of ``table`` added rows (its history, as Delta reads it)."""
    history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
    return sum(int((h.operationMetrics or {}).get("numOutputRows", 0)) > 0 for h in history)


def test_two_applications_appending_to_one_table_lose_no_commit(s3_endpoint: S3Endpoint) -> None:
    table = f"s3a://{S3_BUCKET}/{uuid.uuid4().hex}/rows"
    with application() as first, application() as second:
        assert first.conf.get("spark.delta.logStore.s3a.impl") == S3_LOG_STORE
        first.range(0).withColumnRenamed("id", "row").write.format("delta").save(table)
        with ThreadPoolExecutor(max_workers=2) as pool:
            writes = [pool.submit(append_each, s, table, n) for n, s in enumerate([first, second])]
            for write in writes:
                write.result()
        rows = sorted(row.row for row in first.read.format("delta").load(table).collect())
        assert rows == list(range(2 * COMMITS * ROWS))  # every row, once
        assert data_commits(first, table) == 2 * COMMITS


def test_a_delta_rs_writer_beside_a_spark_application_loses_no_commit(
    s3_endpoint: S3Endpoint,
) -> None:
    table = f"s3a://{S3_BUCKET}/{uuid.uuid4().hex}/rows"
    with application() as spark:
        spark.range(0).withColumnRenamed("id", "row").write.format("delta").save(table)
        with ThreadPoolExecutor(max_workers=2) as pool:
            writes = [
                pool.submit(append_each, spark, table, 0),
                pool.submit(append_each_with_delta_rs, table, 1),
            ]
            for write in writes:
                write.result()
        rows = sorted(row.row for row in spark.read.format("delta").load(table).collect())
        assert rows == list(range(2 * COMMITS * ROWS))  # every row, once
        history = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()
        engines = [h.engineInfo or "" for h in history if h.version > 0]
        assert len(engines) == 2 * COMMITS  # each writer's commits, none replaced
        assert sum("delta-rs" in engine for engine in engines) == COMMITS


# A run stopped because another recorded the stream's next batch first.
CONCURRENT_RUN = re.compile(r"StreamRunElsewhere: The stream lakehouse-bronze-bpm is being run by")


def test_one_bronze_stream_run_by_two_applications_at_once_lands_every_record_once(
    broker: EmbeddedBroker, s3_endpoint: S3Endpoint
) -> None:
    servers = broker.bootstrap_servers
    KafkaResource(bootstrap_servers=servers).create_topic(TOPIC_BPM, partitions=2)
    records = 4000
    produce(servers, TOPIC_BPM, heart_rates(0, records))
    root = f"s3a://{S3_BUCKET}/{uuid.uuid4().hex}"
    with connect_server() as first, connect_server() as second:
        runs = [
            crash_run.start(servers, root, per_batch=200, env={ENV_SPARK_REMOTE: server.url})
            for server in (first, second)
        ]  # 20 batches each, from the same checkpoint
        with ThreadPoolExecutor(max_workers=2) as pool:  # each one's output read as it comes
            errors = list(pool.map(lambda run: run.communicate(timeout=900)[1], runs))
        outcomes = [(run.returncode, error) for run, error in zip(runs, errors, strict=True)]
        # A run that lost the creation of a batch's checkpoint file stopped there, saying so; the
        # other ran to the end.
        assert 0 in [code for code, _ in outcomes], outcomes[0][1][-3000:]
        for code, errors in outcomes:
            assert code == 0 or CONCURRENT_RUN.search(errors), errors[:2000] + errors[-2000:]
        again = crash_run.start(servers, root, per_batch=200, env={ENV_SPARK_REMOTE: first.url})
        errors = again.communicate(timeout=900)[1]  # read as it comes: a full pipe would block
        assert again.returncode == 0, errors[-3000:]
    table = DeltaTable(f"{root}/{BRONZE}/{TOPIC_BPM}", storage_options=delta_rs_options())
    assert delta_rs_sequence_numbers(table) == list(range(records))
