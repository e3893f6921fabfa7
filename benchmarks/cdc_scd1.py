"""Benchmark: a declared ``cdc-scd1`` source against a plain delta-rs merge script.

What it measures
----------------
``--records`` Debezium change events (1,000,000) over ``--keys`` keys (100,000) are produced once
to a topic of the embedded broker (4 partitions, keyed by the row's id, as Debezium keys them):
per key an insert, updates, and for one key in ten a delete at the end; one event in a hundred
is swapped with its neighbour, so some arrive out of order. Ordered by ``source.lsn``. By default
the envelopes come without the schema wrapper (``value.converter.schemas.enable=false``); with
``--schemas`` each carries its Kafka Connect schema as Debezium's default converter writes it
(``{"schema": ..., "payload": ...}``), the balance a ``Decimal`` (base64 of its unscaled value,
scale 2) and ``updated_at`` a ``MicroTimestamp``.

Then, ``--rounds`` times, taking turns (A B, then A B again) so that drift falls on both:

- A, the lakehouse: the declared source's bronze and silver assets (``dg.materialize``) on a warm
  Spark Connect server that the benchmark starts, into a new lake: Kafka to bronze (every
  envelope kept), then bronze to the SCD1 table.
- B, a user's alternative: one Python process consuming the topic with confluent-kafka,
  ``json.loads`` per record (with ``--schemas``, the payload's decimal and timestamp decoded by
  their Connect types), the newest change per key (pyarrow), and one delta-rs ``merge``
  (delete, update when newer, insert) into a new Delta table. It keeps no raw copy and no
  record of deletes, and does one merge for the whole backlog: its best case.

- B', the same script on silver's input: the envelopes of A's bronze table (delta-rs to Arrow),
  against A's silver step alone.

It prints each side's seconds, records per second, and the ratios of throughputs (A / B and
silver / B'), per round and as medians; the tables of all sides are checked to hold the same rows.
Silver's step includes what the lakehouse does after each write as configured: the checks, and
the profiles of its three tables when ``LAKEHOUSE_PROFILE=materialization`` (the mode is printed
first; by default profiles are taken nightly, off the write path).
Target of issue 12: at least 1.0x.

Usage::

    .venv/bin/python benchmarks/cdc_scd1.py [--records 1000000] [--keys 100000] [--rounds 2]
        [--schemas]
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import decimal
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))
import dagster as dg  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
from deltalake import DeltaTable, write_deltalake  # noqa: E402

from benchmarks.lake_schemas import lake_schemas, own_metastore  # noqa: E402
from lakehouse_assets.sources.assets import source_assets  # noqa: E402
from lakehouse_assets.sources.declaration.model import SourceDeclaration  # noqa: E402
from lakehouse_tools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_tools.demo import step_seconds  # noqa: E402
from lakehouse_tools.spark_server import SparkConnectServer  # noqa: E402
from resources import ENV_SPARK_REMOTE, build_resources  # noqa: E402
from resources.settings import ENV_PROFILE, profile_mode  # noqa: E402

TOPIC = "shop.public.accounts"
PARTITIONS = 4
COUNTRIES = ("NO", "SE", "DK", "FI", "DE")
SOURCE = SourceDeclaration(
    name="accounts", topic=TOPIC, format="debezium-json", mode="cdc-scd1", keys=("id",),
    order_by="source.lsn",
)  # fmt: skip

own_metastore()  # before any Spark starts: the benchmark's catalog is its own


EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
UPDATED_AT = 1_700_000_000_000_000  # the first change's updated_at, microseconds since 1970


def _field(name: str, kind: str, semantic: str | None = None, **parameters: str) -> dict:
    field: dict[str, Any] = {"type": kind, "optional": name != "id", "field": name}
    if semantic:
        field.update(name=semantic, version=1)
    if parameters:
        field["parameters"] = parameters
    return field


ROW_FIELDS = [
    _field("id", "int32"), _field("name", "string"), _field("email", "string"),
    _field("country", "string"),
    _field("balance", "bytes", "org.apache.kafka.connect.data.Decimal", scale="2",
           **{"connect.decimal.precision": "12"}),
    _field("updated_at", "int64", "io.debezium.time.MicroTimestamp"),
]  # fmt: skip
SOURCE_FIELDS = [
    _field("version", "string"), _field("connector", "string"), _field("name", "string"),
    _field("ts_ms", "int64"), _field("db", "string"), _field("schema", "string"),
    _field("table", "string"), _field("txId", "int64"), _field("lsn", "int64"),
]  # fmt: skip
# The Connect schema of an envelope, as JsonConverter writes it for a PostgreSQL table.
ENVELOPE_SCHEMA = {
    "type": "struct", "optional": False, "name": "shop.public.accounts.Envelope", "version": 2,
    "fields": [
        {"type": "struct", "fields": ROW_FIELDS, "optional": True,
         "name": "shop.public.accounts.Value", "field": "before"},
        {"type": "struct", "fields": ROW_FIELDS, "optional": True,
         "name": "shop.public.accounts.Value", "field": "after"},
        {"type": "struct", "fields": SOURCE_FIELDS, "optional": False,
         "name": "io.debezium.connector.postgresql.Source", "field": "source"},
        _field("op", "string"), _field("ts_ms", "int64"),
    ],
}  # fmt: skip


def changes(
    records: int, keys: int, seed: int = 12, schemas: bool = False
) -> Iterator[tuple[bytes, bytes]]:
    """``records`` Debezium envelopes (key, value) over ``keys`` ids, in log order but for one in
    a hundred swapped with the next; with ``schemas``, wrapped with their Connect schema."""
    rng = random.Random(seed)
    per_key = records // keys
    events: list[tuple[int, str]] = []
    for round_ in range(per_key):
        for key in range(keys):
            last = round_ == per_key - 1
            op = "c" if round_ == 0 else ("d" if last and key % 10 == 0 else "u")
            events.append((key, op))
    order = list(range(len(events)))
    for i in range(0, len(order) - 1, 100):
        j = i + rng.randrange(100)
        if j + 1 < len(order):
            order[j], order[j + 1] = order[j + 1], order[j]
    for position in order:
        key, op = events[position]
        lsn = 1_000_000 + position
        row: dict[str, Any] = {"id": key, "name": f"account {key}", "email": f"a{key}@example.com",
               "country": COUNTRIES[key % 5], "balance": round(position * 0.01, 2)}  # fmt: skip
        if schemas:  # the balance's unscaled value is the position: its base64, scale 2
            unscaled = position.to_bytes((position.bit_length() + 8) // 8, "big", signed=True)
            row["balance"] = base64.b64encode(unscaled).decode()
            row["updated_at"] = UPDATED_AT + position * 1000
        envelope = {
            "before": row if op == "d" else None, "after": None if op == "d" else row,
            "source": {"connector": "postgresql", "db": "shop", "table": "accounts", "lsn": lsn,
                       "ts_ms": 1_700_000_000_000 + position},
            "op": op, "ts_ms": 1_700_000_000_000 + position,
        }  # fmt: skip
        if schemas:  # compact, as JsonConverter writes it
            wrapped = {"schema": ENVELOPE_SCHEMA, "payload": envelope}
            yield (
                json.dumps({"id": key}).encode(),
                json.dumps(wrapped, separators=(",", ":")).encode(),
            )
            continue
        yield json.dumps({"id": key}).encode(), json.dumps(envelope).encode()


def produce(bootstrap: str, records: int, keys: int, schemas: bool = False) -> float:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20})
    started = time.perf_counter()
    for count, (key, value) in enumerate(changes(records, keys, schemas=schemas)):
        partition = json.loads(key)["id"] % PARTITIONS
        while True:
            try:
                producer.produce(TOPIC, key=key, value=value, partition=partition)
                break
            except BufferError:
                producer.poll(0.1)
        if count % 10_000 == 0:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError("Not every change was produced")
    return time.perf_counter() - started


def run_lakehouse(bootstrap: str, root: Path, remote: str) -> dict[str, Any]:
    resources = build_resources(
        {
            "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
            "LAKEHOUSE_ROOT": str(root),
            ENV_SPARK_REMOTE: remote,
            **lake_schemas(),
        }
    )
    logging = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    started = time.perf_counter()
    result = dg.materialize(source_assets(SOURCE), resources=resources, run_config=logging)
    seconds = time.perf_counter() - started
    steps = step_seconds(result)
    lake = resources["lake"]
    table = lake.table("silver", "accounts").to_pyarrow_table(columns=["id", "name", "balance"])
    return {"seconds": seconds, "bronze": steps["bronze__accounts"],
            "silver": steps["silver_accounts"], "rows": table.sort_by("id")}  # fmt: skip


def run_delta_rs(bootstrap: str, records: int, uri: str) -> dict[str, Any]:
    """The user's script from Kafka: consume everything, newest per key, one merge."""
    started = time.perf_counter()
    return merge_envelopes(consume(bootstrap, records, f"script-{uri}"), uri, started)


