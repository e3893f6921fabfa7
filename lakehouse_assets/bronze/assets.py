"""Bronze assets: one Delta table per Kafka topic, filled by an availableNow stream."""

from datetime import UTC, datetime

import dagster as dg
from pyspark.sql import DataFrame

from lakehouse_assets.bronze.transforms import KAFKA_BRONZE_PARTITION, kafka_to_bronze
from lakehouse_assets.constants import BRONZE, CHECKPOINTS_DIR, KAFKA_TOPICS, asset_key, stream_name
from resources import KafkaResource, LakeResource, SparkResource
from resources.kafka_source import KAFKA_SOURCE_SCHEMA
from resources.streaming import DeltaBatchSink, run_available_now


def _to_bronze(records: DataFrame) -> DataFrame:
    return kafka_to_bronze(records, ingested_at=datetime.now(UTC))


def kafka_bronze_asset(topic: str) -> dg.AssetsDefinition:
    """The bronze asset of a Kafka topic: its records, appended exactly once, raw."""
    stream = stream_name(BRONZE, topic)

    @dg.asset(
        key=asset_key(BRONZE, topic),
        group_name=BRONZE,
        kinds={"spark", "delta", "kafka"},
        pool=stream,
        description=f"Raw records of the Kafka topic `{topic}`, each exactly once, partitioned "
        f"by the UTC date of the Kafka timestamp. Stream and consumer group: `{stream}`.",
    )
    def _asset(
        context: dg.AssetExecutionContext,
        spark: SparkResource,
        kafka: KafkaResource,
        lake: LakeResource,
    ) -> dg.MaterializeResult:
        log_ends = kafka.end_offsets([topic])  # fails fast, naming the servers, if unreachable
        session = spark.get_session()
        sink = DeltaBatchSink(
            lake,
            BRONZE,
            topic,
            stream,
            checkpoint=lake.spark_path(CHECKPOINTS_DIR, stream),
            transform=_to_bronze,
            partition_by=[KAFKA_BRONZE_PARTITION],
        )
        run = run_available_now(kafka.read_stream(session, [topic], group_id=stream), sink)
        if run.end_offsets:
            kafka.commit_offsets(stream, run.end_offsets)
        if not lake.exists(BRONZE, topic):  # no records yet: create the empty table
            empty = session.createDataFrame([], KAFKA_SOURCE_SCHEMA)
            lake.append(BRONZE, topic, _to_bronze(empty).toArrow(), [KAFKA_BRONZE_PARTITION])
        context.log.info(
            f"{stream}: {run.rows_written} rows in batches {run.batches_committed}; "
            f"skipped already-committed batches {run.batches_skipped}"
        )
        return dg.MaterializeResult(
            metadata={
                **lake.table_metadata(BRONZE, topic),
                "rows_written": run.rows_written,
                "batches_committed": len(run.batches_committed),
                "batches_skipped": dg.MetadataValue.json(run.batches_skipped),
                "end_offsets": dg.MetadataValue.json(run.end_offsets or {}),
                "log_end_offsets": dg.MetadataValue.json(
                    {f"{t}-{p}": offset for (t, p), offset in sorted(log_ends.items())}
                ),
            }
        )

    return _asset


bronze_kafka_assets = [kafka_bronze_asset(topic) for topic in KAFKA_TOPICS]
