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

from lakehouse_assets_tests.conftest import INTERPRETED, TEST_SERVER_JAVA
from lakehouse_tools.postgres import PostgresServer
from lakehouse_tools.spark_server import SparkConnectServer
from resources import LakeResource
from resources.settings import ENV_LAKEHOUSE_ROOT, ENV_METASTORE, ENV_SPARK_REMOTE
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


def schema_folders(postgres: PostgresServer, database: str) -> dict[str, str]:
    """The folder of each schema, as the metastore's own table of schemas holds it."""
    rows = postgres.sql(database, 'SELECT "NAME", "DB_LOCATION_URI" FROM "DBS";')
    return dict(line.split("|", 1) for line in rows.splitlines() if line)


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


@pytest.mark.own_stack
def test_a_shared_metastore_keeps_the_lakes_schemas_in_its_warehouse_and_migrate_mends_them(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    database = f"metastore_{uuid.uuid4().hex[:8]}"
    postgres.create_database(database)
    metastore = postgres.database_url(database)
    root = tmp_path / "lake"
    lake = LakeResource(root=str(root))
    silver = f"{lake.schema_prefix}_silver"
    # The working directory is the repository's, not the lake's: no folder of it is recorded.
    env = {ENV_LAKEHOUSE_ROOT: str(root)}
    conf, java = INTERPRETED, TEST_SERVER_JAVA
    with SparkConnectServer(conf=conf, java_options=java, metastore=metastore, env=env) as server:
        spark = SparkSession.builder.remote(server.url).create()
        rows = spark.createDataFrame([(1, "ada")], "id long, name string")
        lake.append("silver", "accounts", rows)
        assert schema_folders(postgres, database) == {
            "default": f"file:{root}/_warehouse",
            silver: f"file:{root}/_warehouse/{silver}.db",
        }
        # A metastore as an earlier version left it: its schemas in the working directory of
        # the first application on it.
        elsewhere = "file:/home/someone/spark-warehouse"
        postgres.sql(
            database,
            f"""UPDATE "DBS" SET "DB_LOCATION_URI" = '{elsewhere}' WHERE "NAME" = 'default';
            UPDATE "DBS" SET "DB_LOCATION_URI" = '{elsewhere}/{silver}.db'
            WHERE "NAME" = '{silver}';""",
        )
        env = {**os.environ, ENV_METASTORE: metastore, **env, ENV_SPARK_REMOTE: server.url}
        done = subprocess.run(
            [LAKEHOUSE, "migrate"], capture_output=True, text=True, env=env, timeout=600
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert f"{silver}: kept in file:{root}/_warehouse/{silver}.db" in done.stdout
        assert schema_folders(postgres, database) == {
            "default": f"file:{root}/_warehouse",
            silver: f"file:{root}/_warehouse/{silver}.db",
        }
        assert spark.table(lake.table_name("silver", "accounts")).count() == 1
        spark.stop()
