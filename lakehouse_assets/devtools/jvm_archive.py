"""A class-data-sharing archive for the Spark driver JVM, so a new Spark application starts sooner.

A run without a Spark Connect server (tests, one-off scripts) starts a local Spark application,
and much of its start is the JVM loading and verifying Spark's classes. The JDK's dynamic
class-data sharing (AppCDS, JDK 13+) dumps the classes a JVM loaded into an archive at exit; a
later JVM with the same JDK and class path maps that archive instead of loading them again.
``lakehouse spark-archive`` (run by ``make install``) writes the archive by running a small Spark
workload of the kinds the assets run: a Python streaming data source, ``foreachBatch`` to Arrow,
and SQL joins and aggregates.

An archive from another JDK or another PySpark is not used: the JVM prints one warning and loads
the classes as usual, so a stale archive costs time, never correctness.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from resources import ENV_SPARK_CONF
from resources.spark import DEFAULT_ARCHIVE, without_connect

ARCHIVE_ROWS = 1000


class CountingReader(DataSourceStreamReader):
    """Offsets 0..ARCHIVE_ROWS in one batch: the driver and worker paths of a Python source."""

    def initialOffset(self) -> dict[str, int]:
        return {"offset": 0}

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        return {"offset": ARCHIVE_ROWS}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [InputPartition((start["offset"], end["offset"]))]

    def read(self, partition: InputPartition) -> Iterator[tuple[int, str]]:
        first, last = partition.value
        for number in range(first, last):
            yield number, f"user-{number % 10}"


class CountingSource(DataSource):
    """A trivial Python streaming source (``lakehouse_counting``): one batch of numbered rows."""

    @classmethod
    def name(cls) -> str:
        return "lakehouse_counting"

    def schema(self) -> str:
        return "number long, user string"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return CountingReader()


def _workload(spark: SparkSession, checkpoint: str) -> None:
    """Spark work of the kinds the assets do."""
    spark.dataSource.register(CountingSource)

    def sink(batch: DataFrame, batch_id: int) -> None:
        table = batch.toArrow()
        again = spark.createDataFrame(table.to_pandas())
        users = again.groupBy("user").agg(F.count("*").alias("n"), F.max("number").alias("top"))
        joined = again.join(users, "user").withColumn("day", F.to_date(F.current_timestamp()))
        joined.where(F.col("n") > 0).orderBy("number").toArrow()

    query = (
        spark.readStream.format(CountingSource.name())
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


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
        command = [sys.executable, "-m", __name__, str(Path(work) / "checkpoint")]
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
    from resources.spark import stop_spark

    # The JVM options come from LAKEHOUSE_SPARK_CONF, as for any run; see ``write_archive``.
    _workload(build_resources()["spark"].get_session(), sys.argv[1])
    if not stop_spark(timeout_s=300):  # the JVM writes the archive as it exits
        sys.exit("The Spark driver JVM did not exit in time; its archive may be incomplete.")
