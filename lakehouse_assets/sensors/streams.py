"""Sensors launching the bronze streams: Kafka lag (topic end offsets minus the offsets in the
stream's checkpoint) and new landing-zone files (files in the folder the stream's checkpoint has
not read). They decide only whether to launch; what was processed lives in the checkpoints.
"""

import time
from collections.abc import Sequence

import dagster as dg

from lakehouse_assets.constants import (
    BRONZE,
    CHECKPOINTS_DIR,
    KAFKA_TOPICS,
    LANDING_COLUMNS,
    LANDING_DIR,
    asset_key,
    stream_name,
)
from resources import KafkaResource, LakeResource, SensorSettings, sensor_settings
from resources.checkpoints import committed_offsets, files_read, landed_files
from resources.kafka_client import TopicPartitionKey, from_offsets

STREAM_TAG = "lakehouse/stream"
IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def run_in_progress(instance: dg.DagsterInstance, key: dg.AssetKey) -> bool:
    """Whether a queued or running run will materialize ``key``."""
    records = instance.get_run_records(dg.RunsFilter(statuses=IN_PROGRESS))
    return any(key in (record.dagster_run.asset_selection or ()) for record in records)


def stream_lag(
    kafka: KafkaResource,
    lake: LakeResource,
    table: str,
    topics: Sequence[str] = (),
    pattern: str | None = None,
) -> dict[TopicPartitionKey, int]:
    """Records of ``topics`` (or of the topics matching ``pattern``) not yet committed by the
    stream of ``bronze.<table>``, per partition."""
    checkpoint = lake.spark_path(CHECKPOINTS_DIR, stream_name(BRONZE, table))
    subscribed = kafka.matching(pattern) if pattern else topics
    return kafka.lag(subscribed, from_offsets(committed_offsets(checkpoint) or {}))


def _request(key: dg.AssetKey, stream: str) -> dg.RunRequest:
    return dg.RunRequest(asset_selection=[key], tags={STREAM_TAG: stream})


def _first_run(
    context: dg.SensorEvaluationContext, key: dg.AssetKey, stream: str
) -> dg.SensorResult:
    """The table does not exist yet: one run creates it (empty if there is no data), so the
    tables downstream, which wait for every upstream table, can follow."""
    context.log.info(f"{key.to_user_string()} does not exist yet: launching {stream}")
    return dg.SensorResult(run_requests=[_request(key, stream)])


def kafka_lag_sensor(
    table: str,
    settings: SensorSettings,
    topics: Sequence[str] = (),
    pattern: str | None = None,
) -> dg.SensorDefinition:
    """Launches ``bronze/<table>`` when its stream lags behind ``topics`` (or the topics matching
    ``pattern``; default: the topic named like the table); records the lag on the asset."""
    key, stream = asset_key(BRONZE, table), stream_name(BRONZE, table)
    topics = topics or ([] if pattern else [table])

    @dg.sensor(
        name=f"{table}_kafka_lag",
        asset_selection=[key],
        minimum_interval_seconds=settings.interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Runs {stream} when its Kafka lag exceeds {settings.lag_threshold} records "
        f"or a record has waited {settings.lag_max_wait_s} s.",
    )
    def _sensor(
        context: dg.SensorEvaluationContext, kafka: KafkaResource, lake: LakeResource
    ) -> dg.SensorResult | dg.SkipReason:
        if run_in_progress(context.instance, key):
            return dg.SkipReason(f"A run of {stream} is queued or in progress.")
        if not lake.exists(BRONZE, table):
            return _first_run(context, key, stream)
        lag = stream_lag(kafka, lake, table, topics, pattern)
        total = sum(lag.values())
        shown = ", ".join(f"{t}-{p}: {n}" for (t, p), n in sorted(lag.items())) or "no partitions"
        observed = dg.AssetObservation(
            asset_key=key,
            metadata={"kafka_lag": total, **{f"kafka_lag/{t}-{p}": n for (t, p), n in lag.items()}},
        )
        waiting_since = float(context.cursor) if context.cursor and total else time.time()
        due = total > settings.lag_threshold or (
            total > 0 and time.time() - waiting_since >= settings.lag_max_wait_s
        )
        if not due:
            cursor = str(waiting_since) if total else ""
            return dg.SensorResult(
                skip_reason=f"Lag {total} ({shown}).", asset_events=[observed], cursor=cursor
            )
        context.log.info(f"{stream} lags {total} records ({shown}): launching it")
        return dg.SensorResult(
            run_requests=[_request(key, stream)], asset_events=[observed], cursor=""
        )

    return _sensor


def landing_sensor(source: str, settings: SensorSettings) -> dg.SensorDefinition:
    """Launches ``bronze/<source>`` when its landing folder holds files the stream has not read."""
    key, stream = asset_key(BRONZE, source), stream_name(BRONZE, source)

    @dg.sensor(
        name=f"{source}_landing_files",
        asset_selection=[key],
        minimum_interval_seconds=settings.interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Runs {stream} when new files arrive in landing/{source}/.",
    )
    def _sensor(
        context: dg.SensorEvaluationContext, lake: LakeResource
    ) -> dg.SensorResult | dg.SkipReason:
        if run_in_progress(context.instance, key):
            return dg.SkipReason(f"A run of {stream} is queued or in progress.")
        if not lake.exists(BRONZE, source):
            return _first_run(context, key, stream)
        checkpoint = lake.spark_path(CHECKPOINTS_DIR, stream)
        new = landed_files(lake.path(LANDING_DIR, source)) - files_read(checkpoint)
        if not new:
            return dg.SkipReason(f"No new files in landing/{source}/.")
        context.log.info(f"{len(new)} new files in landing/{source}/: {sorted(new)[:5]}")
        return dg.SensorResult(run_requests=[_request(key, stream)])

    return _sensor


SETTINGS = sensor_settings()
stream_sensors = [
    *[kafka_lag_sensor(topic, SETTINGS) for topic in KAFKA_TOPICS],
    *[landing_sensor(source, SETTINGS) for source in LANDING_COLUMNS],
]
