"""Where a bronze stream is: the one owner every reader asks (the stream's run, the freshness
check, the sensors).

Spark's checkpoint is the stream's position: the offsets, or files, of every batch planned and
committed. Spark writes it; it is read here without Spark (``resources.checkpoints``). Three
records stand beside it, each guarding or copying it, never a second truth:

- the Kafka cluster its offsets belong to, a file in the checkpoint's folder: a stream refuses to
  read another cluster with them (``claim_cluster``);
- the consumer group's offsets: the run's end offsets, published after each run for lag monitors
  (``kafka-consumer-groups``, Burrow) and never read back (``publish``);
- Delta's transaction markers (query id, batch id) in the table's commits: the sink's exactly
  once, which ``resources.streaming`` reads only to report the batches a run committed or skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_assets.constants import BRONZE, CHECKPOINTS_DIR, stream_name
from resources import KafkaResource, LakeResource, checkpoints
from resources.kafka_client import (
    TopicPartitionKey,
    data_loss,
    data_loss_message,
    from_offsets,
    to_offsets,
)

EARLIEST = -2  # in Spark's startingOffsets JSON: the partition's log start
BYTES_PER_LINE = 16  # what a landing file's line is taken to hold, at least, when counting lines


@dataclass(frozen=True)
class StreamPosition:
    """The position of the stream filling ``bronze.<table>`` of ``lake``."""

    lake: LakeResource
    table: str

    @property
    def stream(self) -> str:
        """The stream's name: its query, checkpoint folder and consumer group."""
        return stream_name(BRONZE, self.table)

    @property
    def checkpoint(self) -> str:
        """The stream's Spark checkpoint."""
        return self.lake.spark_path(CHECKPOINTS_DIR, self.stream)

    def offsets(self) -> dict[TopicPartitionKey, int]:
        """The next offset to read of each partition the checkpoint's batches committed."""
        return from_offsets(checkpoints.committed_offsets(self.checkpoint) or {})

    def files_read(self) -> set[str]:
        """The landing files the checkpoint's batches read."""
        return checkpoints.files_read(self.checkpoint)

    def kafka_caught_up(self, log_ends: Mapping[TopicPartitionKey, int]) -> bool:
        """Whether the checkpoint holds every record up to the logs' ends, no batch pending."""
        return checkpoints.kafka_caught_up(self.checkpoint, log_ends)

    def kafka_pending(self, log_ends: Mapping[TopicPartitionKey, int]) -> int:
        """About how many records the logs hold past the checkpoint's committed offsets."""
        committed = self.offsets()
        return sum(max(end - committed.get(tp, 0), 0) for tp, end in log_ends.items())

    def landing_pending(self, folder: str) -> int:
        """About how many lines the files of ``folder`` not read yet hold: their bytes over
        ``BYTES_PER_LINE`` (short lines, so that a large folder is not taken for a small one)."""
        return checkpoints.unread_bytes(self.checkpoint, folder) // BYTES_PER_LINE

    def landing_caught_up(self, folder: str) -> bool:
        """Whether the checkpoint has read every file of ``folder``, no batch pending."""
        return checkpoints.landing_caught_up(self.checkpoint, folder)

    def claim_cluster(self, kafka: KafkaResource) -> None:
        """Tie the checkpoint to the Kafka cluster it reads; refuse another cluster's.

        Offsets mean nothing in another cluster: a lake filled from one broker, run against a
        new one, would call the new topics read up to the old offsets and skip their records
        silently.
        """
        cluster = kafka.cluster_id()
        recorded = checkpoints.recorded_cluster(self.checkpoint)
        if recorded is None:  # a new stream (or one of a version that did not record it)
            checkpoints.record_cluster(self.checkpoint, cluster)
        elif recorded != cluster:
            raise dg.Failure(
                description=f"{self.stream} was read from the Kafka cluster {recorded}, but "
                f"KAFKA_BOOTSTRAP_SERVERS ({kafka.bootstrap_servers}) is the cluster {cluster}: "
                "its checkpoint's offsets do not apply there. Set LAKEHOUSE_ROOT to a new folder "
                "for this cluster, or KAFKA_BOOTSTRAP_SERVERS back to the cluster the lake was "
                f"filled from (checkpoint: {self.checkpoint})."
            )

    def resume_point(
        self,
        context: dg.AssetExecutionContext,
        kafka: KafkaResource,
        starts: dict[TopicPartitionKey, int],
        ends: dict[TopicPartitionKey, int],
    ) -> tuple[str, dict[str, Any]]:
        """Check the checkpoint against the topics' logs before the stream starts; returns its
        ``startingOffsets`` and metadata. Records removed unread, or a recreated topic, fail the
        run (``fail_on_data_loss``, the default). Otherwise each such partition resumes at its
        log's start, the others where the checkpoint left them: the old checkpoint is set aside
        (with its cluster, recorded again for the new one) and a new one starts at those offsets
        (Spark's own source would jump to the end of a recreated topic, skipping its new
        records), and what was skipped is logged and returned as metadata.
        """
        committed = self.offsets()
        lost = data_loss(committed, starts, ends)
        if not lost:
            return "earliest", {}
        message = data_loss_message(lost)
        if kafka.fail_on_data_loss:
            raise dg.Failure(description=message)
        context.log.warning(f"Resuming from the earliest available offsets. {message}")
        positions = {tp: committed.get(tp, EARLIEST) for tp in ends}
        positions.update({tp: loss.log_start for tp, loss in lost.items()})
        cluster = checkpoints.recorded_cluster(self.checkpoint)
        context.log.warning(
            f"The old checkpoint is kept at {checkpoints.set_aside(self.checkpoint)}"
        )
        if cluster is not None:
            checkpoints.record_cluster(self.checkpoint, cluster)
        skipped = {
            f"{t}-{p}": {"checkpoint_offset": loss.offset, "resumed_at": loss.log_start,
                         "records_lost": loss.records_lost}
            for (t, p), loss in sorted(lost.items())
        }  # fmt: skip
        metadata = {"kafka/data_loss": dg.MetadataValue.json(skipped)}
        return json.dumps(to_offsets(positions)), metadata

    def publish(self, kafka: KafkaResource, end_offsets: dict[str, Any] | None) -> None:
        """Publish a run's end offsets as the consumer group's, for lag monitors."""
        if end_offsets:
            kafka.commit_offsets(self.stream, end_offsets)
