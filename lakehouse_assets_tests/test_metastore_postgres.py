"""The production shape of the catalog: a metastore in PostgreSQL, which outlives the server that
registered the tables and is shared by every Spark application pointed at it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.devtools.postgres import PostgresServer
from lakehouse_assets.devtools.spark_server import SparkConnectServer
from lakehouse_assets_tests.conftest import INTERPRETED, TEST_SERVER_JAVA
from resources import LakeResource
from resources.settings import ENV_METASTORE
from resources.spark_jvm import without_connect

LAKEHOUSE = str(Path(sys.executable).parent / "lakehouse")


@contextlib.contextmanager
def session_on(metastore: str) -> Iterator[SparkSession]:
    """A session of a new Connect server whose catalog is in ``metastore``."""
    conf, java = INTERPRETED, TEST_SERVER_JAVA
    with SparkConnectServer(conf=conf, java_options=java, metastore=metastore) as server:
        spark = SparkSession.builder.remote(server.url).create()
        try:
            yield spark
        finally:  # released while its server runs (at exit it would retry for minutes)
            spark.stop()


@pytest.mark.own_stack
def test_tables_registered_in_postgresql_outlive_the_server_and_a_second_application_sees_them(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    database = f"metastore_{uuid.uuid4().hex[:8]}"
    postgres.create_database(database)
    metastore = postgres.database_url(database)
    lake = LakeResource(root=str(tmp_path / "lake"))
    users = [(1, "ada"), (2, "")]
    with session_on(metastore) as spark:
        lake.append("silver", "users", spark.createDataFrame(users, "user_id long, name string"))
    # Hive's own tables, created whole beforehand: with their foreign keys, in PostgreSQL.
    keys = postgres.sql(
        database,
        "SELECT count(*) FROM information_schema.table_constraints "
        "WHERE constraint_type = 'FOREIGN KEY';",
    )
    assert int(keys.strip()) > 0
    table = lake.table_name("silver", "users")
    with session_on(metastore) as spark:  # a new application on the same metastore
        assert sorted(spark.table(table).collect()) == users
        # A second application at once: a local session of the `lakehouse` command.
        env = {**without_connect(os.environ), ENV_METASTORE: metastore}
        done = subprocess.run(
            [LAKEHOUSE, "sql", f"SELECT count(*) AS users FROM {table}"],
            capture_output=True, text=True, env=env, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert "|users|" in done.stdout.replace(" ", "") and "|2|" in done.stdout.replace(" ", "")
        assert (
            spark.sql(f"SHOW TABLES IN {lake.schema_prefix}_silver").collect()[0].tableName
            == "users"
        )
