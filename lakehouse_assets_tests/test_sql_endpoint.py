"""SQL for people and BI tools: the Connect server's HiveServer2 endpoint, read with the clients
users use (the wheel's beeline, which is the Hive JDBC driver that DBeaver, Tableau and Metabase
load, and Python's impyla), and a password when one is set."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest
from impala.dbapi import connect
from pyspark.sql import SparkSession

from lakehouse_assets_tests.conftest import INTERPRETED, TEST_SERVER_JAVA, new_metastore
from lakehouse_tools.spark_server import SparkConnectServer
from resources import LakeResource
from resources.settings import ENV_METASTORE, ENV_SPARK_REMOTE, ENV_SQL_PASSWORD, ENV_SQL_USER
from resources.spark_jvm import spark_home, without_connect

LAKEHOUSE = str(Path(sys.executable).parent / "lakehouse")
BEELINE = spark_home() / "bin" / "beeline"  # the command docs/catalog.md shows


def beeline(
    server: SparkConnectServer, database: str, sql: str, user: str = "anyone", password: str = ""
) -> subprocess.CompletedProcess[str]:
    """``sql`` run by the wheel's beeline (the Hive JDBC driver) on a connection whose URL names
    ``database``, as a BI tool's does; its rows as CSV, without headers."""
    url = f"jdbc:hive2://127.0.0.1:{server.sql_port}/{database}"
    command = [str(BEELINE), "-u", url, "-n", user, "-p", password, "--silent=true"]
    command += ["--outputformat=csv2", "--showHeader=false", "-e", sql]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def rows_of(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The lines of rows beeline printed (it echoes its prompt with the first)."""
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return [line.split("> ")[-1] for line in done.stdout.splitlines() if line.strip()]


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


def gold_day(spark: SparkSession, tmp_path: Path, table: str) -> LakeResource:
    """A lake in ``tmp_path`` whose gold ``table`` holds one day of two users' rows."""
    lake = LakeResource(root=str(tmp_path / "lake"))
    rows = spark.createDataFrame(
        [(1, date(2026, 11, 1), 72.5), (2, date(2026, 11, 1), 140.25)],
        "user_id long, date date, avg_bpm double",
    )
    lake.replace_partitions("gold", table, rows, [("date", "=", "2026-11-01")], ["date"])
    return lake


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
    lake = gold_day(spark, tmp_path, "summary")
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
def test_beeline_opens_sessions_on_a_database_and_reads_a_gold_table_and_its_columns(
    sql_server: SparkConnectServer, tmp_path: Path
) -> None:
    spark = SparkSession.builder.remote(sql_server.url).create()
    lake = gold_day(spark, tmp_path, "gym_summary")
    spark.stop()
    gold = f"{lake.schema_prefix}_gold"
    expected = ["1,2026-11-01,72.5", "2,2026-11-01,140.25"]
    # The docs' command: a URL with `default`, the table by its full name.
    query = f"SELECT * FROM {gold}.gym_summary ORDER BY user_id LIMIT 5"
    assert rows_of(beeline(sql_server, "default", query)) == expected
    # A BI tool's connection: the URL names the lake's schema, the table needs no schema.
    described = "SELECT * FROM gym_summary ORDER BY user_id; DESCRIBE gym_summary; SHOW TABLES"
    found = rows_of(beeline(sql_server, gold, described))
    assert found[:2] == expected
    assert found[2:5] == ["user_id,bigint,NULL", "date,date,NULL", "avg_bpm,double,NULL"]
    assert found[-1] == f"{gold},gym_summary,false"
    # USE after connecting.
    used = f"USE {gold}; SELECT count(*) FROM gym_summary"
    assert rows_of(beeline(sql_server, "default", used)) == ["2"]


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
            refused = beeline(server, "default", "SELECT 1 + 1", user, password)
            assert "Error validating the login" in refused.stdout + refused.stderr
            assert "\n2\n" not in refused.stdout
        cursor = sql_cursor(server, "analyst", env[ENV_SQL_PASSWORD])
        cursor.execute("SELECT 1 + 1")  # type: ignore[attr-defined]
        assert cursor.fetchall() == [(2,)]  # type: ignore[attr-defined]
        let_in = beeline(server, "default", "SELECT 1 + 1", "analyst", env[ENV_SQL_PASSWORD])
        assert rows_of(let_in) == ["2"]
        spark = SparkSession.builder.remote(server.url).create()
        assert spark.conf.get("spark.hadoop.fs.s3a.secret.key") == key  # the server has it
        spark.stop()
        processes = subprocess.run(
            ["ps", "-eww", "-o", "args"], capture_output=True, text=True
        ).stdout
        assert "HiveThriftServer2" in processes
        assert key not in processes and env[ENV_SQL_PASSWORD] not in processes


@pytest.mark.own_stack
def test_lakehouse_sql_answers_alone_and_names_the_server_that_holds_its_metastore(
    sql_server: SparkConnectServer, tmp_path: Path
) -> None:
    env = {**without_connect(os.environ), ENV_METASTORE: sql_server.metastore}
    command = [LAKEHOUSE, "sql", "SELECT 1 + 1 AS two"]
    held = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert held.returncode == 1 and held.stdout == ""
    lines = held.stderr.strip().splitlines()
    assert len(lines) == 2, held.stderr[-3000:]
    assert lines[0].endswith(f"and the Spark Connect server at {sql_server.url} holds it.")
    assert lines[1] == f"Run through that server: export SPARK_REMOTE={sql_server.url}"
    table = ["+---+", "|two|", "+---+", "|2  |", "+---+"]
    through = {**env, ENV_SPARK_REMOTE: sql_server.url}
    done = subprocess.run(command, capture_output=True, text=True, env=through, timeout=300)
    assert (done.stdout.split("\n"), done.stderr) == ([*table, "", ""], "")
    # A local Spark of its own, on a metastore no one holds: the answer alone, its log with
    # --verbose.
    alone = {**env, ENV_METASTORE: str(tmp_path / "metastore")}
    done = subprocess.run(command, capture_output=True, text=True, env=alone, timeout=300)
    assert (done.stdout.split("\n"), done.stderr) == ([*table, "", ""], "")
    verbose = [*command, "--verbose"]
    done = subprocess.run(verbose, capture_output=True, text=True, env=alone, timeout=300)
    assert done.stdout.split("\n") == [*table, "", ""]
    assert done.stderr.strip()  # the JVM's own lines
