"""Shared fixtures: one real Kafka broker (emptied for each test) and one Spark application per
test session.

By default the session starts one Spark Connect server from the pyspark wheel and every test, and
every process a test starts (``SPARK_REMOTE`` is exported), is a client of it: the production
shape. With ``LAKEHOUSE_TEST_SPARK=local`` the tests run on a local Spark application in the
test process instead; ``make test`` runs the tests marked ``local_spark`` that way too. (A process
holds either kind of session, never both: PySpark forbids mixing them.)
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from kafka import KafkaAdminClient
from kafka.errors import UnknownTopicOrPartitionError
from pyspark.sql import SparkSession

from lakehouse_tools import sample_data
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.postgres import PostgresServer
from lakehouse_tools.s3_endpoint import S3Endpoint
from lakehouse_tools.sample_data import Message
from lakehouse_tools.spark_server import SparkConnectServer
from resources import ENV_SPARK_REMOTE, SparkResource, build_resources
from resources.settings import ENV_METASTORE, ENV_SCHEMA_PREFIX

SPARK_MODE = os.environ.get("LAKEHOUSE_TEST_SPARK", "connect")
# The catalog of every Spark this test process starts (its Connect servers one after another, or
# its local session) in an embedded metastore of its own: an embedded Derby database admits one
# JVM at a time, and the lanes run side by side. Each test's lake has schemas of its own
# (``schema_prefix``): the session's server serves every test's lake.
os.environ.setdefault(ENV_METASTORE, tempfile.mkdtemp(prefix="lakehouse-metastore-"))
# Profiles after every write cost a few Spark jobs per table: on in the tests that assert them
# (profiling/, test_automation.py), off elsewhere to keep the suite's time.
os.environ.setdefault("LAKEHOUSE_PROFILE", "off")
# The session's server computes expressions interpreted instead of compiling code for each query:
# the tests' tables hold a few hundred rows, where generating and compiling a query's code costs
# more than running it (benchmarks/spark_settings.py compares the sample graph with and without
# them). They are Spark's internal settings, not meant for real volumes. The fault matrix and
# the UI path use them too; the standalone cluster (the demo's and the Dagster CLI's graphs, gold
# against the oracle), the local lane and `make run` keep generated code, so CI runs both.
INTERPRETED: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
# The session's server (and the UI path's) collects garbage with the parallel collector instead of
# G1, the JDK's default, whose concurrent marking the server's growing heap keeps busy.
TEST_SERVER_JAVA = "-XX:+UseParallelGC"


def connect_server() -> SparkConnectServer:
    """A Spark Connect server as the tests run theirs: interpreted, the parallel collector, its
    catalog in a metastore of its own."""
    return SparkConnectServer(
        conf=INTERPRETED, java_options=TEST_SERVER_JAVA, metastore=new_metastore()
    )


def new_metastore() -> str:
    """A new embedded metastore's folder: one Spark application's at a time."""
    return tempfile.mkdtemp(prefix="lakehouse-metastore-")


if SPARK_MODE not in ("connect", "local"):
    raise ValueError(f"LAKEHOUSE_TEST_SPARK must be 'connect' or 'local', got {SPARK_MODE!r}")


# The fixtures that start a service: the session's Spark, broker, PostgreSQL and S3 endpoint, and
# test_ui.py's `dagster dev`. A test that uses one, itself or through another fixture, is marked
# `services`; `make test-quick` runs the others.
SERVICE_FIXTURES = frozenset(
    {"spark_remote", "session_broker", "postgres", "s3_endpoint", "dagster_ui"}
)


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)


S3_BUCKET = "lake"  # the session's S3 endpoint's bucket: each test's lake under a prefix of its own


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[S3Endpoint]:
    """One S3 server on loopback for the session (S3Proxy), holding ``S3_BUCKET``. Its variables
    are exported before the session's Spark starts, so that S3A, delta-rs and pyarrow reach it."""
    with S3Endpoint(buckets=[S3_BUCKET]) as endpoint:
        variables = endpoint.environment()
        saved = {name: os.environ.get(name) for name in variables}
        os.environ.update(variables)
        try:
            yield endpoint
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


@pytest.fixture
def s3_lake_root(s3_endpoint: S3Endpoint) -> str:
    """A lake root of the test's own on the session's S3 endpoint."""
    return f"s3a://{S3_BUCKET}/{uuid.uuid4().hex}"


