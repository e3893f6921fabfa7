"""A class-data-sharing archive for the Spark driver JVM, so a new Spark application starts sooner.

A run without a Spark Connect server (tests, one-off scripts) starts a local Spark application,
and much of its start is the JVM loading and verifying Spark's classes. The JDK's dynamic
class-data sharing (AppCDS, JDK 13+) dumps the classes a JVM loaded into an archive at exit; a
later JVM with the same JDK and class path maps that archive instead of loading them again.
``lakehouse spark-archive`` (run by ``make install``) writes the archive by running a small Spark
workload of the kinds the assets run (``_workload``): Delta Lake's streaming sink, MERGE, change
feed, ``replaceWhere`` and OPTIMIZE, a Python pass over Arrow batches, joins and aggregates.
(Spark's Kafka source needs a broker, which an install does not have: its classes load as usual.)

An archive from another JDK or another PySpark is not used: the JVM prints one warning and loads
the classes as usual, so a stale archive costs time, never correctness.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from resources import ENV_SPARK_CONF
from resources.spark_jvm import DEFAULT_ARCHIVE, without_connect

ARCHIVE_ROWS = 1000


def _add_one(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow``'s function: the Arrow and Python worker path of the declared sources."""
    import pyarrow as pa

    for batch in batches:
        numbers = pa.array([number + 1 for number in batch.column(0).to_pylist()], pa.int64())
        yield pa.RecordBatch.from_arrays([numbers, batch.column(1)], schema=batch.schema)


def _workload(spark: SparkSession, work: str) -> None:
    """Spark work of the kinds the assets do: a stream of files into a Delta table (bronze's
    sink), a Python pass over Arrow batches, a MERGE and its change feed (silver), a day
    replaced (gold), and a compaction (maintenance)."""
    landing, bronze, silver = f"{work}/landing", f"{work}/bronze", f"{work}/silver"
    rows = spark.range(ARCHIVE_ROWS).select(
        F.col("id").alias("number"), F.concat(F.lit("user-"), F.col("id") % 10).alias("user")
    )
    rows.write.json(landing)
    query = (
        spark.readStream.schema(rows.schema)
        .json(landing)
        .withColumn("day", F.to_date(F.current_timestamp()))
        .writeStream.format("delta")
        .option("checkpointLocation", f"{work}/checkpoint")
        .trigger(availableNow=True)
        .start(bronze)
    )
    query.awaitTermination()
    read = spark.read.format("delta").load(bronze).drop("day")
    read.mapInArrow(_add_one, read.schema).write.format("delta").save(silver)
    users = read.groupBy("user").agg(F.count("*").alias("n"), F.max("number").alias("number"))
    users.createOrReplaceTempView("updates")
    spark.sql(
        f"MERGE INTO delta.`{silver}` AS t USING updates AS s ON t.number = s.number "
        "WHEN MATCHED THEN UPDATE SET t.user = s.user WHEN NOT MATCHED THEN INSERT (number, user) "
        "VALUES (s.number, s.user)"
    )
    feed = spark.read.format("delta").option("readChangeFeed", "true")
    feed.option("startingVersion", 0).load(silver).groupBy("_change_type").count().collect()
    day = datetime.now(UTC).date().isoformat()
    gold = read.join(users.drop("number"), "user").withColumn("day", F.lit(day).cast("date"))
    gold.write.format("delta").partitionBy("day").save(f"{work}/gold")
    replace = gold.write.format("delta").mode("overwrite").option("replaceWhere", f"day = '{day}'")
    replace.save(f"{work}/gold")
    spark.sql(f"OPTIMIZE delta.`{work}/gold`").collect()


def write_archive(path: Path = DEFAULT_ARCHIVE) -> Path:
    """Write the archive at ``path`` (replacing an older one); returns the path.

    The workload runs in a child process, whose new JVM dumps its classes when it exits; the
    dump goes to a temporary file that replaces ``path`` only once it is complete.

    Raises:
        RuntimeError: the workload failed or the JVM wrote no archive.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent) as work:
        dump = Path(work) / "dump.jsa"
        conf = {"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={dump}"}
        env = {**without_connect(os.environ), ENV_SPARK_CONF: json.dumps(conf)}
        command = [sys.executable, "-m", __name__, str(Path(work) / "workload")]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        if done.returncode != 0 or not dump.is_file():
            raise RuntimeError(
                f"Could not write the Spark class archive {path} (exit code {done.returncode}):\n"
                f"{done.stderr[-3000:]}"
            )
        dump.replace(path)
    return path


if __name__ == "__main__":
    from resources import build_resources
    from resources.spark_jvm import stop_spark

    # The JVM options come from LAKEHOUSE_SPARK_CONF, as for any run; see ``write_archive``.
    _workload(build_resources()["spark"].get_session(), sys.argv[1])
    if not stop_spark(timeout_s=300):  # the JVM writes the archive as it exits
        sys.exit("The Spark driver JVM did not exit in time; its archive may be incomplete.")
