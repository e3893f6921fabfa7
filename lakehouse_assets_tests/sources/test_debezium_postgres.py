"""Debezium's own PostgreSQL connector, in Kafka Connect standalone, writing to the broker from a
PostgreSQL with logical replication; silver is checked against the database's own rows (issue 58,
items 4 and 5). The connector runs at its defaults (JsonConverter with schemas, precise decimals,
adaptive times, REPLICA IDENTITY DEFAULT) but for sending truncates; then with numerics as text
(decimal.handling.mode=string), Connect's own times (time.precision.mode=connect) and REPLICA
IDENTITY FULL from the start.

The changes: every column type of the table below, NULL beside '', an update leaving a TOASTed
text unchanged (the connector sends its placeholder), a column added, a delete, a key deleted
and inserted again, REPLICA IDENTITY FULL (mid-stream, and from the start), the worker killed
after its offsets are written and again before (it sends again what it had sent since: Kafka
Connect delivers at least once), then a truncate and rows after it. cdc-scd2's versions are
checked against an audit trigger's log of every change, the TOASTed text included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg2
import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.constants import SILVER, asset_key
from lakehouse_assets.sources.assets import source_assets
from lakehouse_assets.sources.declaration.files import load_declaration
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.cdc_demo import (
    DATABASE,
    LONG_NOTE,
    TABLE,
    TABLE_DDL,
    TOPIC,
    database_rows,
    silver_rows,
    wait_for,
)
from lakehouse_tools.kafka_connect import KafkaConnect, postgres_connector
from lakehouse_tools.postgres import PostgresServer
from resources import ENV_KAFKA_BOOTSTRAP_SERVERS, LakeResource

pytestmark = pytest.mark.external  # Debezium's connector on Kafka Connect

HISTORY = f"{TABLE}_history"  # the same topic as cdc-scd2
COLUMNS = ["id", "name", "note", "balance", "ratio", "born", "seen", "seen_tz", "doc", "active",
           "visits", "big", "uid", "score", "raw", "opens", "tags", "nums", "feeling", "weight",
           "code"]  # fmt: skip
FIRST = [  # each statement its own transaction
    f"INSERT INTO {TABLE} (name, note, balance, ratio, born, seen, seen_tz, doc, active, visits, "
    "big, uid, score, raw, opens, tags, nums, feeling, weight, code) VALUES ('Ann', '"
    + LONG_NOTE
    + "', "
    "199605.94, 3.14159, '1990-02-28', '2026-11-01 08:00:00.123456', '2026-11-01 08:00:00.5+02', "
    "'{\"a\": [1, 2]}', true, 7, 9007199254740993, 'b68a35a7-17ad-35b3-af2a-ae46edb4545a', 1.5, "
    "'\\xdeadbeef', '07:30:00.5', '{x,\"y z\",NULL}', '{1,-2}', 'busy', 0.25, 'A-1')",
    f"INSERT INTO {TABLE} (name, note, tags, opens) VALUES ('', NULL, '{{}}', '23:59:59')",
    f"INSERT INTO {TABLE} (name, balance, ratio) VALUES ('Cy', -0.01, 12345678901234567890.5)",
    f"UPDATE {TABLE} SET name = 'Anna' WHERE id = 1",  # the note unchanged: the placeholder
    f"UPDATE {TABLE} SET balance = 10 WHERE id = 2",
    f"DELETE FROM {TABLE} WHERE id = 3",
    f"ALTER TABLE {TABLE} ADD COLUMN tier int",
    f"INSERT INTO {TABLE} (name, tier) VALUES ('Di', 2)",
    f"UPDATE {TABLE} SET tier = 1 WHERE id = 1",
    f"INSERT INTO {TABLE} (id, name) VALUES (3, 'Cy again')",  # inserted after its delete
    f"UPDATE {TABLE} SET note = note || 'more' WHERE id = 1",  # the TOASTed text changed
    # One transaction of a thousand rows, one of 500 updates, one of deletes.
    f"INSERT INTO {TABLE} (id, name, balance) SELECT g, 'bulk ' || g, g / 100.0 "
    "FROM generate_series(100, 1099) AS g",
    f"UPDATE {TABLE} SET balance = balance + 1 WHERE id BETWEEN 100 AND 599",
    f"DELETE FROM {TABLE} WHERE id >= 100 AND id % 7 = 0",
    f"INSERT INTO {TABLE} (id, name) VALUES (50, 'sentinel 1')",
]
WHILE_DOWN = [  # while the worker is down; it was killed after the statements above
    f"ALTER TABLE {TABLE} REPLICA IDENTITY FULL",
    f"UPDATE {TABLE} SET name = 'Anne' WHERE id = 1",
    f"DELETE FROM {TABLE} WHERE id = 4",
    f"UPDATE {TABLE} SET name = name || '!' WHERE id BETWEEN 600 AND 699",
    f"INSERT INTO {TABLE} (id, name) VALUES (51, 'sentinel 2')",
]
# Every change of the table, as a trigger sees it: what cdc-scd2's versions must be.
AUDIT = f"""
CREATE TABLE audit (n bigserial PRIMARY KEY, op text, id int, name text, note text,
                    balance numeric(12,2), tier int);
