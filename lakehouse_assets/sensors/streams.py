"""Sensors launching the bronze streams: Kafka lag (topic end offsets minus the offsets in the
stream's checkpoint) and new landing-zone files (files in the folder the stream's checkpoint has
not read). They decide only whether to launch; what was processed lives in the checkpoints.
"""

import time
from collections.abc import Sequence

import dagster as dg

from lakehouse_assets.checks.freshness import freshness_evaluation, kafka_waiting, landing_waiting
from lakehouse_assets.constants import BRONZE, KAFKA_TOPICS, LANDING_COLUMNS, asset_key, stream_name
from resources import KafkaResource, LakeResource, SensorSettings, sensor_settings

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
        waiting = kafka_waiting(kafka, lake, table, topics, pattern)
        total = waiting.count
        shown = ", ".join(f"{part}: {n}" for part, n in waiting.parts.items()) or "no partitions"
        per_partition = {f"kafka_lag/{part}": n for part, n in waiting.parts.items()}
        observed = dg.AssetObservation(
            asset_key=key, metadata={"kafka_lag": total, **per_partition}
        )
        events = [observed, freshness_evaluation(key, waiting)]
        waiting_since = float(context.cursor) if context.cursor and total else time.time()
        due = total > settings.lag_threshold or (
            total > 0 and time.time() - waiting_since >= settings.lag_max_wait_s
        )
        if not due:
            cursor = str(waiting_since) if total else ""
            return dg.SensorResult(
                skip_reason=f"Lag {total} ({shown}).", asset_events=events, cursor=cursor
            )
        context.log.info(f"{stream} lags {total} records ({shown}): launching it")
        return dg.SensorResult(run_requests=[_request(key, stream)], asset_events=events, cursor="")

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
        waiting = landing_waiting(lake, source)
        events = [freshness_evaluation(key, waiting)]
        if not waiting.count:
            return dg.SensorResult(
                skip_reason=f"No new files in landing/{source}/.", asset_events=events
            )
        context.log.info(f"{waiting.count} new files in landing/{source}/")
        return dg.SensorResult(run_requests=[_request(key, stream)], asset_events=events)

    return _sensor


SETTINGS = sensor_settings()
stream_sensors = [
    *[kafka_lag_sensor(topic, SETTINGS) for topic in KAFKA_TOPICS],
    *[landing_sensor(source, SETTINGS) for source in LANDING_COLUMNS],
]
