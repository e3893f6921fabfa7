"""Exactly-once micro-batches from a Spark stream into a Delta table.

Spark writes a batch's offsets to the checkpoint before the batch runs and re-runs the same batch
id with the same offsets after a crash. Each batch is committed to Delta with the transaction
marker ``(app id, batch id)``, so a batch the table already holds is skipped on re-run: nothing is
lost (the checkpoint only advances after the commit) and nothing is duplicated.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from resources.lake import LakeResource, row_count

log = logging.getLogger(__name__)

BatchTransform = Callable[[DataFrame], DataFrame]


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
    it keeps no state the run reads back. Each commit records its stream, batch id and row count,
    and ``run_available_now`` reads what a run did from the table's log.
    """

    def __init__(
        self,
        lake: LakeResource,
        layer: str,
        table: str,
        stream: str,
        checkpoint: str,
        transform: BatchTransform,
        partition_by: Sequence[str] = (),
    ) -> None:
        # Plain settings, not the run's resource: the function is pickled to the server, whose
        # working directory is not the run's (so the root is absolute).
        self.lake_settings = {"root": lake.root_uri, "storage_options": dict(lake.storage_options)}
        self.layer, self.table, self.stream = layer, table, stream
        self.checkpoint = checkpoint
        self._app_id: str | None = None
        self.transform = transform
        self.partition_by = list(partition_by)

    @property
    def lake(self) -> LakeResource:
        """The lake, as a resource of this process."""
        return LakeResource(**self.lake_settings)

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
        app_id = self.app_id(batch.sparkSession)
        lake = self.lake
        committed = lake.committed_version(self.layer, self.table, app_id)
        if committed is not None and committed >= batch_id:
            log.info("%s: batch %s already in the table, skipped", self.stream, batch_id)
            return
        data = self.transform(batch).toArrow()
        if data.num_rows == 0 and lake.exists(self.layer, self.table):
            return  # nothing to add; an empty commit would only grow the log
        lake.append(
            self.layer,
            self.table,
            data,
            partition_by=self.partition_by,
            markers={app_id: batch_id},
            metadata={"stream": self.stream, "batch_id": batch_id, "rows": data.num_rows},
        )


def run_available_now(stream_df: DataFrame, sink: DeltaBatchSink) -> StreamRun:
    """Run ``stream_df`` into ``sink`` until it has caught up, then stop.

    Raises:
        pyspark.errors.StreamingQueryException: a batch failed; the checkpoint keeps the offsets
            of the failed batch, so the next run retries it.
    """
    version_before = sink.lake.version(sink.layer, sink.table)
    query = (
        stream_df.writeStream.queryName(sink.stream)
        .foreachBatch(sink)
        .option("checkpointLocation", sink.checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    run = StreamRun()
    version_after = sink.lake.version(sink.layer, sink.table)
    first_new = 0 if version_before is None else version_before + 1
    new_commits = 0 if version_after is None else version_after - first_new + 1
    history = sink.lake.history(sink.layer, sink.table, new_commits) if new_commits > 0 else []
    committed = {int(c["batch_id"]) for c in history if c.get("stream") == sink.stream}
    app_id = sink.app_id(stream_df.sparkSession)
    held_before, rows_before = None, 0
    if version_before is not None:
        snapshot = sink.lake.table(sink.layer, sink.table)
        snapshot.load_as_version(version_before)
        held_before = snapshot.transaction_version(app_id)
        rows_before = row_count(snapshot)
    # Appends only: the rows the run added are the difference (compaction keeps the count).
    run.rows_written = sink.lake.row_count(sink.layer, sink.table) - rows_before
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
