"""Exactly-once micro-batches from a Spark stream into a Delta table.

Spark writes a batch's offsets to the checkpoint before the batch runs and re-runs the same batch
id with the same offsets after a crash. Each batch is committed to Delta with the transaction
marker ``(app id, batch id)``, so a batch the table already holds is skipped on re-run: nothing is
lost (the checkpoint only advances after the commit) and nothing is duplicated.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from resources import delta

log = logging.getLogger(__name__)

BatchTransform = Callable[[DataFrame], DataFrame]
T = TypeVar("T")

WORKER_START_WAITS_S = (10.0, 30.0)
"""The waits before each new start of a query whose Python worker did not start in time."""


@dataclass
class StreamRun:
    """What one ``availableNow`` run of a stream did."""

    batches_committed: list[int] = field(default_factory=list)
    batches_skipped: list[int] = field(default_factory=list)
    rows_written: int = 0
    end_offsets: dict[str, Any] | None = None


class DeltaBatchSink:
    """A ``foreachBatch`` function appending each micro-batch to a Delta table exactly once.

    The transaction app id is ``<stream>/<query id>``: the query id lives in the checkpoint, so a
    new checkpoint (a deliberate full reload) never mistakes its batches for the old ones.

    Over Spark Connect the function runs in a Python process of the server, not in the run's:
    it keeps no state the run reads back. Each commit records its stream and batch id, and
    ``run_available_now`` reads what a run did from the table's log and the query's progress.
    """

    def __init__(
        self,
        table_uri: str,
        storage_options: Mapping[str, str],
        stream: str,
        checkpoint: str,
        transform: BatchTransform,
        partition_by: Sequence[str] = (),
    ) -> None:
        """Prepare the sink of one stream.

        Plain values only: the function is pickled to a Connect server, whose Python worker
        imports this module (so it imports no Dagster), in another working directory (so the
        table's URI is absolute), and ``transform`` must be a module-level function.
        """
        self.table_uri = table_uri
        self.storage_options = dict(storage_options)
        self.stream = stream
        self.checkpoint = checkpoint
        self._app_id: str | None = None
        self.transform = transform
        self.partition_by = list(partition_by)

    def app_id(self, spark: SparkSession) -> str:
        """The Delta transaction app id of the running query, from its checkpoint's metadata."""
        if self._app_id is None:
            self._app_id = f"{self.stream}/{json.loads(self._checkpoint_metadata(spark))['id']}"
        return self._app_id

    def _checkpoint_metadata(self, spark: SparkSession) -> str:
        if "://" not in self.checkpoint:
            return (Path(self.checkpoint) / "metadata").read_text()
        line = spark.read.text(f"{self.checkpoint}/metadata").first()  # any Hadoop file system
        if line is None:
            raise RuntimeError(f"No query id in the checkpoint {self.checkpoint}")
        return line[0]

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        _keep_batch_frames_on_the_server()
        app_id = self.app_id(batch.sparkSession)
        table = delta.find(self.table_uri, self.storage_options)
        committed = table.transaction_version(app_id) if table else None
        if committed is not None and committed >= batch_id:
            log.info("%s: batch %s already in the table, skipped", self.stream, batch_id)
            return
        delta.append(
            self.transform(batch),
            self.table_uri,
            self.storage_options,
            self.partition_by,
            markers={app_id: batch_id},
            metadata={"stream": self.stream, "batch_id": batch_id},
        )


def _keep_batch_frames_on_the_server() -> None:
    """Stop the Connect client from releasing each batch's cached DataFrame itself.

    The server drops a batch's DataFrame when the function returns. The client's own release
    (``CachedRemoteRelation.__del__``, a blocking RPC without a deadline) can deadlock the
    ``foreachBatch`` worker when it runs during a later call, and the query hangs (seen here with
    PySpark 4.2.1; SPARK-58846 bounds it upstream).
    """
    from pyspark.sql.connect import plan

    plan.CachedRemoteRelation.__del__ = lambda self: None  # pyright: ignore[reportAttributeAccessIssue]


def run_available_now(stream_df: DataFrame, sink: DeltaBatchSink) -> StreamRun:
    """Run ``stream_df`` into ``sink`` until it has caught up, then stop.

    Raises:
        pyspark.errors.StreamingQueryException: a batch failed; the checkpoint keeps the offsets
            of the failed batch, so the next run retries it.
    """
    before = delta.find(sink.table_uri, sink.storage_options)
    writer = (
        stream_df.writeStream.queryName(sink.stream)
        .foreachBatch(sink)
        .option("checkpointLocation", sink.checkpoint)
        .trigger(availableNow=True)
    )
    query = start_retrying_slow_workers(writer.start, sink.stream)
    query.awaitTermination()
    run = StreamRun()
    after = delta.find(sink.table_uri, sink.storage_options)
    new_commits = (after.version() if after else -1) - (before.version() if before else -1)
    history = after.history(new_commits) if after and new_commits > 0 else []
    committed = {int(c["batch_id"]) for c in history if c.get("stream") == sink.stream}
    held_before = (
        before.transaction_version(sink.app_id(stream_df.sparkSession)) if before else None
    )
    # Appends only: the rows the run added are the difference (compaction keeps the count).
    run.rows_written = (delta.row_count(after) if after else 0) - (
        delta.row_count(before) if before else 0
    )
    for progress in query.recentProgress:
        if progress.batchId in committed:
            run.batches_committed.append(progress.batchId)
        elif held_before is not None and progress.batchId <= held_before:
            run.batches_skipped.append(progress.batchId)  # a re-run of a committed batch
    progress = query.lastProgress
    if progress and progress.get("sources"):
        end = progress["sources"][0].get("endOffset")
        run.end_offsets = json.loads(end) if isinstance(end, str) else end
    return run


def start_retrying_slow_workers(
    start: Callable[[], T], stream: str, sleep: Callable[[float], None] = time.sleep
) -> T:
    """Call ``start``; when the server timed out waiting for a Python worker, wait, then again.

    Spark waits a fixed 10 s for the ``foreachBatch`` worker it starts to connect back
    (``PythonWorkerFactory``, not configurable); importing PySpark takes about 1 s, but longer
    than 10 s on a machine loaded several times over. The query had not started then, so starting
    it again is safe; the waits (``WORKER_START_WAITS_S``) let the load pass first.
    """
    for wait_s in WORKER_START_WAITS_S:
        try:
            return start()
        except PySparkException as error:
            if "Python worker failed to connect back" not in str(error):
                raise
            log.warning(
                "%s: the Spark server's Python worker did not start within Spark's 10 s (the "
                "server is overloaded); starting the query again in %s s",
                stream,
                wait_s,
            )
        sleep(wait_s)
    return start()
