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

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.cdc_demo import (
    DATABASE,
    LONG_NOTE,
    TABLE,
    TABLE_DDL,
    TOPIC,
    database_rows,
    silver_rows,
    wait_for,
)
from lakehouse_assets.constants import SILVER, asset_key
from lakehouse_assets.devtools.broker import EmbeddedBroker
from lakehouse_assets.devtools.kafka_connect import KafkaConnect, postgres_connector
from lakehouse_assets.devtools.postgres import PostgresServer
from lakehouse_assets.sources.assets import source_assets
from lakehouse_assets.sources.declarations import load_declaration
from resources import ENV_KAFKA_BOOTSTRAP_SERVERS, LakeResource

COLUMNS = ["id", "name", "note", "balance", "ratio", "born", "seen", "seen_tz", "doc", "active",
           "visits", "big", "uid", "score", "raw", "opens", "tags", "nums", "feeling"]  # fmt: skip
FIRST = [  # each statement its own transaction
    f"INSERT INTO {TABLE} (name, note, balance, ratio, born, seen, seen_tz, doc, active, visits, "
    "big, uid, score, raw, opens, tags, nums, feeling) VALUES ('Ann', '" + LONG_NOTE + "', "
    "199605.94, 3.14159, '1990-02-28', '2026-11-01 08:00:00.123456', '2026-11-01 08:00:00.5+02', "
    "'{\"a\": [1, 2]}', true, 7, 9007199254740993, 'b68a35a7-17ad-35b3-af2a-ae46edb4545a', 1.5, "
    "'\\xdeadbeef', '07:30:00.5', '{x,\"y z\",NULL}', '{1,-2}', 'busy')",
    f"INSERT INTO {TABLE} (name, note, tags, opens) VALUES ('', NULL, '{{}}', '23:59:59')",
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


def flushed(offsets: Path, change: dict[str, Any], timeout_s: float = 30.0) -> None:
    """Until the worker has written its source offsets past ``change`` (a payload): killed after
    that, it goes on from them when it starts again. (Killed before it first wrote them, it would
    snapshot the table again, and a snapshot sends no delete of a row deleted meanwhile.)"""
    written = f'"lsn":{change["source"]["lsn"]},'.encode()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if offsets.exists() and written in offsets.read_bytes():
            return
        time.sleep(0.1)
    raise AssertionError(f"the worker wrote no offsets past {change['source']} to {offsets}")


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
            flushed(offsets / "offsets", wait_for(broker.bootstrap_servers, "sentinel 1"))
            assert connect.pid is not None
            os.kill(connect.pid, signal.SIGKILL)
        result = materialize(source, resources)
        columns = [*COLUMNS, "tier"]
        assert silver_rows(spark, lake, TABLE, columns) == database_rows(
            postgres, DATABASE, TABLE, columns
        )
        key = asset_key(SILVER, TABLE)
        (silver,) = [m for m in result.get_asset_materialization_events() if m.asset_key == key]
        assert "note" in silver.materialization.metadata["columns_unavailable"].value
        assert silver_rows(spark, lake, TABLE, ["id", "note"])[0] == (1, LONG_NOTE)

        for statement in WHILE_DOWN:
            postgres.sql(DATABASE, statement)
        with KafkaConnect(broker.bootstrap_servers, connector, data_dir=offsets):
            wait_for(broker.bootstrap_servers, "sentinel 2")
            materialize(source, resources)
            assert silver_rows(spark, lake, TABLE, columns) == database_rows(
                postgres, DATABASE, TABLE, columns
            )
            for statement in TRUNCATED:
                postgres.sql(DATABASE, statement)
            wait_for(broker.bootstrap_servers, "sentinel 3")
        result = materialize(source, resources)
        assert silver_rows(spark, lake, TABLE, columns) == database_rows(
            postgres, DATABASE, TABLE, columns
        )
    assert lake.read(spark, SILVER, f"{TABLE}_quarantine").count() == 0
    (silver,) = [m for m in result.get_asset_materialization_events() if m.asset_key == key]
    assert silver.materialization.metadata["truncates_applied"].value == 1


def test_the_cdc_demo_shows_silver_equal_to_the_database(
    broker: EmbeddedBroker, spark_remote: str | None, tmp_path: Path
) -> None:
    """`lakehouse cdc-demo`, as documented, on the session's broker and Spark."""
    environment = {**os.environ, ENV_KAFKA_BOOTSTRAP_SERVERS: broker.bootstrap_servers}
    command = [str(Path(sys.executable).parent / "lakehouse"), "cdc-demo"]
    done = subprocess.run(
        command, env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "silver equals the database, column by column." in done.stdout
