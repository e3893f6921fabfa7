"""Bronze assets: one Delta table per Kafka topic and per landing-zone source, each filled by an
availableNow stream, exactly once."""

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame

from lakehouse_assets.bronze.columns import KAFKA_RECORD, LANDING_LINE
from lakehouse_assets.bronze.transforms import (
    kafka_to_bronze,
    landing_to_bronze,
)
from lakehouse_assets.constants import (
    BRONZE,
    CHECKPOINTS_DIR,
    FITNESS_OWNERS,
    KAFKA_BRONZE_PARTITION,
    KAFKA_TOPICS,
    LANDING_COLUMNS,
    LANDING_DIR,
    asset_key,
    asset_tags,
    stream_name,
)
from lakehouse_assets.migrations import require_current
from lakehouse_assets.table_metadata import code_references, table_metadata
from resources import KafkaResource, LakeResource, SparkResource
from resources.checkpoints import (
    committed_offsets,
    kafka_caught_up,
    landing_caught_up,
    record_cluster,
    recorded_cluster,
    set_aside,
)
from resources.kafka_client import (
    TopicPartitionKey,
    data_loss,
    data_loss_message,
    from_offsets,
    to_offsets,
)
from resources.streaming import StreamRun, run_available_now

EARLIEST = -2  # in Spark's startingOffsets JSON: the partition's log start


def bronze_checkpoint(lake: LakeResource, table: str) -> str:
    """The Spark checkpoint of the stream filling ``bronze.<table>``."""
    return lake.spark_path(CHECKPOINTS_DIR, stream_name(BRONZE, table))


def claim_cluster(checkpoint: str, stream: str, kafka: KafkaResource) -> str:
    """Tie a stream's checkpoint to the Kafka cluster it reads; refuse another cluster's.

    Offsets mean nothing in another cluster: a lake filled from one broker, run against a new
    one, would call the new topics read up to the old offsets and skip their records silently.
    """
    cluster = kafka.cluster_id()
    recorded = recorded_cluster(checkpoint)
    if recorded is None:  # a new stream (or one of a version that did not record it)
        record_cluster(checkpoint, cluster)
    elif recorded != cluster:
        raise dg.Failure(
            description=f"{stream} was read from the Kafka cluster {recorded}, but "
            f"KAFKA_BOOTSTRAP_SERVERS ({kafka.bootstrap_servers}) is the cluster {cluster}: its "
            "checkpoint's offsets do not apply there. Set LAKEHOUSE_ROOT to a new folder for "
            "this cluster, or KAFKA_BOOTSTRAP_SERVERS back to the cluster the lake was filled "
            f"from (checkpoint: {checkpoint})."
        )
    return cluster


def resume_point(
    context: dg.AssetExecutionContext,
    kafka: KafkaResource,
    checkpoint: str,
    starts: dict[TopicPartitionKey, int],
    ends: dict[TopicPartitionKey, int],
) -> tuple[str, dict[str, Any]]:
    """Check the stream's checkpoint against the topics' logs before it starts; returns the
    stream's ``startingOffsets`` and metadata. Records removed unread, or a recreated topic, fail
    the run (``fail_on_data_loss``, the default). Otherwise each such partition resumes at its
    log's start, the others where the checkpoint left them: the old checkpoint is set aside and
    a new one starts at those offsets (Spark's own source would jump to the end of a recreated
    topic, skipping its new records), and what was skipped is logged and returned as metadata.
    """
    committed = from_offsets(committed_offsets(checkpoint) or {})
    lost = data_loss(committed, starts, ends)
    if not lost:
        return "earliest", {}
    message = data_loss_message(lost)
    if kafka.fail_on_data_loss:
        raise dg.Failure(description=message)
    context.log.warning(f"Resuming from the earliest available offsets. {message}")
    positions = {tp: committed.get(tp, EARLIEST) for tp in ends}
    positions.update({tp: loss.log_start for tp, loss in lost.items()})
    context.log.warning(f"The old checkpoint is kept at {set_aside(checkpoint)}")
    skipped = {
        f"{t}-{p}": {"checkpoint_offset": loss.offset, "resumed_at": loss.log_start,
                     "records_lost": loss.records_lost}
        for (t, p), loss in sorted(lost.items())
    }  # fmt: skip
    return json.dumps(to_offsets(positions)), {"kafka/data_loss": dg.MetadataValue.json(skipped)}


