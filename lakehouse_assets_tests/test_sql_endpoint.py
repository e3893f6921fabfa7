"""SQL for people and BI tools: the Connect server's HiveServer2 endpoint, read with a real
HiveServer2 client (impyla), and a password when one is set."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from impala.dbapi import connect
from pyspark.sql import SparkSession

from lakehouse_assets.devtools.spark_server import SparkConnectServer
from lakehouse_assets_tests.conftest import INTERPRETED, TEST_SERVER_JAVA, new_metastore
from resources import LakeResource
from resources.settings import ENV_SQL_PASSWORD, ENV_SQL_USER

LAKEHOUSE = str(Path(sys.executable).parent / "lakehouse")


def sql_cursor(server: SparkConnectServer, user: str = "anyone", password: str = "any") -> object:
    """A HiveServer2 cursor on ``server``'s SQL endpoint (impyla, as a BI tool's driver)."""
    connection = connect(
        host="127.0.0.1",
        port=server.sql_port,
        auth_mechanism="PLAIN",
        user=user,
        password=password,
        timeout=60,
    )
    return connection.cursor()


@pytest.fixture(scope="module")
def sql_server() -> Iterator[SparkConnectServer]:
    """A Connect server that also serves SQL (HiveServer2's protocol) on a free port."""
    with SparkConnectServer(
        conf=INTERPRETED, java_options=TEST_SERVER_JAVA, metastore=new_metastore(), sql_port=0
    ) as server:
        yield server


@pytest.mark.own_stack
def test_a_jdbc_client_reads_a_gold_table_and_its_columns(
    sql_server: SparkConnectServer, tmp_path: Path
) -> None:
    session_server = sql_server
    spark = SparkSession.builder.remote(sql_server.url).create()
    lake = LakeResource(root=str(tmp_path / "lake"))
    rows = spark.createDataFrame(
        [(1, date(2026, 11, 1), 72.5), (2, date(2026, 11, 1), 140.25)],
        "user_id long, date date, avg_bpm double",
    )
    lake.replace_partitions("gold", "summary", rows, [("date", "=", "2026-11-01")], ["date"])
    schema = f"{lake.schema_prefix}_gold"
    cursor = sql_cursor(session_server)
    cursor.execute(f"SELECT user_id, avg_bpm FROM {schema}.summary ORDER BY user_id")  # type: ignore[attr-defined]
    assert cursor.fetchall() == [(1, 72.5), (2, 140.25)]  # type: ignore[attr-defined]
    # The client's metadata call (HiveServer2's GetColumns), as a BI tool lists a table's columns:
    # the columns the table has, not Delta's placeholder.
    columns = cursor.get_table_schema("summary", database_name=schema)  # type: ignore[attr-defined]
    assert columns == [("user_id", "BIGINT"), ("date", "DATE"), ("avg_bpm", "DOUBLE")]
    # A column added by a write by location reaches the metadata after that write.
    wider = spark.createDataFrame(
        [(3, date(2026, 11, 2), 90.0, "ok")], "user_id long, date date, avg_bpm double, note string"
    )
    lake.append("gold", "summary", wider, ["date"])
    columns = cursor.get_table_schema("summary", database_name=schema)  # type: ignore[attr-defined]
    assert columns[-1] == ("note", "STRING")
    cursor.execute(f"SHOW TABLES IN {schema}")  # type: ignore[attr-defined]
    assert [row[1] for row in cursor.fetchall()] == ["summary"]  # type: ignore[attr-defined]
    spark.stop()


@pytest.mark.own_stack
def test_a_password_set_on_the_server_is_required_and_no_credential_is_on_its_command_line() -> (
    None
):
    env = {ENV_SQL_USER: "analyst", ENV_SQL_PASSWORD: "s3cret-" + uuid.uuid4().hex}
    key = "never-shown-" + uuid.uuid4().hex  # an object store's secret key, as a user sets it
    conf = {**INTERPRETED, "spark.hadoop.fs.s3a.secret.key": key}
    with SparkConnectServer(
        conf=conf, java_options=TEST_SERVER_JAVA, metastore=new_metastore(), env=env, sql_port=0
    ) as server:
        for user, password in [("analyst", "wrong"), ("other", env[ENV_SQL_PASSWORD])]:
            with pytest.raises(Exception, match="Error validating the login"):
                sql_cursor(server, user, password)
        cursor = sql_cursor(server, "analyst", env[ENV_SQL_PASSWORD])
        cursor.execute("SELECT 1 + 1")  # type: ignore[attr-defined]
        assert cursor.fetchall() == [(2,)]  # type: ignore[attr-defined]
        spark = SparkSession.builder.remote(server.url).create()
        assert spark.conf.get("spark.hadoop.fs.s3a.secret.key") == key  # the server has it
        spark.stop()
        processes = subprocess.run(
            ["ps", "-eww", "-o", "args"], capture_output=True, text=True
        ).stdout
        assert "HiveThriftServer2" in processes
        assert key not in processes and env[ENV_SQL_PASSWORD] not in processes
