"""Benchmark: three ways to decode Debezium envelopes with their Kafka Connect schema on Spark's
executors, side by side on one Spark Connect server.

What it measures
----------------
``--records`` envelopes (200,000) as ``cdc_scd1.py --schemas`` produces them (compact, as
JsonConverter writes them: a decimal, a MicroTimestamp) are written once to a Parquet file. Then,
``--rounds`` times in turn, each of these reads them all and counts the rows it kept:

- columns: the declared source's reader as silver runs it (``reading.read_records``), which reads
  such batches in columns (``connect_columns``: pyarrow's JSON reader, Arrow casts).
- records: the same reader one record at a time (``reader.Reader``: orjson and plain Python), as
  it reads any batch the columns cannot.
- from_json: Spark's own ``from_json`` with a Spark schema built from the Connect schema (the
  payload's row typed, the row's Connect schema parsed as the checks need it) and Spark's casts of
  the decimal and the timestamp; no checks beyond the parse, so its figure is a lower bound.

It prints each way's seconds per round and the medians of the ratios to ``columns``.

Usage::

    .venv/bin/python benchmarks/envelope_decode.py [--records 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from cdc_scd1 import changes  # noqa: E402
from pyspark.sql import DataFrame  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from lakehouse_assets.sources.decoding.read_spec import ReadSpec  # noqa: E402
from lakehouse_assets.sources.decoding.reader import (  # noqa: E402
    Reader,
    _read_records,  # pyright: ignore[reportPrivateUsage]
    output_fields,
)
from lakehouse_assets.sources.decoding.reading import read_records  # noqa: E402
from lakehouse_assets.sources.decoding.schema import Schema  # noqa: E402
from lakehouse_tools.spark_server import SparkConnectServer  # noqa: E402
from resources import ENV_SPARK_REMOTE, build_resources  # noqa: E402

SCHEMA: Schema = {"id": "int", "name": "string", "email": "string", "country": "string",
          "balance": "decimal(12,2)", "updated_at": "timestamp"}  # fmt: skip
SPEC = ReadSpec(schema=SCHEMA, flatten=False, format="debezium-json", mode="cdc-scd1",
                keys=("id",), order_by="source.lsn")  # fmt: skip
ROW = "id int, name string, email string, country string, balance string, updated_at long"
DESCRIBED = "array<struct<field string, type string, name string, parameters map<string,string>>>"
ENVELOPE = (
    f"schema struct<fields array<struct<field string, fields {DESCRIBED}>>>, "
    f"payload struct<op string, before struct<{ROW}>, after struct<{ROW}>, "
    "source struct<lsn long>>"
)


def one_at_a_time(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The record reader on every record (``mapInArrow``'s function)."""
    reader, fields = Reader(SPEC), output_fields(SPEC)
    for batch in batches:
        yield pa.RecordBatch.from_pydict(_read_records(reader, batch, fields))


def columns(records: DataFrame) -> int:
    return read_records(records, SPEC).where(F.col("reason").isNull()).count()


def records_one_at_a_time(records: DataFrame) -> int:
    schema = ", ".join(f"`{name}` {kind}" for name, kind in [("value", "binary"), *_spark_fields()])
    return records.mapInArrow(one_at_a_time, schema).where(F.col("reason").isNull()).count()


def _spark_fields() -> list[tuple[str, str]]:
    from pyspark.sql.pandas.types import from_arrow_type

    return [(name, from_arrow_type(kind).simpleString()) for name, kind in output_fields(SPEC)]


def from_json(records: DataFrame) -> int:
    parsed = records.select(F.from_json(F.col("value").cast("string"), ENVELOPE).alias("e"))
    payload = F.col("e.payload")
    row = F.when(payload["op"] == "d", payload["before"]).otherwise(payload["after"])
    unscaled = F.hex(F.unbase64(row["balance"]))
    negative = F.substring(unscaled, 1, 1).isin(*"89ABCDEF")
    digits = F.conv(F.lpad(unscaled, 16, F.when(negative, "F").otherwise("0")), 16, -10)
    typed = parsed.select(
        *[row[name].alias(name) for name in ("id", "name", "email", "country")],
        F.concat(digits, F.lit("E-2")).try_cast("decimal(12,2)").alias("balance"),
        F.timestamp_micros(row["updated_at"]).alias("updated_at"),
        payload["source"]["lsn"].cast("decimal(38,6)").alias("sequence"),
        F.to_json("e.schema").alias("schema"),  # parsed whole, as the checks would read it
    )  # fmt: skip
    names = ("id", "name", "email", "country", "balance", "updated_at", "sequence", "schema")
    row_hash = F.hash(*[F.col(name) for name in names])
    return typed.where(row_hash.isNotNull() & F.col("id").isNotNull()).count()


WAYS: dict[str, Callable[[DataFrame], int]] = {
    "columns": columns, "records": records_one_at_a_time, "from_json": from_json,
}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Decoding Connect envelopes on the executors.")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work, SparkConnectServer() as server:
        envelopes = list(changes(args.records, max(args.records // 10, 1), schemas=True))
        path = str(Path(work) / "envelopes.parquet")
        table = pa.table({"key": [k for k, _ in envelopes], "value": [v for _, v in envelopes],
                          "offset": list(range(len(envelopes)))})  # fmt: skip
        pq.write_table(table, path, row_group_size=20_000)
        spark = build_resources({ENV_SPARK_REMOTE: server.url})["spark"].get_session()
        records = spark.read.parquet(path)
        for way in WAYS.values():  # warm-up: the workers, the JIT (not counted)
            way(records.limit(20_000))
        seconds: dict[str, list[float]] = {name: [] for name in WAYS}
        for round_ in range(args.rounds):
            for name, way in WAYS.items():
                started = time.perf_counter()
                kept = way(records)
                seconds[name].append(time.perf_counter() - started)
                if kept != args.records:
                    raise RuntimeError(f"{name} kept {kept:,} of {args.records:,} records")
            each = ", ".join(f"{name} {times[-1]:.1f} s" for name, times in seconds.items())
            print(f"round {round_ + 1}: {each}", flush=True)
        print(f"{args.records:,} envelopes; median seconds relative to columns:")
        for name, times in seconds.items():
            ratio = statistics.median(t / c for t, c in zip(times, seconds["columns"], strict=True))
            print(f"  {name}: {statistics.median(times):.1f} s, {ratio:.2f}x")
        spark.stop()


if __name__ == "__main__":
    main()