def run_bronze_stream(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    table: str,
    source: Callable[[], DataFrame],
    descriptions: Mapping[str, str],
    partition_by: Sequence[str] = (),
    caught_up: Callable[[str], bool] = lambda checkpoint: False,
) -> tuple[StreamRun, dict[str, Any]]:
    """Run ``source`` (bronze rows) into ``bronze.<table>`` until caught up; returns the run
    and its metadata (``descriptions``: what each column holds).

    When ``caught_up(checkpoint)`` says the checkpoint already holds everything the source has,
    the stream is not started: a run that finds nothing new (as sensor runs often do) costs no
    streaming query. The table is created (empty) even when the source has no data yet, so
    downstream can read it.

    Raises:
        OutdatedTableError: the table is in an earlier version's layout (``lakehouse migrate``).
    """
    require_current(lake, BRONZE, table)
    stream = stream_name(BRONZE, table)
    checkpoint = bronze_checkpoint(lake, table)
    uri = lake.table_uri(BRONZE, table)
    exists = lake.exists(BRONZE, table)
    if exists and caught_up(checkpoint):
        context.log.info(f"{stream}: nothing new since its last batch; the stream was not started")
        run = StreamRun()
    else:
        run = run_available_now(source(), uri, checkpoint, stream, partition_by)
    if not exists and not lake.exists(BRONZE, table):
        stream_df = source()
        empty = stream_df.sparkSession.createDataFrame([], stream_df.schema)
        writer = empty.write.format("delta").mode("append").partitionBy(*partition_by)
        writer.save(lake.spark_path(BRONZE, table))
    context.log.info(
        f"{stream}: {run.rows_written} rows in batches {run.batches_committed}; "
        f"skipped already-committed batches {run.batches_skipped}"
    )
    metadata = {
        **table_metadata(lake, BRONZE, table, descriptions),
        "rows_written": run.rows_written,
        "batches_committed": len(run.batches_committed),
        "batches_skipped": dg.MetadataValue.json(run.batches_skipped),
    }
    return run, metadata


def kafka_bronze_asset(
    table: str,
    topics: Sequence[str] = (),
    pattern: str | None = None,
    description: str | None = None,
    owners: Sequence[str] = (),
) -> dg.AssetsDefinition:
    """The bronze asset of Kafka ``topics`` (or of the topics matching ``pattern``): their
    records, appended exactly once, raw."""
    stream = stream_name(BRONZE, table)
    origin = f"topics matching `{pattern}`" if pattern else f"topic `{', '.join(topics)}`"

    @dg.asset(
        key=asset_key(BRONZE, table),
        group_name=BRONZE,
        kinds={"spark", "delta", "kafka"},
        pool=stream,
        owners=list(owners) or None,
        tags=asset_tags(BRONZE, table),
        metadata=code_references(transform=kafka_to_bronze),
        description=(f"{description}\n\n" if description else "")
        + f"Records of the Kafka {origin} as delivered (key, value and headers as bytes, "
        "coordinates, timestamp), each exactly once, partitioned by the UTC date of the Kafka "
        f"timestamp. Stream and consumer group: `{stream}`.",
    )
    def _asset(
        context: dg.AssetExecutionContext,
        spark: SparkResource,
        kafka: KafkaResource,
        lake: LakeResource,
    ) -> dg.MaterializeResult:
        checkpoint = bronze_checkpoint(lake, table)
        cluster = claim_cluster(checkpoint, stream, kafka)  # fails fast if Kafka is unreachable
        subscribed = kafka.matching(pattern) if pattern else topics
        log_ends = kafka.end_offsets(subscribed)
        starts = kafka.start_offsets(subscribed)
        starting, skipped = resume_point(context, kafka, checkpoint, starts, log_ends)
        if skipped:  # the checkpoint set aside took the cluster's record with it
            record_cluster(checkpoint, cluster)
        run, metadata = run_bronze_stream(
            context,
            lake,
            table,
            lambda: kafka_to_bronze(
                kafka.read_stream(spark.get_session(), topics, starting, pattern)
            ),
            KAFKA_RECORD,
            [KAFKA_BRONZE_PARTITION],
            caught_up=lambda checkpoint: kafka_caught_up(checkpoint, log_ends),
        )
        if run.end_offsets:
            kafka.commit_offsets(stream, run.end_offsets)
        return dg.MaterializeResult(
            metadata={
                **metadata,
                **skipped,
                "end_offsets": dg.MetadataValue.json(run.end_offsets or {}),
                "log_end_offsets": dg.MetadataValue.json(
                    {f"{t}-{p}": offset for (t, p), offset in sorted(log_ends.items())}
                ),
            }
        )

    return _asset


def landing_bronze_asset(source: str) -> dg.AssetsDefinition:
    """The bronze asset of a landing-zone folder: each file's lines exactly once, as bytes."""
    stream = stream_name(BRONZE, source)

    @dg.asset(
        key=asset_key(BRONZE, source),
        group_name=BRONZE,
        kinds={"spark", "delta", "csv"},
        pool=stream,
        owners=FITNESS_OWNERS,
        tags=asset_tags(BRONZE, source),
        metadata=code_references(transform=landing_to_bronze),
        description=f"Lines of the CSV files dropped in `landing/{source}/` (columns "
        f"{', '.join(LANDING_COLUMNS[source])}, after a header line), each file exactly once, "
        "every line as the bytes the file holds, with the file name and load time.",
    )
    def _asset(
        context: dg.AssetExecutionContext, spark: SparkResource, lake: LakeResource
    ) -> dg.MaterializeResult:
        folder = [LANDING_DIR, source]
        _, metadata = run_bronze_stream(
            context,
            lake,
            source,
            lambda: landing_to_bronze(lake.read_lines_stream(spark.get_session(), folder)),
            LANDING_LINE,
            caught_up=lambda checkpoint: landing_caught_up(checkpoint, lake.path(*folder)),
        )
        return dg.MaterializeResult(metadata=metadata)

    return _asset


bronze_kafka_assets = [
    kafka_bronze_asset(topic, [topic], owners=FITNESS_OWNERS) for topic in KAFKA_TOPICS
]
bronze_landing_assets = [landing_bronze_asset(source) for source in LANDING_COLUMNS]
