"""Several writers committing to one ``s3a://`` table at once, on the session's S3 server
(S3Proxy): Spark applications, whose log store commits each version with S3's put-if-absent, and
delta-rs, which commits with the same condition; none replaces another's commit."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql import SparkSession

from lakehouse_assets.devtools.s3_endpoint import S3Endpoint
from lakehouse_assets.devtools.spark_server import SparkConnectServer
from lakehouse_assets_tests.conftest import INTERPRETED, S3_BUCKET, TEST_SERVER_JAVA, new_metastore
from resources.object_store import delta_rs_options
from resources.spark_jvm import S3_LOG_STORE

pytestmark = [pytest.mark.external, pytest.mark.own_stack]  # an S3 server, two Spark servers

COMMITS = 50  # per application
ROWS = 3  # per commit


@contextlib.contextmanager
def application(**settings: str) -> Iterator[SparkSession]:
    """A session of a Spark application of its own (a new Connect server), with ``settings``."""
    conf = {**INTERPRETED, **settings}
    metastore = new_metastore()  # an embedded metastore admits one application
    with SparkConnectServer(
        conf=conf, java_options=TEST_SERVER_JAVA, metastore=metastore
    ) as server:
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
