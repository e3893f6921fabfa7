"""Several Spark applications committing to one ``s3a://`` table at once, on the session's S3
server (S3Proxy): the log store commits each version with S3's put-if-absent, so none replaces
another's commit."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.devtools.s3_endpoint import S3Endpoint
from lakehouse_assets.devtools.spark_server import SparkConnectServer
from lakehouse_assets_tests.conftest import INTERPRETED, S3_BUCKET, TEST_SERVER_JAVA, new_metastore
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


def append_each(spark: SparkSession, table: str, writer: int) -> None:
    """``COMMITS`` appends of ``ROWS`` rows each, every row's id distinct across writers."""
    for commit in range(COMMITS):
        first = (writer * COMMITS + commit) * ROWS
        rows = spark.range(first, first + ROWS).withColumnRenamed("id", "row")
        rows.write.format("delta").mode("append").save(table)


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
