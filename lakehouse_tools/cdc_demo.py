"""`lakehouse cdc-demo`: change data capture end to end on this machine. A PostgreSQL started with
logical replication, Debezium's PostgreSQL connector in Kafka Connect standalone, the embedded
broker and a Spark Connect server (unless the environment names a broker and a server); changes
made to a table, the declared source's bronze and silver materialized, and the database's rows
printed beside silver's, compared column by column. It exits non-zero when they differ.

The comparison (``database_rows``, ``silver_rows``) is the CDC tests' oracle too.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from datetime import UTC, datetime
from datetime import time as clock
from pathlib import Path
from typing import Any

from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.kafka_connect import KafkaConnect, postgres_connector
from lakehouse_tools.postgres import PostgresServer
from lakehouse_tools.service import local_service
from lakehouse_tools.spark_server import SparkConnectServer
from resources import ENV_KAFKA_BOOTSTRAP_SERVERS, ENV_LAKEHOUSE_ROOT, ENV_SPARK_REMOTE

DATABASE, TABLE = "shop", "customers"
TOPIC = f"{DATABASE}.public.{TABLE}"
DECLARATION = f"""\
topic: {TOPIC}
format: debezium-json
mode: cdc-scd1
keys: [id]
order_by: source.lsn
truncate: apply
"""
LONG_NOTE = "toasted " * 1000  # 8 KB: stored out of line (STORAGE EXTERNAL: not compressed)
TABLE_DDL = f"""
CREATE TYPE mood AS ENUM ('calm', 'busy');
CREATE TABLE {TABLE} (
    id serial PRIMARY KEY, name text, note text, balance numeric(12,2), ratio numeric,
    born date, seen timestamp(6), seen_tz timestamptz, doc jsonb, active boolean,
    visits smallint, big bigint, uid uuid, score double precision, raw bytea,
    opens time(6), tags text[], nums int[], feeling mood, weight real, code varchar(20)
);
ALTER TABLE {TABLE} ALTER COLUMN note SET STORAGE EXTERNAL;
"""
TIMESTAMPS = ("seen", "seen_tz")
JSON_COLUMNS = ("doc",)
CHANGES = [  # each statement its own transaction, streamed after the table's snapshot
    f"INSERT INTO {TABLE} (name, balance, ratio, born, seen, seen_tz, doc, active, visits, big, "
    "uid, score, raw) VALUES ('Bea', 42.10, 0.5, '2001-09-09', '2026-11-02 10:00:00', "
    "'2026-11-02 10:00:00-05', '{\"b\": null}', false, 1, -1, "
    "'00000000-0000-4000-8000-000000000001', -0.25, '\\x00')",
    f"UPDATE {TABLE} SET name = 'Anna' WHERE id = 1",  # the TOASTed note unchanged
    f"UPDATE {TABLE} SET balance = balance + 1 WHERE id = 2",
    f"DELETE FROM {TABLE} WHERE id = 3",
    f"ALTER TABLE {TABLE} ADD COLUMN tier int",
    f"UPDATE {TABLE} SET tier = 1 WHERE id = 1",
]
SNAPSHOT = (  # rows there before the connector starts: its snapshot reads them
    f"INSERT INTO {TABLE} (name, note, balance, ratio, born, seen, seen_tz, doc, active, visits, "
    "big, uid, score, raw) VALUES ('Ann', '" + LONG_NOTE + "', 199605.94, 3.14159, '1990-02-28', "
    "'2026-11-01 08:00:00.123456', '2026-11-01 08:00:00.5+02', '{\"a\": [1, 2]}', true, 7, "
    "9007199254740993, 'b68a35a7-17ad-35b3-af2a-ae46edb4545a', 1.5, '\\xdeadbeef'), "
    "('', NULL, -0.01, 12345678901234567890.5, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
    "NULL, NULL), ('Cy', NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)"
)
SENTINEL = "the last change"


def wait_for(bootstrap_servers: str, name: str, timeout_s: float = 120.0) -> dict[str, Any]:
    """The change on the topic whose row is named ``name`` (its payload), once it is there.

    Raises:
        TimeoutError: it does not within ``timeout_s``.
    """
    from kafka import KafkaConsumer

    # The topic may not exist yet: the connector creates it with its first change, and the
    # consumer sees it at its next metadata refresh (by default every five minutes).
    consumer = KafkaConsumer(
        TOPIC, bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest",
        consumer_timeout_ms=1000, metadata_max_age_ms=1000,
    )  # fmt: skip
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for message in consumer:
                payload = json.loads(message.value)["payload"] if message.value else {}
                if (payload.get("after") or {}).get("name") == name:
                    return payload
        raise TimeoutError(f"No change of {name!r} reached {TOPIC} within {timeout_s:.0f} s.")
    finally:
        consumer.close()


def database_rows(postgres: PostgresServer, database: str, table: str, columns: list[str]) -> list:
    """The table's rows by ``id`` as psycopg2 reads them, in the forms ``silver_rows`` gives."""
    import psycopg2

    connection = psycopg2.connect(
        host="127.0.0.1", port=postgres.port, user=postgres.user, dbname=database
    )
    with connection, connection.cursor() as cursor:
        cursor.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY id")
        rows = cursor.fetchall()
    connection.close()
    return [tuple(map(_database_value, columns, row)) for row in rows]