CREATE FUNCTION audited() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
    IF TG_OP = 'DELETE' THEN
        INSERT INTO audit (op, id) VALUES ('d', OLD.id);
    ELSIF TG_OP = 'TRUNCATE' THEN
        INSERT INTO audit (op) VALUES ('t');
    ELSE
        -- tier is added mid-stream: read by name, NULL before it exists
        INSERT INTO audit (op, id, name, note, balance, tier)
        VALUES ('u', NEW.id, NEW.name, NEW.note, NEW.balance, (to_jsonb(NEW)->>'tier')::int);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER audited AFTER INSERT OR UPDATE OR DELETE ON {TABLE}
    FOR EACH ROW EXECUTE FUNCTION audited();
CREATE TRIGGER truncated AFTER TRUNCATE ON {TABLE} FOR EACH STATEMENT EXECUTE FUNCTION audited();
"""
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


def audited_versions(postgres: PostgresServer) -> list[tuple]:
    """``(id, name, note, balance, tier, is_current)`` of every version the audit log shows, by
    id and order: each insert or update opens one, the next change of its key, or a truncate,
    closes it."""
    connection = psycopg2.connect(
        host="127.0.0.1", port=postgres.port, user=postgres.user, dbname=DATABASE
    )
    with connection, connection.cursor() as cursor:
        cursor.execute("SELECT op, id, name, note, balance, tier FROM audit ORDER BY n")
        log = cursor.fetchall()
    connection.close()
    versions: dict[int, list[list[Any]]] = {}
    for op, key, *values in log:
        if op == "t":
            for history in versions.values():
                if history:
                    history[-1][-1] = False
            continue
        history = versions.setdefault(key, [])
        if history:
            history[-1][-1] = False
        if op == "u":
            history.append([key, *values, True])
    return [tuple(v) for key in sorted(versions) for v in versions[key]]


VERSION_COLUMNS = ["id", "name", "note", "balance", "tier", "is_current"]


def silver_versions(spark: SparkSession, lake: LakeResource) -> list[tuple]:
    frame = lake.read(spark, SILVER, HISTORY).orderBy("id", "valid_from")
    return [tuple(r) for r in frame.select(*VERSION_COLUMNS).collect()]


# Debezium's other settings of types: a numeric as its plain text, Connect's own Date, Time and
# Timestamp (milliseconds) for PostgreSQL's date, time and timestamp.
TEXT_AND_CONNECT = {"decimal.handling.mode": "string", "time.precision.mode": "connect"}
DECIMALS = ("balance", "ratio")


def as_sent(columns: list[str], rows: list[tuple], settings: dict[str, str]) -> list[tuple]:
    """The database's rows (in ``database_rows``' forms) as the connector with ``settings``
    sends them: with ``TEXT_AND_CONNECT`` a numeric as its plain text and a timestamp to the
    millisecond (its times here have none finer)."""

    def value(name: str, value: Any) -> Any:
        if not settings or value is None:
            return value
        if name in DECIMALS:
            return format(value, "f")
        return f"{value[:23]}000" if name == "seen" else value

    return [tuple(map(value, columns, row)) for row in rows]


def changes_named(bootstrap_servers: str, name: str) -> int:
    """How many changes on the topic have a row named ``name``."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )  # fmt: skip
    try:
        payloads = [json.loads(m.value)["payload"] for m in consumer if m.value]
    finally:
        consumer.close()
    return sum((payload.get("after") or {}).get("name") == name for payload in payloads)


def materialize(sources: list[Any], resources: dict[str, Any]) -> dg.ExecuteInProcessResult:
    assets = [asset for source in sources for asset in source_assets(source)]
    result = dg.materialize(assets, resources=resources)
    assert result.success
    return result


