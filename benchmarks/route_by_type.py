"""Benchmark: a ``route-by-type`` source, change notices on Kafka and documents in PostgreSQL.

What it measures
----------------
``--records`` documents (200,000) over ``--types`` types (20: half case types, half form xmlns)
are written to a PostgreSQL store started from the machine's packages (one table per kind,
``id text primary key, doc jsonb``), and one change notice per document is produced to the
embedded broker (topics ``case-sql`` and ``form-sql``, 4 partitions each); a location hierarchy
of 5 levels is produced to ``location``, its leaves holding the documents' users.

Then the source's assets run on a Spark Connect server the benchmark starts: bronze (Kafka to
Delta), then the router (``silver_<source>``): notices read and planned, documents read from the
store on the executors, typed per table, enriched with locations, merged into one table per type.

It prints each step's seconds, the router's notices per second, and the round trips to the
store: the router's own count (one query per Spark partition of the batch's documents) and
PostgreSQL's count of the connections made over the run (``pg_stat_database.sessions``, less the
driver's one check of the store's tables; each executor connection makes one query). Issue 13's
bound: at most one round trip per Spark partition per batch.

Usage::

    .venv/bin/python benchmarks/route_by_type.py [--records 200000] [--types 20]
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
import dagster as dg  # noqa: E402
import psycopg2  # noqa: E402

from benchmarks.lake_schemas import lake_schemas, own_metastore  # noqa: E402
from lakehouse_assets.sources.assets import source_assets  # noqa: E402
from lakehouse_assets.sources.declaration.model import SourceDeclaration  # noqa: E402
from lakehouse_assets.sources.declaration.routing import table_name  # noqa: E402
from lakehouse_tools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_tools.demo import step_seconds  # noqa: E402
from lakehouse_tools.postgres import PostgresServer  # noqa: E402
from lakehouse_tools.spark_server import SparkConnectServer  # noqa: E402
from resources import ENV_SPARK_REMOTE, DocumentStoreResource, build_resources  # noqa: E402

own_metastore()  # before any Spark starts: the benchmark's catalog is its own

PARTITIONS = 4
LEVELS = ["state", "district", "project", "supervisor", "flwc"]
TABLES = {"CommCareCase": "case_documents", "XFormInstance": "form_documents"}
TOPICS = {"CommCareCase": "case-sql", "XFormInstance": "form-sql"}
XMLNS = "http://openrosa.org/formdesigner/"


def declaration(types: list[str]) -> SourceDeclaration:
    return SourceDeclaration.model_validate(
        {
            "name": "commcare", "topic_pattern": "(case|form)-sql", "mode": "route-by-type",
            "order_by": "publish_timestamp", "partition_by": ["month", "supervisor_id"],
            "routing": {
                "documents": {
                    "XFormInstance": {"table": TABLES["XFormInstance"],
                                      "month_from": "form.meta.timeEnd",
                                      "user_from": "form.meta.userID"},
                    "CommCareCase": {"table": TABLES["CommCareCase"], "month_from": "opened_on",
                                     "user_from": "user_id"},
                },
                "domains": ["demo"], "types": types,
                "locations": {"topic": "location", "levels": LEVELS},
            },
        }
    )  # fmt: skip


def documents(records: int, types: int, users: int) -> list[tuple[str, str, str, dict[str, Any]]]:
    """``(kind, type, id, document)`` of each document, spread evenly over the types."""
    rng = random.Random(13)
    out = []
    for n in range(records):
        slot = n % types
        user = f"u{rng.randrange(users)}"
        day = f"2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}"
        if slot % 2 == 0:
            kind, kind_type = "CommCareCase", f"case_type_{slot}"
            document = {"_id": f"d{n}", "case_type": kind_type, "opened_on": f"{day}T08:00:00Z",
                        "user_id": user, "closed": False, "indices": [],
                        "properties": {"name": f"person {n}", "age": rng.randint(1, 90),
                                       "visit": {"score": rng.random(), "notes": ""}}}  # fmt: skip
        else:
            kind, kind_type = "XFormInstance", f"form-{slot:04d}"
            document = {"_id": f"d{n}", "xmlns": XMLNS + kind_type,
                        "form": {"meta": {"timeEnd": f"{day}T09:30:00Z", "userID": user},
                                 "weight": rng.uniform(2, 5), "answers": ["a", "b"]}}  # fmt: skip
        out.append((kind, kind_type, f"d{n}", document))
    return out


def store(url: str, docs: list[tuple[str, str, str, dict[str, Any]]]) -> None:
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        for kind, table in TABLES.items():
            cursor.execute(f"CREATE TABLE {table} (id text PRIMARY KEY, doc jsonb NOT NULL)")
            rows = io.StringIO()
            for doc_kind, _, doc_id, doc in docs:
                if doc_kind == kind:
                    text = json.dumps(doc).replace("\\", "\\\\")
                    rows.write(f"{doc_id}\t{text}\n")
            rows.seek(0)
            cursor.copy_expert(f"COPY {table} (id, doc) FROM STDIN", rows)


def produce(bootstrap: str, docs: list[tuple[str, str, str, dict[str, Any]]], users: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})

    def send(topic: str, key: str, value: dict[str, Any]) -> None:
        while True:
            try:
                producer.produce(topic, key=key.encode(), value=json.dumps(value).encode())
                return
            except BufferError:
                producer.poll(0.1)

    parents: list[str | None] = [None]
    for depth, level in enumerate(LEVELS):  # a chain per level, the leaves hold the users
        ids = [f"{level}{i}" for i in range(max(1, users // 10 if depth == 4 else 2**depth))]
        for i, location in enumerate(ids):
            leaf_users = [f"u{u}" for u in range(users) if u % len(ids) == i] if depth == 4 else []
            send("location", location, {"location_id": location, "location_type": level,
                                        "parent_location_id": parents[i % len(parents)],
                                        "user_ids": leaf_users})  # fmt: skip
        parents = list(ids)
    for n, (kind, kind_type, doc_id, _) in enumerate(docs):
        subtype = XMLNS + kind_type if kind == "XFormInstance" else kind_type
        send(TOPICS[kind], doc_id, {"document_id": doc_id, "document_type": kind,
                                    "document_subtype": subtype, "domain": "demo",
                                    "is_deletion": False,
                                    "publish_timestamp": published(n)})  # fmt: skip
        if n % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("Not every notice was produced")


def published(n: int) -> str:
    return (
        f"2026-11-24T00:{n // 60_000_000 % 60:02d}:{n // 1_000_000 % 60:02d}.{n % 1_000_000:06d}Z"
    )


def sessions(url: str) -> int:
    """The connections made to the store's database so far (PostgreSQL's statistics)."""
    time.sleep(1.5)  # a backend reports its statistics within a second of ending
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT sessions FROM pg_stat_database WHERE datname = current_database()")
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A route-by-type source, notices to tables.")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--types", type=int, default=20)
    parser.add_argument("--users", type=int, default=500)
    args = parser.parse_args(argv)
    docs = documents(args.records, args.types, args.users)
    kinds = sorted({t for _, t, _, _ in docs})
    source = declaration(kinds)
    with (
        tempfile.TemporaryDirectory() as work,
        PostgresServer() as postgres,
        EmbeddedBroker() as broker,
        SparkConnectServer() as server,
    ):
        started = time.perf_counter()
        store(postgres.url, docs)
        print(f"stored {len(docs):,} documents in {time.perf_counter() - started:.1f} s")
        resources = build_resources(
            {"KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
             "LAKEHOUSE_ROOT": f"{work}/lake", ENV_SPARK_REMOTE: server.url, **lake_schemas()}
        )  # fmt: skip
        resources["documents"] = DocumentStoreResource(url=postgres.url)
        for topic in [*TOPICS.values(), "location"]:
            resources["kafka"].create_topic(topic, PARTITIONS)
        started = time.perf_counter()
        produce(broker.bootstrap_servers, docs, args.users)
        print(f"produced {len(docs):,} notices in {time.perf_counter() - started:.1f} s")
        assets = [a for a in source_assets(source) if isinstance(a, dg.AssetsDefinition)]
        logging = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        instance = dg.DagsterInstance.ephemeral()
        bronze = [a for a in assets if a.node_def.name.startswith("bronze")]
        result = dg.materialize(bronze, resources=resources, run_config=logging, instance=instance)
        print(f"bronze: {sum(step_seconds(result).values()):.1f} s")
        before = sessions(postgres.url)
        router = [a for a in assets if not a.node_def.name.startswith("bronze")]
        started = time.perf_counter()
        result = dg.materialize(router, resources=resources, run_config=logging, instance=instance)
        seconds = time.perf_counter() - started
        # Less the count's own connection and the driver's check of the store's tables: the
        # executors' connections, each making one query.
        connections = sessions(postgres.url) - before - 2
        events = result.get_asset_materialization_events()
        (index,) = [e for e in events if e.asset_key and e.asset_key.path[-1].endswith("documents")]
        meta: dict[str, Any] = {k: v.value for k, v in index.materialization.metadata.items()}
        tables = instance.get_dynamic_partitions("commcare_types")
        lake = resources["lake"]
        rows = sum(lake.row_count("silver", table_name(*key.split("/", 2))) for key in tables)
        print(
            f"router: {seconds:.1f} s for {meta['notices_read']:,} notices, "
            f"{meta['notices_read'] / seconds:,.0f} notices/s; {len(tables)} tables, "
            f"{rows:,} rows; documents missing {meta['documents_missing']}\n"
            f"round trips to the store: {meta['document_store_queries']} queries counted by the "
            f"router; {connections} connections from the executors counted by PostgreSQL; "
            f"Spark partitions of the batch at most {server_partitions(resources)} "
            "(spark.sql.shuffle.partitions)",
            flush=True,
        )
        resources["spark"].get_session().stop()  # before its server stops: no retries at exit
        if rows != args.records:
            raise RuntimeError(f"{rows} rows routed, not {args.records}")


def server_partitions(resources: dict[str, Any]) -> str:
    return str(resources["spark"].get_session().conf.get("spark.sql.shuffle.partitions"))


if __name__ == "__main__":
    main()
