"""Debezium's own PostgreSQL connector, in Kafka Connect standalone, writing to the broker from a
PostgreSQL with logical replication; silver is checked against the database's own rows (issue 58,
items 4 and 5). The connector runs at its defaults (JsonConverter with schemas, precise decimals,
adaptive times, REPLICA IDENTITY DEFAULT) but for sending truncates.

The changes: every column type of the table below, NULL beside '', an update leaving a TOASTed
text unchanged (the connector sends its placeholder), a column added, a delete, a key deleted
and inserted again, REPLICA IDENTITY FULL, the worker killed and restarted (it sends again what
it had not committed since its last offsets), then a truncate and rows after it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg2
from kafka import KafkaConsumer
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.constants import SILVER, asset_key
from lakehouse_assets.devtools.broker import EmbeddedBroker
from lakehouse_assets.devtools.kafka_connect import KafkaConnect, postgres_connector
from lakehouse_assets.devtools.postgres import PostgresServer
from lakehouse_assets.sources.assets import source_assets
from lakehouse_assets.sources.declarations import load_declaration
from resources import LakeResource

DATABASE, TABLE = "shop", "customers"
TOPIC = f"{DATABASE}.public.{TABLE}"
LONG_NOTE = "toasted " * 1000  # 8 KB: stored out of line (STORAGE EXTERNAL: not compressed)
TABLE_DDL = f"""
CREATE TABLE {TABLE} (
    id serial PRIMARY KEY, name text, note text, balance numeric(12,2), ratio numeric,
    born date, seen timestamp(6), seen_tz timestamptz, doc jsonb, active boolean,
    visits smallint, big bigint, uid uuid, score double precision, raw bytea
);
ALTER TABLE {TABLE} ALTER COLUMN note SET STORAGE EXTERNAL;
"""
COLUMNS = ["id", "name", "note", "balance", "ratio", "born", "seen", "seen_tz", "doc", "active",
           "visits", "big", "uid", "score", "raw"]  # fmt: skip
TIMESTAMPS = ("seen", "seen_tz")
FIRST = [  # each statement its own transaction
    f"INSERT INTO {TABLE} (name, note, balance, ratio, born, seen, seen_tz, doc, active, visits, "
    "big, uid, score, raw) VALUES ('Ann', '" + LONG_NOTE + "', 199605.94, 3.14159, '1990-02-28', "
    "'2026-11-01 08:00:00.123456', '2026-11-01 08:00:00.5+02', '{\"a\": [1, 2]}', true, 7, "
    "9007199254740993, 'b68a35a7-17ad-35b3-af2a-ae46edb4545a', 1.5, '\\xdeadbeef')",
    f"INSERT INTO {TABLE} (name, note) VALUES ('', NULL)",  # '' beside NULL, the rest NULL
    f"INSERT INTO {TABLE} (name, balance, ratio) VALUES ('Cy', -0.01, 12345678901234567890.5)",
    f"UPDATE {TABLE} SET name = 'Anna' WHERE id = 1",  # the note unchanged: the placeholder
    f"UPDATE {TABLE} SET balance = 10 WHERE id = 2",
    f"DELETE FROM {TABLE} WHERE id = 3",
    f"ALTER TABLE {TABLE} ADD COLUMN tier int",
    f"INSERT INTO {TABLE} (name, tier) VALUES ('Di', 2)",
    f"UPDATE {TABLE} SET tier = 1 WHERE id = 1",
    f"INSERT INTO {TABLE} (id, name) VALUES (3, 'Cy again')",  # inserted after its delete
    f"INSERT INTO {TABLE} (id, name) VALUES (50, 'sentinel 1')",
]
WHILE_DOWN = [  # while the worker is down; it was killed after the statements above
    f"ALTER TABLE {TABLE} REPLICA IDENTITY FULL",
    f"UPDATE {TABLE} SET name = 'Anne' WHERE id = 1",
    f"DELETE FROM {TABLE} WHERE id = 4",
    f"INSERT INTO {TABLE} (id, name) VALUES (51, 'sentinel 2')",
]
TRUNCATED = [
    f"TRUNCATE {TABLE}",
    f"INSERT INTO {TABLE} (id, name, tier) VALUES (60, 'after the truncate', 3)",
    f"UPDATE {TABLE} SET name = 'after it, updated' WHERE id = 60",
    f"INSERT INTO {TABLE} (id, name) VALUES (52, 'sentinel 3')",
]


def wait_for(broker: EmbeddedBroker, name: str, timeout_s: float = 120.0) -> None:
    """Until the topic holds the change inserting the row named ``name``."""
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=broker.bootstrap_servers, auto_offset_reset="earliest",
        consumer_timeout_ms=1000,
    )  # fmt: skip
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for message in consumer:
                payload = json.loads(message.value)["payload"] if message.value else {}
                if (payload.get("after") or {}).get("name") == name:
                    return
        raise AssertionError(f"no change of {name!r} on {TOPIC} within {timeout_s:.0f} s")
    finally:
        consumer.close()


def flushed(offsets: Path, timeout_s: float = 30.0) -> None:
    """Until the worker has written its source offsets once more: killed after that, it goes on
    from them when it starts again (killed before its first write, it would snapshot the table
    again, and a snapshot sends no delete of a row deleted meanwhile)."""
    before = offsets.stat().st_mtime_ns if offsets.exists() else 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if offsets.exists() and offsets.stat().st_mtime_ns > before:
            return
        time.sleep(0.1)
    raise AssertionError(f"the worker wrote no offsets to {offsets} within {timeout_s:.0f} s")


def database_rows(postgres: PostgresServer, columns: list[str]) -> list[tuple]:
    """The table's rows by id, as psycopg2 reads them, in the forms silver is compared in."""
    connection = psycopg2.connect(
        host="127.0.0.1", port=postgres.port, user=postgres.user, dbname=DATABASE
    )
    with connection, connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(columns)} FROM {TABLE} ORDER BY id")
        rows = cursor.fetchall()
    connection.close()
    return [tuple(map(_plain, columns, row)) for row in rows]


