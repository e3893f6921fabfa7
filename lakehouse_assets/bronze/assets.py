"""Bronze assets: one Delta table per Kafka topic and per landing-zone source, each filled by an
availableNow stream, exactly once."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.bronze.columns import KAFKA_RECORD, LANDING_LINE
from lakehouse_assets.bronze.position import StreamPosition
from lakehouse_assets.bronze.transforms import kafka_to_bronze, landing_to_bronze
from lakehouse_assets.constants import (
    BRONZE,
    KAFKA_BRONZE_PARTITION,
    LANDING_DIR,
    asset_key,
    asset_tags,
    stream_name,
)
from lakehouse_assets.migrations import Upgrade, require_current
from lakehouse_assets.table_metadata import code_references, table_metadata
from resources import KafkaResource, LakeResource, SparkResource, files
from resources.codegen import SMALL_BATCH_ROWS, fit_code_generation
from resources.streaming import StreamRun, run_available_now


def run_bronze_stream(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    table: str,
    source: Callable[[], DataFrame],
    descriptions: Mapping[str, str],
    partition_by: Sequence[str] = (),
    caught_up: Callable[[StreamPosition], bool] = lambda position: False,
    upgrade: Upgrade | None = None,
    pending: Callable[[StreamPosition], int] = lambda position: SMALL_BATCH_ROWS,
) -> tuple[StreamRun, dict[str, Any]]:
    """Run ``source`` (bronze rows) into ``bronze.<table>`` until caught up; returns the run
    and its metadata (``descriptions``: what each column holds; ``upgrade``: the table's, if an
    earlier version wrote it in another layout).

    When ``caught_up(position)`` says the checkpoint already holds everything the source has,
    the stream is not started: a run that finds nothing new (as sensor runs often do) costs no
    streaming query. ``pending(position)``, about how many records the run will read, fits its
    code generation (``resources.codegen.fit_code_generation``). The table is created (empty)
    even when the source has no data yet, so downstream can read it.

    Raises:
        OutdatedTableError: the table is in an earlier version's layout (``lakehouse migrate``).
    """
    require_current(lake, upgrade)
    position = StreamPosition(lake, table)
    stream = position.stream
    uri = lake.table_uri(BRONZE, table)
    exists = lake.exists(BRONZE, table)
    if exists and caught_up(position):
        context.log.info(f"{stream}: nothing new since its last batch; the stream was not started")
        return StreamRun(), _stream_metadata(lake, table, descriptions, StreamRun())
    stream_df = source()
    fit_code_generation(stream_df.sparkSession, pending(position))  # read when the query starts
    run = run_available_now(stream_df, uri, position.checkpoint, stream, partition_by)
    if not exists and not lake.exists(BRONZE, table):
        empty = stream_df.sparkSession.createDataFrame([], stream_df.schema)
        writer = empty.write.format("delta").mode("append").partitionBy(*partition_by)
        writer.save(lake.spark_path(BRONZE, table))
    if run.batches_committed or not exists:
        lake.register(stream_df.sparkSession, BRONZE, table, new=not exists)
    context.log.info(
        f"{stream}: {run.rows_written} rows in batches {run.batches_committed}; "
        f"skipped already-committed batches {run.batches_skipped}"
    )
    return run, _stream_metadata(lake, table, descriptions, run)


def _stream_metadata(
    lake: LakeResource, table: str, descriptions: Mapping[str, str], run: StreamRun
) -> dict[str, Any]:
    return {
        **table_metadata(lake, BRONZE, table, descriptions),
        "rows_written": run.rows_written,
        "batches_committed": len(run.batches_committed),
        "batches_skipped": dg.MetadataValue.json(run.batches_skipped),
    }


def kafka_bronze_asset(
    table: str,
    topics: Sequence[str] = (),
    pattern: str | None = None,
    description: str | None = None,
    owners: Sequence[str] = (),
    upgrade: Upgrade | None = None,
) -> dg.AssetsDefinition:
    """The bronze asset of Kafka ``topics`` (or of the topics matching ``pattern``): their
    records, appended exactly once, raw. ``upgrade``: the table's, if an earlier version wrote
    it in another layout (``migrations``)."""
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
        position = StreamPosition(lake, table)
        position.claim_cluster(kafka)  # fails fast if Kafka is unreachable
        subscribed = kafka.matching(pattern) if pattern else topics
        log_ends = kafka.end_offsets(subscribed)
        starts = kafka.start_offsets(subscribed)
        starting, skipped = position.resume_point(context, kafka, starts, log_ends)
        run, metadata = run_bronze_stream(
            context,
            lake,
            table,
            lambda: kafka_to_bronze(
                kafka.read_stream(spark.get_session(), topics, starting, pattern)
            ),
            KAFKA_RECORD,
            [KAFKA_BRONZE_PARTITION],
            caught_up=lambda position: position.kafka_caught_up(log_ends),
            upgrade=upgrade,
            pending=lambda position: position.kafka_pending(log_ends),
        )
        position.publish(kafka, run.end_offsets)
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


def landing_bronze_asset(
    source: str,
    columns: Sequence[str],
    owners: Sequence[str] = (),
    upgrade: Upgrade | None = None,
) -> dg.AssetsDefinition:
    """The bronze asset of the landing-zone folder ``landing/<source>/``, whose CSV files have
    ``columns``: each file's lines exactly once, as bytes. ``upgrade``: the table's, if an
    earlier version wrote it in another layout (``migrations``)."""
    stream = stream_name(BRONZE, source)

    @dg.asset(
        key=asset_key(BRONZE, source),
        group_name=BRONZE,
        kinds={"spark", "delta", "csv"},
        pool=stream,
        owners=list(owners) or None,
        tags=asset_tags(BRONZE, source),
        metadata=code_references(transform=landing_to_bronze),
        description=f"Lines of the CSV files dropped in `landing/{source}/` (columns "
        f"{', '.join(columns)}, after a header line), each file exactly once, "
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
            lambda: landing_to_bronze(read_lines_stream(lake, spark.get_session(), folder)),
            LANDING_LINE,
            caught_up=lambda position: position.landing_caught_up(lake.path(*folder)),
            upgrade=upgrade,
            pending=lambda position: position.landing_pending(lake.path(*folder)),
        )
        return dg.MaterializeResult(metadata=metadata)

    return _asset


def read_lines_stream(lake: LakeResource, spark: SparkSession, folder: Sequence[str]) -> DataFrame:
    """A stream of the lines of the files dropped in ``<root>/<folder...>``: each ``line`` as
    the bytes the file holds (without its line break), with ``source_file``, the file it
    came from. Parsing (CSV, JSON lines...) is left to the layers that know the format.

    Files whose names start with ``.`` or ``_`` are ignored until renamed: writers should
    write under such a name and rename when done.
    """
    files.make_folder(lake.path(*folder))  # Spark's file source needs the folder to exist
    return (
        spark.readStream.format("text")
        .option("maxFilesPerTrigger", str(lake.max_files_per_trigger))
        .load(lake.spark_path(*folder))
        .select(
            F.col("value").cast("binary").alias("line"),  # Spark keeps the bytes read
            F.col("_metadata.file_path").alias("source_file"),
        )
    )