@pytest.fixture(scope="session")
def spark_remote(s3_endpoint: S3Endpoint) -> Iterator[str | None]:
    """The URL of the session's Spark Connect server (None on a local Spark)."""
    if SPARK_MODE == "local":
        yield None
        return
    with connect_server() as server:
        os.environ[ENV_SPARK_REMOTE] = server.url  # processes the tests start use it too
        try:
            yield server.url
        finally:
            del os.environ[ENV_SPARK_REMOTE]


@pytest.fixture(scope="session")
def spark(spark_remote: str | None) -> Iterator[SparkSession]:
    session = SparkResource(remote=spark_remote).get_session()
    yield session
    if spark_remote:  # release the session while its server runs (at exit it would retry)
        session.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session: Dagster's storage, and the document store."""
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def session_broker() -> Iterator[EmbeddedBroker]:
    """One Apache Kafka broker for the session (a JVM: seconds to start)."""
    with EmbeddedBroker() as running:
        yield running


@pytest.fixture
def broker(session_broker: EmbeddedBroker) -> EmbeddedBroker:
    """The session's broker, emptied of the topics and consumer groups of earlier tests."""
    empty(session_broker.bootstrap_servers)
    return session_broker


def empty(bootstrap_servers: str, timeout_s: float = 30.0) -> None:
    """Delete every topic (but Kafka's own) and consumer group; return once they are gone."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        groups = [group["group_id"] for group in admin.list_groups()]
        if groups:
            admin.delete_groups(groups)
        deadline = time.monotonic() + timeout_s
        while topics := [t for t in admin.list_topics() if not t.startswith("__")]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Topics not deleted within {timeout_s:.0f} s: {topics}")
            with contextlib.suppress(UnknownTopicOrPartitionError):
                admin.delete_topics(topics)
            time.sleep(0.1)
    finally:
        admin.close()


@pytest.fixture(autouse=True)
def schema_prefix(monkeypatch: pytest.MonkeyPatch) -> str:
    """The schema prefix of the test's lake (``LAKEHOUSE_SCHEMA_PREFIX``, exported for the
    processes the test starts): its tables never meet another test's in the catalog."""
    prefix = f"t{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv(ENV_SCHEMA_PREFIX, prefix)
    return prefix


@pytest.fixture
def lake_root(tmp_path: Path) -> Path:
    return tmp_path / "lake"


@pytest.fixture
def resources(
    broker: EmbeddedBroker, lake_root: Path, spark: SparkSession, spark_remote: str | None
) -> dict[str, Any]:
    return lake_resources(broker, str(lake_root), spark_remote)


@pytest.fixture
def s3_resources(
    broker: EmbeddedBroker, s3_lake_root: str, spark: SparkSession, spark_remote: str | None
) -> dict[str, Any]:
    """The resources of a lake on the session's S3 endpoint (``s3_lake_root``)."""
    return lake_resources(broker, s3_lake_root, spark_remote)


def lake_resources(broker: EmbeddedBroker, root: str, spark_remote: str | None) -> dict[str, Any]:
    """The resources of a lake at ``root`` with the session's broker and Spark."""
    env = {
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
        "LAKEHOUSE_ROOT": root,
        ENV_SCHEMA_PREFIX: os.environ[ENV_SCHEMA_PREFIX],
    }
    if spark_remote:
        env[ENV_SPARK_REMOTE] = spark_remote
    return build_resources(env)


@pytest.fixture
def env(lake_root: Path, spark_remote: str | None) -> dict[str, Any]:
    """The resources of a lake in ``lake_root`` on the session's Spark, without a broker."""
    environ = {"LAKEHOUSE_ROOT": str(lake_root), ENV_SCHEMA_PREFIX: os.environ[ENV_SCHEMA_PREFIX]}
    if spark_remote:
        environ[ENV_SPARK_REMOTE] = spark_remote
    return build_resources(environ)


def produce(
    bootstrap_servers: str,
    topic: str,
    values: Iterable[dict[str, Any]],
    key_field: str | None = None,
) -> int:
    """Produce JSON values with normal producer batching; returns the count."""
    messages = [
        Message(topic, None if key_field is None else str(value[key_field]), json.dumps(value))
        for value in values
    ]
    sample_data.produce(bootstrap_servers, messages)
    return len(messages)


def observations(result: dg.ExecuteInProcessResult) -> dict[dg.AssetKey, dg.AssetObservation]:
    """The asset observations a job recorded, by asset, in the order recorded."""
    return {
        event.asset_observation_data.asset_observation.asset_key: (
            event.asset_observation_data.asset_observation
        )
        for event in result.all_events
        if event.event_type == dg.DagsterEventType.ASSET_OBSERVATION
    }