def _plain(name: str, value: Any) -> Any:
    if isinstance(value, datetime):  # a timestamp's wall clock is kept as UTC (docs/sources.md)
        value = value.astimezone(UTC) if value.tzinfo else value
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, memoryview):
        return bytes(value)
    if name == "doc" and value is not None:
        return json.dumps(value, sort_keys=True)
    return value


def silver_rows(spark: SparkSession, lake: LakeResource, columns: list[str]) -> list[tuple]:
    frame = lake.read(spark, SILVER, TABLE)
    selected = [
        F.date_format(c, "yyyy-MM-dd HH:mm:ss.SSSSSS").alias(c) if c in TIMESTAMPS else F.col(c)
        for c in columns
    ]
    rows = frame.select(*selected).orderBy("id").collect()
    return [tuple(map(_stored, columns, row)) for row in rows]


def _stored(name: str, value: Any) -> Any:
    if isinstance(value, bytearray):
        return bytes(value)
    if name == "doc" and value is not None:
        return json.dumps(json.loads(value), sort_keys=True)
    return value


def materialize(source: Any, resources: dict[str, Any]) -> dg.ExecuteInProcessResult:
    result = dg.materialize(source_assets(source), resources=resources)
    assert result.success
    return result


def test_silver_equals_the_database_through_debeziums_connector(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    (tmp_path / f"{TABLE}.yaml").write_text(
        f"topic: {TOPIC}\nformat: debezium-json\nmode: cdc-scd1\nkeys: [id]\n"
        "order_by: source.lsn\ntruncate: apply\n"
    )
    source = load_declaration(tmp_path / f"{TABLE}.yaml")
    lake: LakeResource = resources["lake"]
    with PostgresServer(settings={"wal_level": "logical"}) as postgres:
        postgres.create_database(DATABASE)
        postgres.sql(DATABASE, TABLE_DDL)
        connector = postgres_connector(
            DATABASE, "127.0.0.1", postgres.port, postgres.user, DATABASE, [f"public.{TABLE}"],
            **{"skipped.operations": "none"},
        )  # fmt: skip
        offsets = tmp_path / "connect"
        with KafkaConnect(broker.bootstrap_servers, connector, data_dir=offsets) as connect:
            for statement in FIRST:
                postgres.sql(DATABASE, statement)
            wait_for(broker, "sentinel 1")
            flushed(offsets / "offsets")
            assert connect.pid is not None
            os.kill(connect.pid, signal.SIGKILL)
        result = materialize(source, resources)
        columns = [*COLUMNS, "tier"]
        assert silver_rows(spark, lake, columns) == database_rows(postgres, columns)
        key = asset_key(SILVER, TABLE)
        (silver,) = [m for m in result.get_asset_materialization_events() if m.asset_key == key]
        assert "note" in silver.materialization.metadata["columns_unavailable"].value
        assert silver_rows(spark, lake, ["id", "note"])[0] == (1, LONG_NOTE)

        for statement in WHILE_DOWN:
            postgres.sql(DATABASE, statement)
        with KafkaConnect(broker.bootstrap_servers, connector, data_dir=offsets):
            wait_for(broker, "sentinel 2")
            materialize(source, resources)
            assert silver_rows(spark, lake, columns) == database_rows(postgres, columns)
            for statement in TRUNCATED:
                postgres.sql(DATABASE, statement)
            wait_for(broker, "sentinel 3")
        result = materialize(source, resources)
        assert silver_rows(spark, lake, columns) == database_rows(postgres, columns)
    assert lake.read(spark, SILVER, f"{TABLE}_quarantine").count() == 0
    (silver,) = [m for m in result.get_asset_materialization_events() if m.asset_key == key]
    assert silver.materialization.metadata["truncates_applied"].value == 1
