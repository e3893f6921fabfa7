"""Table maintenance with Delta Lake's own SQL: OPTIMIZE (bin-packing or Z-order) and VACUUM.

Both run beside the writers. Compaction commits with ``dataChange = false`` and only removes the
files it rewrote, so a stream appending meanwhile does not conflict with it; when a commit does
conflict (a merge rewrote one of the same files), the whole compaction is retried on the new
snapshot. Nothing a reader of a retained version needs is vacuumed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from resources.delta import quoted, session_settings
from resources.lake import LakeResource

# The smallest VACUUM retention without ``force``: Delta's default deleted-file retention.
SAFE_RETENTION_HOURS = 7 * 24
OPTIMIZE_ATTEMPTS = 5
CONFLICT = "DELTA_CONCURRENT"  # the error class of every Delta commit conflict


def file_stats(delta: DeltaTable) -> dict[str, int]:
    """Number of files and bytes in the table's current snapshot."""
    actions = pa.table(delta.get_add_actions(flatten=True))
    return {"files": actions.num_rows, "bytes": sum(actions["size_bytes"].to_pylist())}


def optimize(
    spark: SparkSession,
    lake: LakeResource,
    layer: str,
    table: str,
    target_size: int | None = None,
    z_order: Sequence[str] = (),
) -> dict[str, Any]:
    """Compact the table's small files (Z-ordered by ``z_order`` if given); returns the
    files and bytes before and after, and Delta's own metrics."""
    statement = f"OPTIMIZE delta.{quoted(lake.spark_path(layer, table))}"
    if z_order:
        statement += f" ZORDER BY ({', '.join(quoted(column) for column in z_order)})"
    settings = {"spark.databricks.delta.optimize.maxFileSize": str(target_size)}
    for attempt in range(1, OPTIMIZE_ATTEMPTS + 1):
        before = file_stats(lake.table(layer, table))
        try:
            with session_settings(spark, settings if target_size else {}):
                result = spark.sql(statement).collect()[0]
        except PySparkException as error:
            if CONFLICT not in str(error) or attempt == OPTIMIZE_ATTEMPTS:
                raise
            time.sleep(0.5 * attempt)  # a writer rewrote files we compacted: start over
            continue
        after = file_stats(lake.table(layer, table))
        metrics = result["metrics"].asDict(recursive=True)
        return {"before": before, "after": after, "attempts": attempt, "metrics": metrics}
    raise AssertionError("unreachable")


def vacuum(
    spark: SparkSession,
    lake: LakeResource,
    layer: str,
    table: str,
    retention_hours: int,
    force: bool = False,
) -> dict[str, Any]:
    """Delete files no snapshot within ``retention_hours`` references: files the log removed,
    and files written by a batch that never committed (older than the retention).

    Raises:
        ValueError: ``retention_hours`` is below the safe minimum and ``force`` is not set.
    """
    if retention_hours < SAFE_RETENTION_HOURS and not force:
        raise ValueError(
            f"VACUUM retention of {retention_hours} h is below the safe minimum of "
            f"{SAFE_RETENTION_HOURS} h: readers and streams of older versions could lose files. "
            "Set force to vacuum anyway."
        )
    path = lake.spark_path(layer, table)
    settings = {
        "spark.databricks.delta.retentionDurationCheck.enabled": str(not force).lower(),
        # VACUUM's START and END commits, which Delta leaves out on some stores (s3a) by default.
        "spark.databricks.delta.vacuum.logging.enabled": "true",
    }
    with session_settings(spark, settings):
        spark.sql(f"VACUUM delta.{quoted(path)} RETAIN {retention_hours} HOURS").collect()
    # Delta logs each VACUUM as two commits; the last says how many files went.
    end = next(c for c in lake.history(layer, table, 2) if c["operation"] == "VACUUM END")
    return {"files_removed": int(end["operationMetrics"]["numDeletedFiles"])}
