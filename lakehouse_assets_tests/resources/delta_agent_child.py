"""What a Delta snapshot answers with the Delta agent and without it, on a local Spark of the
project's settings in this process: one JSON line per table shape (``test_delta_agent.py``).

Usage: python -m lakehouse_assets_tests.resources.delta_agent_child FOLDER
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake
from pyspark.sql import SparkSession

from resources import SparkResource
from resources.spark_jvm import STATE_FROM_CHECKSUM

CHECKPOINT_INTERVAL = "spark.databricks.delta.properties.defaults.checkpointInterval"


def stream_batches(spark: SparkSession, folder: Path, table: str, batches: int) -> str:
    """``batches`` streaming-sink batches into ``folder/table``: one transaction marker each."""
    source, sink = folder / f"{table}_source", folder / table
    for batch in range(batches):
        rows = spark.createDataFrame([(batch, "x")], "id long, tag string")
        rows.write.format("delta").mode("append").save(str(source))
        stream = spark.readStream.format("delta").load(str(source)).writeStream.format("delta")
        stream = stream.option("checkpointLocation", str(folder / f"{table}_checkpoint"))
        stream.trigger(availableNow=True).start(str(sink)).awaitTermination()
    return str(sink)


def answers(spark: SparkSession, path: str) -> dict[str, Any]:
    """The snapshot's answers with the agent (and whether it rebuilt its state for them), then
    Delta's own on the same snapshot."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog
    delta_log.clearCache()
    none = jvm.scala.Option.empty()
    snapshot = delta_log.forTable(spark._jsparkSession, path).update(False, none, none)
    found: dict[str, Any] = {"version": snapshot.version()}
    for setting in ("true", "false"):
        spark.conf.set(STATE_FROM_CHECKSUM, setting)
        transactions = jvm.scala.jdk.javaapi.CollectionConverters.asJava(snapshot.setTransactions())
        found[setting] = {
            "transactions": sorted([t.appId(), t.version()] for t in transactions),
            "files": snapshot.numOfFiles(),
            "bytes": snapshot.sizeInBytes(),
            "rebuilt": snapshot._computedStateTriggered(),
        }
    return found


def main() -> None:
    folder = Path(sys.argv[1])
    spark = SparkResource().get_session()
    shapes = {}
    # Spark's own writes: every version has its checksum.
    path = stream_batches(spark, folder, "spark", 3)
    shapes["spark"] = answers(spark, path)
    # The last version's checksum deleted.
    path = stream_batches(spark, folder, "deleted", 3)
    (Path(path) / "_delta_log" / "00000000000000000002.crc").unlink()
    shapes["deleted"] = answers(spark, path)
    # A version written by delta-rs after Spark's.
    path = stream_batches(spark, folder, "delta_rs", 2)
    write_deltalake(path, pa.table({"id": [9], "tag": ["rs"]}), mode="append")
    shapes["delta_rs"] = answers(spark, path)
    # A checkpoint between (every 10th version of this table; the project's tables take one
    # every 50th): the checksum of version 11.
    spark.conf.set(CHECKPOINT_INTERVAL, "10")
    path = stream_batches(spark, folder, "checkpoint", 12)
    spark.conf.unset(CHECKPOINT_INTERVAL)
    shapes["checkpoint"] = answers(spark, path)
    shapes["checkpoint"]["checkpointed"] = (Path(path) / "_delta_log" / "_last_checkpoint").exists()
    # Transaction markers that expire: the rebuild drops the expired ones, a checksum may not.
    path = stream_batches(spark, folder, "expiring", 1)
    retention = "'delta.setTransactionRetentionDuration' = 'interval 1 days'"
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({retention})")
    shapes["expiring"] = answers(spark, stream_batches(spark, folder, "expiring", 1))
    print(json.dumps(shapes))


if __name__ == "__main__":
    main()
