"""Benchmark: the full column profile of a table against one plain ``describe()`` of it.

What it measures
----------------
A ``--rows`` (10,000,000) row, 10-column table is generated with Spark and written once as
Parquet (untimed): a unique long id, a user id of about 100,000 values, a category of 8 strings,
a mac-address-like string of about 50,000 values, two doubles, an int, a timestamp, a date and a
boolean. Then, ``--rounds`` times and taking turns (describe, profile, describe, profile, ...),
on the same Parquet-backed DataFrame:

- A: ``df.describe().collect()``: count, mean, stddev, min and max of every column (one pass).
- B: ``lakehouse_assets.profiling.transforms.profile(df)``: the full profile (two aggregations).

It prints each time, the ratio B / A per round and the median. Target of issue 14: at most 4x.

Usage::

    .venv/bin/python benchmarks/column_profile.py [--rows 10000000] [--rounds 2] [--remote sc://...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from lakehouse_assets.profiling.transforms import profile  # noqa: E402
from resources import SparkResource  # noqa: E402

CATEGORIES = ("run", "walk", "ride", "swim", "row", "lift", "yoga", "hike")


def generate(spark: SparkSession, rows: int, folder: str) -> DataFrame:
    """The benchmark's table, written once as Parquet and read back."""
    ids = spark.range(rows)
    mixed = F.xxhash64("id")
    table = ids.select(
        F.col("id"),
        (F.abs(mixed) % 100_000).alias("user_id"),
        F.element_at(
            F.array(
                *[F.lit(c) for c in ("run", "walk", "ride", "swim", "row", "lift", "yoga", "hike")]
            ),
            (F.abs(mixed) % 8 + 1).cast("int"),
        ).alias("category"),
        F.format_string("AA:BB:%02d:%03d", F.abs(mixed) % 50, F.abs(mixed) % 1000).alias("mac"),
        (F.rand(1) * 200).alias("heartrate"),
        F.randn(2).alias("score"),
        (F.abs(mixed) % 3600).cast("int").alias("seconds"),
        F.timestamp_seconds(F.lit(1_790_000_000) + F.col("id") % 2_592_000).alias("at"),
        F.date_add(F.lit("2026-01-01").cast("date"), (F.col("id") % 365).cast("int")).alias("day"),
        (F.col("id") % 3 == 0).alias("flag"),
    )
    table.write.mode("overwrite").parquet(folder)
    return spark.read.parquet(folder)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="The full profile against one describe().")
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--remote", default=None, help="a Spark Connect URL (default: local)")
    args = parser.parse_args(argv)
    spark = SparkResource(remote=args.remote).get_session()
    with tempfile.TemporaryDirectory() as work:
        started = time.perf_counter()
        df = generate(spark, args.rows, f"{work}/table")
        print(f"wrote {args.rows:,} rows x 10 columns in {time.perf_counter() - started:.1f} s")
        ratios = []
        for round_ in range(args.rounds):
            started = time.perf_counter()
            df.describe().collect()
            described = time.perf_counter() - started
            started = time.perf_counter()
            taken = profile(df)
            profiled = time.perf_counter() - started
            ratios.append(profiled / described)
            print(
                f"round {round_ + 1}: describe {described:.1f} s, profile {profiled:.1f} s "
                f"({len(taken.columns)} columns, keys {taken.candidate_keys}): "
                f"{profiled / described:.2f}x",
                flush=True,
            )
        print(f"median: profile / describe = {statistics.median(ratios):.2f}x (target <= 4x)")


if __name__ == "__main__":
    main()