@pytest.mark.parametrize(
    ("identity", "settings"),
    [
        pytest.param("DEFAULT", {}, id="defaults"),
        pytest.param("FULL", TEXT_AND_CONNECT, id="replica identity FULL, decimal text, connect"),
    ],
)
def test_silver_equals_the_database_through_debeziums_connector(
    identity: str,
    settings: dict[str, str],
    tmp_path: Path,
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    spark: SparkSession,
) -> None:
    """At the connector's defaults the table turns REPLICA IDENTITY FULL mid-stream; then FULL
    from the start (a delete's and an update's ``before`` hold the whole row), with numerics as
    text and Connect's own times."""
    declared = f"topic: {TOPIC}\nformat: debezium-json\nkeys: [id]\norder_by: source.lsn\n"
    (tmp_path / f"{TABLE}.yaml").write_text(f"{declared}mode: cdc-scd1\ntruncate: apply\n")
    (tmp_path / f"{HISTORY}.yaml").write_text(f"{declared}mode: cdc-scd2\ntruncate: apply\n")
    source = [load_declaration(tmp_path / f"{name}.yaml") for name in (TABLE, HISTORY)]
    lake: LakeResource = resources["lake"]
    columns = [*COLUMNS, "tier"]

    def silver_equals_the_database() -> None:
        expected = as_sent(columns, database_rows(postgres, DATABASE, TABLE, columns), settings)
        assert silver_rows(spark, lake, TABLE, columns) == expected
        versions = as_sent(VERSION_COLUMNS, audited_versions(postgres), settings)
        assert silver_versions(spark, lake) == versions

    with PostgresServer(settings={"wal_level": "logical"}) as postgres:
        postgres.create_database(DATABASE)
        postgres.sql(DATABASE, TABLE_DDL)
        postgres.sql(DATABASE, f"ALTER TABLE {TABLE} REPLICA IDENTITY {identity}")
        postgres.sql(DATABASE, AUDIT)
        connector = postgres_connector(
            DATABASE, "127.0.0.1", postgres.port, postgres.user, DATABASE, [f"public.{TABLE}"],
            **{"skipped.operations": "none", **settings},
        )  # fmt: skip
        offsets = tmp_path / "connect"
        with KafkaConnect(broker.bootstrap_servers, connector, data_dir=offsets) as connect:
            for statement in FIRST:
                postgres.sql(DATABASE, statement)
            flushed(offsets / "offsets", wait_for(broker.bootstrap_servers, "sentinel 1"))
            assert connect.pid is not None
            os.kill(connect.pid, signal.SIGKILL)
        result = materialize(source, resources)
        silver_equals_the_database()
        key = asset_key(SILVER, TABLE)
        (silver,) = [m for m in result.get_asset_materialization_events() if m.asset_key == key]
        # An update leaving the TOASTed note unchanged: the connector sends its placeholder, but
        # under FULL the old row holds the note and the connector sends it whole.
        unavailable = silver.materialization.metadata["columns_unavailable"].value
        assert unavailable == ("note" if identity == "DEFAULT" else "-")
        assert silver_rows(spark, lake, TABLE, ["id", "note"])[0] == (1, f"{LONG_NOTE}more")

        for statement in WHILE_DOWN:
            postgres.sql(DATABASE, statement)
        # A worker that writes no offsets while it runs, killed once it has sent the changes:
        # started again, it sends them again.
        never = {"offset.flush.interval.ms": "3600000"}
        with KafkaConnect(
            broker.bootstrap_servers, connector, data_dir=offsets, worker_settings=never
        ) as connect:
            wait_for(broker.bootstrap_servers, "sentinel 2")
            assert connect.pid is not None
            os.kill(connect.pid, signal.SIGKILL)
        materialize(source, resources)
        silver_equals_the_database()
        with KafkaConnect(broker.bootstrap_servers, connector, data_dir=offsets):
            for statement in TRUNCATED:
                postgres.sql(DATABASE, statement)
            wait_for(broker.bootstrap_servers, "sentinel 3")
        assert changes_named(broker.bootstrap_servers, "sentinel 2") == 2  # sent again
        result = materialize(source, resources)
        silver_equals_the_database()
    for name in (TABLE, HISTORY):
        assert lake.read(spark, SILVER, f"{name}_quarantine").count() == 0, name
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
