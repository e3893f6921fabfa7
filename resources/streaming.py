"""Exactly-once micro-batches from a Spark stream into a Delta table, by Delta's streaming sink.

Spark writes a batch's offsets to the checkpoint before the batch runs and runs the same batch id
with the same offsets again after a crash. Delta's sink commits each batch with the transaction
marker ``(query id, batch id)`` (the query id lives in the checkpoint) and skips a batch the table
already holds: nothing is lost (the checkpoint only advances after the commit) and nothing is
duplicated. A new checkpoint (a deliberate full reload) is a new query id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame

from resources import delta_log
from resources.files import read_text
from resources.object_store import hadoop_uri

STREAM_WRITE = "STREAMING UPDATE"  # the operation of a commit of Delta's streaming sink
# Spark's words when another run created a checkpoint file of this stream first, and Delta's when
# another run committed a batch of this stream (its transaction marker) while this one wrote it:
# two runs that both found a batch's offsets without its commit (as after a crash) run it at once.
CONCURRENT_RUN_MARKS = (
    "CONCURRENT_STREAM_LOG_UPDATE",
    "concurrently using",
    "DELTA_CONCURRENT_TRANSACTION",
)
# Spark's words when a stream it found new (no batch's offsets) has files in its checkpoint: another
# run of it, if that run's first batch's offsets are there now.
CHECKPOINT_NOT_EMPTY = "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"


class StreamRunElsewhere(RuntimeError):
    """Another Spark application runs the same stream (checkpoint) at this moment."""


@dataclass
class StreamRun:
    """What one ``availableNow`` run of a stream did."""

    batches_committed: list[int] = field(default_factory=list)
    batches_skipped: list[int] = field(default_factory=list)
    rows_written: int = 0
    end_offsets: dict[str, Any] | None = None


def run_available_now(
    stream_df: DataFrame,
    table_uri: str,
    checkpoint: str,
    stream: str,
    partition_by: Sequence[str] = (),
) -> StreamRun:
    """Append ``stream_df`` to the Delta table at ``table_uri`` until it has caught up, then stop;
    returns what the run did, read from the query's progress and the table's log.

    Raises:
        StreamRunElsewhere: another application created this stream's next checkpoint file first
            (its metadata, or a batch's offsets; on an object store each is created only if
            absent; or the first batch's offsets, after this run found none), or committed the
            batch this run was writing: this run stopped before
            writing what would follow, and the other goes on.
        pyspark.errors.StreamingQueryException: a batch failed; the checkpoint keeps the offsets
            of the failed batch, so the next run retries it.
    """
    before = delta_log.find(table_uri)
    writer = (
        stream_df.writeStream.format("delta")
        .queryName(stream)
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
    )
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    try:
        query = writer.start(hadoop_uri(table_uri))  # a new checkpoint's metadata is created here
        query.awaitTermination()
    except PySparkException as error:  # StreamingQueryException, or Connect's at the start
        if any(mark in str(error) for mark in CONCURRENT_RUN_MARKS) or (
            CHECKPOINT_NOT_EMPTY in str(error) and read_text(f"{checkpoint}/offsets/0") is not None
        ):
            raise StreamRunElsewhere(
                f"The stream {stream} is being run by another Spark application at the same "
                f"time: that run wrote the next batch, or the next file of its checkpoint "
                f"{checkpoint}, first. This run stopped before writing what would follow, and the "
                "other goes on; nothing is lost or written twice. Run it again once the other has "
                "finished."
            ) from error
        raise
    query_id = str(query.id)
    after = delta_log.find(table_uri)
    new_commits = (after.version() if after else -1) - (before.version() if before else -1)
    run = StreamRun()
    for commit in reversed(after.history(new_commits) if after and new_commits > 0 else []):
        parameters = commit.get("operationParameters") or {}
        if commit.get("operation") == STREAM_WRITE and parameters.get("queryId") == query_id:
            run.batches_committed.append(int(parameters["epochId"]))
            run.rows_written += int((commit.get("operationMetrics") or {})["numOutputRows"])
    held_before = before.transaction_version(query_id) if before else None
    progresses = query.recentProgress  # one call to the server; the last is the latest
    for progress in progresses:
        batch = progress.batchId
        if batch not in run.batches_committed and held_before is not None and batch <= held_before:
            run.batches_skipped.append(batch)  # a re-run of a batch committed before a crash
    progress = progresses[-1] if progresses else None
    if progress and progress.get("sources"):
        end = progress["sources"][0].get("endOffset")
        run.end_offsets = json.loads(end) if isinstance(end, str) else end
    return run