def _database_value(name: str, value: Any) -> Any:
    if isinstance(value, datetime):  # a timestamp's wall clock is kept as UTC (docs/sources.md)
        value = value.astimezone(UTC) if value.tzinfo else value
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, clock):  # as PostgreSQL prints a time: no trailing zeros
        fraction = f".{value.microsecond:06d}".rstrip("0") if value.microsecond else ""
        return f"{value:%H:%M:%S}{fraction}"
    if isinstance(value, memoryview):
        return bytes(value)
    if name in JSON_COLUMNS and value is not None:
        return json.dumps(value, sort_keys=True)
    return value


def silver_rows(spark: Any, lake: Any, table: str, columns: list[str]) -> list:
    """``silver.<table>``'s rows by ``id``: timestamps as UTC text, JSON text parsed."""
    from pyspark.sql import functions as F

    from lakehouse_assets.constants import SILVER

    selected = [
        F.date_format(c, "yyyy-MM-dd HH:mm:ss.SSSSSS").alias(c) if c in TIMESTAMPS else F.col(c)
        for c in columns
    ]
    rows = lake.read(spark, SILVER, table).select(*selected).orderBy("id").collect()
    return [tuple(map(_silver_value, columns, row)) for row in rows]


def _silver_value(name: str, value: Any) -> Any:
    if isinstance(value, bytearray):
        return bytes(value)
    if name in JSON_COLUMNS and value is not None:
        return json.dumps(json.loads(value), sort_keys=True)
    return value


def cdc_demo() -> None:
    """Changes to a PostgreSQL table through Debezium and Kafka into silver, then the database's
    rows beside silver's."""
    import dagster as dg

    from lakehouse_assets.sources.assets import source_assets
    from lakehouse_assets.sources.declaration.files import load_declaration
    from resources import build_resources

    home = Path(tempfile.mkdtemp(prefix="lakehouse-cdc-demo-"))
    try:
        (home / f"{TABLE}.yaml").write_text(DECLARATION)
        source = load_declaration(home / f"{TABLE}.yaml")
        with (
            PostgresServer(settings={"wal_level": "logical"}) as postgres,
            local_service(ENV_KAFKA_BOOTSTRAP_SERVERS, EmbeddedBroker) as bootstrap_servers,
            local_service(ENV_SPARK_REMOTE, SparkConnectServer),
        ):
            postgres.create_database(DATABASE)
            postgres.sql(DATABASE, TABLE_DDL)
            postgres.sql(DATABASE, SNAPSHOT)
            connector = postgres_connector(
                DATABASE, "127.0.0.1", postgres.port, postgres.user, DATABASE,
                [f"public.{TABLE}"], **{"skipped.operations": "none"},
            )  # fmt: skip
            print("Starting Kafka Connect with Debezium's PostgreSQL connector...", flush=True)
            with KafkaConnect(bootstrap_servers, connector, data_dir=home / "connect"):
                for statement in [*CHANGES, f"INSERT INTO {TABLE} (name) VALUES ('{SENTINEL}')"]:
                    print(f"  {statement[:96]}", flush=True)
                    postgres.sql(DATABASE, statement)
                wait_for(bootstrap_servers, SENTINEL)
            resources = build_resources({**os.environ, ENV_LAKEHOUSE_ROOT: str(home / "lake")})
            logging = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
            result = dg.materialize(source_assets(source), resources=resources, run_config=logging)
            if not result.success:
                raise SystemExit("The run failed; see the log above.")
            same = compare(postgres, resources)
            resources["spark"].get_session().stop()
        if not same:
            raise SystemExit("silver differs from the database (above).")
    finally:
        shutil.rmtree(home, ignore_errors=True)


def compare(postgres: PostgresServer, resources: dict[str, Any]) -> bool:
    """Print the database's rows and silver's, and whether they are the same."""
    columns = ["id", "name", "balance", "ratio", "born", "seen", "seen_tz", "doc", "active",
               "visits", "big", "uid", "score", "raw", "opens", "tags", "nums", "feeling", "weight",
               "code", "tier", "note"]  # fmt: skip
    spark, lake = resources["spark"].get_session(), resources["lake"]
    database = database_rows(postgres, DATABASE, TABLE, columns)
    silver = silver_rows(spark, lake, TABLE, columns)
    for title, rows in ((f"PostgreSQL {DATABASE}.public.{TABLE}", database),
                        (f"silver.{TABLE}", silver)):  # fmt: skip
        print(f"\n{title} ({len(rows)} rows)")
        for row in rows:
            print("  " + ", ".join(_shown(value) for value in row))
    same = database == silver
    print(f"\nsilver {'equals' if same else 'differs from'} the database, column by column.")
    return same


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."