def consume(bootstrap: str, records: int, group: str) -> list[bytes]:
    """The script's consume loop: ``records`` values of the topic, from its start."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    values: list[bytes] = []
    while len(values) < records:
        for message in consumer.consume(10_000, timeout=5):
            value = message.value()
            if not message.error() and value is not None:
                values.append(value)
    consumer.close()
    return values


def run_delta_rs_from_bronze(bronze_uri: str, uri: str) -> dict[str, Any]:
    """The user's script on the same input as silver: the envelopes in the bronze table."""
    started = time.perf_counter()
    values = DeltaTable(bronze_uri).to_pyarrow_table(columns=["value"])["value"].to_pylist()
    return merge_envelopes(values, uri, started)


def merge_envelopes(values: list[bytes], uri: str, started: float) -> dict[str, Any]:
    """``json.loads`` each envelope, keep the newest change per key, one delta-rs merge."""
    names = ("id", "name", "email", "country", "balance")
    columns: dict[str, list[Any]] = {c: [] for c in (*names, "lsn", "op")}
    schemas = False
    for value in values:
        envelope = json.loads(value)
        if "payload" in envelope:  # Connect's wrapper: the decimal and timestamp decoded
            schemas, envelope = True, envelope["payload"]
            row = dict(envelope["after"] or envelope["before"])
            unscaled = int.from_bytes(base64.b64decode(row["balance"]), "big", signed=True)
            row["balance"] = decimal.Decimal(unscaled).scaleb(-2)
            columns.setdefault("updated_at", []).append(
                EPOCH + dt.timedelta(microseconds=row["updated_at"])
            )
        else:
            row = envelope["after"] or envelope["before"]
        for name in names:
            columns[name].append(row[name])
        columns["lsn"].append(envelope["source"]["lsn"])
        columns["op"].append(envelope["op"])
    if schemas:
        columns["balance"] = pa.array(columns["balance"], pa.decimal128(12, 2))  # type: ignore[assignment]
    batch = pa.table(columns)
    newest = batch.sort_by([("id", "ascending"), ("lsn", "descending")])
    first = pc.not_equal(  # pyright: ignore[reportAttributeAccessIssue]
        newest["id"], pa.concat_arrays([pa.array([-1]), newest["id"][:-1].combine_chunks()])
    )
    newest = newest.filter(first)
    write_deltalake(uri, newest.slice(0, 0).drop_columns(["op"]))  # the empty table
    (
        DeltaTable(uri)
        .merge(newest, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete("s.op = 'd'")
        .when_matched_update_all("s.lsn > t.lsn", except_cols=["op"])
        .when_not_matched_insert_all("s.op != 'd'", except_cols=["op"])
        .execute()
    )
    seconds = time.perf_counter() - started
    rows = DeltaTable(uri).to_pyarrow_table(columns=["id", "name", "balance"]).sort_by("id")
    return {"seconds": seconds, "rows": rows}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="A cdc-scd1 source against a delta-rs script.")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--schemas", action="store_true", help="envelopes with Connect schemas")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work, EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        build_resources({"KAFKA_BOOTSTRAP_SERVERS": bootstrap})["kafka"].create_topic(
            TOPIC, PARTITIONS
        )
        print(f"{ENV_PROFILE}={profile_mode()}")
        seconds = produce(bootstrap, args.records, args.keys, args.schemas)
        wrapped = " with Connect schemas" if args.schemas else ""
        print(f"produced {args.records:,} changes{wrapped} in {seconds:.1f} s")
        with SparkConnectServer() as server:
            warm = run_lakehouse(bootstrap, Path(work) / "warm-up", server.url)
            print(f"warm-up run: {warm['seconds']:.1f} s (not counted)")
            ratios: list[tuple[float, float]] = []
            for round_ in range(args.rounds):
                lake = Path(work) / f"lake-{round_}"
                ours = run_lakehouse(bootstrap, lake, server.url)
                theirs = run_delta_rs(bootstrap, args.records, f"{work}/script-{round_}")
                bronze = str(lake / "bronze" / "accounts")
                same_input = run_delta_rs_from_bronze(bronze, f"{work}/script-bronze-{round_}")
                for other in (theirs, same_input):
                    if ours["rows"].to_pylist() != other["rows"].to_pylist():
                        raise RuntimeError("The SCD1 tables differ")
                ratio = theirs["seconds"] / ours["seconds"]
                silver_ratio = same_input["seconds"] / ours["silver"]
                ratios.append((ratio, silver_ratio))
                print(
                    f"round {round_ + 1} ({ours['rows'].num_rows:,} rows, equal):\n"
                    f"  Kafka to SCD1: lakehouse {ours['seconds']:.1f} s "
                    f"(bronze {ours['bronze']:.1f} s + silver {ours['silver']:.1f} s), "
                    f"{args.records / ours['seconds']:,.0f} changes/s; script "
                    f"{theirs['seconds']:.1f} s, {args.records / theirs['seconds']:,.0f} "
                    f"changes/s: {ratio:.2f}x\n"
                    f"  bronze table to SCD1: silver {ours['silver']:.1f} s, "
                    f"{args.records / ours['silver']:,.0f} changes/s; script "
                    f"{same_input['seconds']:.1f} s, "
                    f"{args.records / same_input['seconds']:,.0f} changes/s: {silver_ratio:.2f}x",
                    flush=True,
                )
            print(
                "median ratios (lakehouse throughput / script's): Kafka to SCD1 "
                f"{statistics.median(r for r, _ in ratios):.2f}x, bronze table to SCD1 "
                f"{statistics.median(r for _, r in ratios):.2f}x"
            )
            # The runs' session ends before its server does (at exit it would retry for minutes).
            build_resources({ENV_SPARK_REMOTE: server.url})["spark"].get_session().stop()


if __name__ == "__main__":
    main()
