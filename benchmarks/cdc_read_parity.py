"""Benchmark: the read side of ``cdc_scd1.py``, each half of it against its alternative.

What it measures
----------------
``cdc_scd1.py``'s ``--records`` Debezium envelopes (1,000,000 over ``--keys`` 100,000 keys) are
produced once to the embedded broker (4 partitions) and written once to a Delta table in the shape
of bronze (``key``, ``value``, Kafka coordinates). Then, on one warm Spark Connect server, taking
turns ``--rounds`` times (A B, A B, ...):

- consuming: A, the project's Kafka source (``lakehouse_kafka``, the Python streaming data source)
  in a stream with ``trigger(availableNow=True)`` into Spark's no-op sink; B, the consume loop of
  ``cdc_scd1.py``'s script (confluent-kafka, ``consume(10_000)``, values kept in a list).
- parsing: A, silver's reader (``refine.read_records``: ``mapInArrow``, in columns with pyarrow's
  JSON reader), into the no-op sink; B, Spark's own ``from_json`` with the envelope's struct,
  the row taken from ``before`` or ``after`` by ``op``; B+, B also listing each row's field names
  (``json_object_keys``) to find fields the schema lacks, which the reader reports and B alone
  does not.

It prints each side's seconds per round and the median ratio of times (B / A: above 1.0 means the
project's side is faster). It answers whether either half of the lakehouse's read has a cheaper
alternative within reach.

Usage::

    .venv/bin/python benchmarks/cdc_read_parity.py [--records 1000000] [--keys 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import pyarrow as pa  # noqa: E402
from cdc_scd1 import PARTITIONS, TOPIC, changes, consume, produce  # noqa: E402
from deltalake import write_deltalake  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from lakehouse_assets.devtools.broker import EmbeddedBroker  # noqa: E402
from lakehouse_assets.devtools.spark_server import SparkConnectServer  # noqa: E402
from lakehouse_assets.sources.reader import ReadSpec  # noqa: E402
from lakehouse_assets.sources.refine import read_records  # noqa: E402
from lakehouse_assets.sources.schema import Type  # noqa: E402
from resources import SparkResource, build_resources  # noqa: E402
from resources.kafka import KAFKA_FORMAT  # noqa: E402

SCHEMA: dict[str, Type] = {"id": "long", "name": "string", "email": "string", "country": "string",
          "balance": "double"}  # fmt: skip
SPEC = ReadSpec(schema=SCHEMA, flatten=False, format="debezium-json", mode="cdc-scd1",
                keys=("id",), order_by="source.lsn")  # fmt: skip
ROW = "id BIGINT, name STRING, email STRING, country STRING, balance DOUBLE"  # SCHEMA in SQL
ENVELOPE = f"op STRING, before STRUCT<{ROW}>, after STRUCT<{ROW}>, source STRUCT<lsn: BIGINT>"


def write_bronze(uri: str, records: int, keys: int) -> None:
    """The envelopes as bronze holds them, in four files."""
    pairs = list(changes(records, keys))
    table = pa.table({
        "key": pa.array([k for k, _ in pairs], pa.binary()),
        "value": pa.array([v for _, v in pairs], pa.binary()),
        "partition": pa.array([0] * len(pairs), pa.int32()),
        "offset": pa.array(range(len(pairs)), pa.int64()),
    })  # fmt: skip
    step = -(-len(pairs) // 4)
    for start in range(0, len(pairs), step):
        write_deltalake(uri, table.slice(start, step), mode="append")


def discard(frame: DataFrame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def spark_consume(spark: SparkSession, bootstrap: str, checkpoint: Path) -> None:
    stream = (
        spark.readStream.format(KAFKA_FORMAT)
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .load()
    )
    query = (
        stream.writeStream.format("noop")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    query.awaitTermination()


def from_json(bronze: DataFrame, field_names: bool) -> DataFrame:
    text = F.col("value").cast("string")
    envelope = F.from_json(text, ENVELOPE)
    row = F.when(envelope["op"] == "d", envelope["before"]).otherwise(envelope["after"])
    columns = [
        "key", "offset", envelope["op"].alias("_op"),
        envelope["source"]["lsn"].alias("_sequence"), row.alias("row"),
    ]  # fmt: skip
    if field_names:
        names = F.json_object_keys(F.get_json_object(text, "$.after"))
        known = F.array(*[F.lit(name) for name in SCHEMA])
        columns.append(F.size(F.array_except(names, known)).alias("_unknown_fields"))
    return bronze.select(*columns).select("*", "row.*").drop("row")


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The read side of cdc_scd1.py, half by half.")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work, EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        build_resources({"KAFKA_BOOTSTRAP_SERVERS": bootstrap})["kafka"].create_topic(
            TOPIC, PARTITIONS
        )
        print(f"produced {args.records:,} changes in "
              f"{produce(bootstrap, args.records, args.keys):.1f} s")  # fmt: skip
        uri = f"{work}/bronze"
        write_bronze(uri, args.records, args.keys)
        with SparkConnectServer() as server:
            spark = SparkResource(remote=server.url).get_session()
            files = [str(p) for p in Path(uri).glob("*.parquet")]
            sides: dict[str, Callable[[int], object]] = {
                "consume A: Spark stream": lambda n: spark_consume(
                    spark, bootstrap, Path(work) / f"checkpoint-{n}"
                ),
                "consume B: confluent-kafka": lambda n: consume(
                    bootstrap, args.records, f"script-{n}"
                ),
                "parse A: read_records": lambda n: discard(
                    read_records(spark.read.parquet(*files), SPEC)
                ),
                "parse B: from_json": lambda n: discard(
                    from_json(spark.read.parquet(*files), field_names=False)
                ),
                "parse B+: from_json, field names": lambda n: discard(
                    from_json(spark.read.parquet(*files), field_names=True)
                ),
            }
            for side in sides.values():
                side(-1)  # warm-up, not counted
            seconds: dict[str, list[float]] = {name: [] for name in sides}
            for round_ in range(args.rounds):
                for name, side in sides.items():
                    seconds[name].append(timed(functools.partial(side, round_)))
                print(f"round {round_ + 1}: "
                      + ", ".join(f"{n} {s[-1]:.2f} s" for n, s in seconds.items()))  # fmt: skip
            spark.stop()  # before the server, or the client retries at exit

    def ratio(b: str, a: str) -> float:
        return statistics.median(y / x for x, y in zip(seconds[a], seconds[b], strict=True))

    consuming = ratio("consume B: confluent-kafka", "consume A: Spark stream")
    print(f"consume, B / A (median): {consuming:.2f}x")
    for b in ("parse B: from_json", "parse B+: from_json, field names"):
        print(f"{b.split(':')[0]} / A (median): {ratio(b, 'parse A: read_records'):.2f}x")


if __name__ == "__main__":
    main()
