"""Sensors launching the bronze streams: Kafka lag (topic end offsets minus the offsets in the
stream's checkpoint) and new landing-zone files (files in the folder the stream's checkpoint has
not read). They decide only whether to launch; what was processed lives in the checkpoints.

Every evaluation says why it launches or not, with the lag and the age of the oldest waiting
record, in the tick's skip reason and its log. The lag (an observation of the asset, charted) and
the freshness check are recorded when they change, and every ``REPORT_AGAIN_S`` while they do not
(the oldest record's age goes on): not at every evaluation, which would add two events to the
asset's history every few seconds for as long as the stack runs.
"""

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from lakehouse_assets.automation import STREAM_TAG
from lakehouse_assets.checks.freshness import (
    Waiting,
    freshness_evaluation,
    kafka_waiting,
    landing_waiting,
)
from lakehouse_assets.constants import BRONZE, asset_key, stream_name
from lakehouse_assets.sensors.chain import chain_request
from lakehouse_assets.sensors.runs import runs_in_progress
from resources import KafkaResource, LakeResource, SensorSettings
from resources.streaming import STREAM_WRITE

# Metadata keys of the lag observations, one chart each on the asset's Plots tab.
LAG_RECORDS = "lag/records_waiting"
LAG_OLDEST_S = "lag/oldest_waiting_seconds"
LAG_BY_PARTITION = "lag/records_waiting_by_partition"
# An unchanged lag and freshness outcome are recorded again after this long.
REPORT_AGAIN_S = 300.0


@dataclass(frozen=True)
class Decision:
    """Whether a sensor launches its stream, and why (the tick's skip reason or log line)."""

    launch: bool
    reason: str


def _busy(stream: str, busy: Sequence[str], then: str) -> str:
    return f"A run of {stream} is queued or in progress ({busy[0]}); {then}."


def _backlog(waiting: Waiting, unit: str, now: float) -> str:
    shown = ", ".join(f"{part}: {n}" for part, n in waiting.parts.items())
    return (
        f"{waiting.count} {unit} waiting ({shown or 'no partitions'}), the oldest for "
        f"{waiting.age_s(now):.0f} s"
    )


def lag_decision(
    stream: str,
    waiting: Waiting,
    settings: SensorSettings,
    now: float,
    busy: Sequence[str] = (),
) -> Decision:
    """Whether the Kafka stream ``stream`` should run now: when more records than the threshold
    wait, or when the oldest waiting record (by its Kafka timestamp) has waited the max wait,
    unless a run of the stream is already queued or running (``busy``: their run ids)."""
    backlog = _backlog(waiting, "records", now)
    if busy:
        return Decision(False, _busy(stream, busy, backlog))
    if not waiting.count:
        return Decision(False, f"{stream} is caught up: {backlog}.")
    if waiting.count > settings.lag_threshold:
        return Decision(
            True, f"{backlog}: above the threshold of {settings.lag_threshold}: launching {stream}."
        )
    left = settings.lag_max_wait_s - waiting.age_s(now)
    if left <= 0:
        return Decision(
            True, f"{backlog}: the max wait of {settings.lag_max_wait_s} s is reached: launching "
            f"{stream}.",
        )  # fmt: skip
    return Decision(
        False,
        f"{backlog}: within the threshold of {settings.lag_threshold} records; launching when "
        f"the oldest has waited {settings.lag_max_wait_s} s (in {left:.0f} s) or more records "
        "arrive.",
    )


def landing_decision(
    stream: str, folder: str, waiting: Waiting, now: float, busy: Sequence[str] = ()
) -> Decision:
    """Whether the landing stream ``stream`` should run now: when ``folder`` holds files it has
    not read and no run of it is queued or running (``busy``)."""
    backlog = _backlog(waiting, "new files", now)
    if busy:
        return Decision(False, _busy(stream, busy, backlog))
    if not waiting.count:
        return Decision(False, f"No new files in {folder}: {stream} has read every file.")
    return Decision(True, f"{backlog}: launching {stream}.")


def _request(context: dg.SensorEvaluationContext, key: dg.AssetKey, stream: str) -> dg.RunRequest:
    """A run of the stream and of the tables that follow it (``chain_request``)."""
    return chain_request(context, key, {STREAM_TAG: stream})


def _first_run(
    context: dg.SensorEvaluationContext, key: dg.AssetKey, stream: str, busy: Sequence[str]
) -> dg.SensorResult:
    """The table does not exist yet: one run creates it (empty if there is no data), so the
    tables downstream, which wait for every upstream table, can follow."""
    if busy:
        reason = _busy(stream, busy, "it creates the table")
        context.log.info(reason)
        return dg.SensorResult(skip_reason=reason)
    context.log.info(f"{key.to_user_string()} does not exist yet: launching {stream}")
    return dg.SensorResult(run_requests=[_request(context, key, stream)])


def unreported_write(history: Sequence[Mapping[str, Any]], recorded: str | None) -> int | None:
    """The Delta version of the stream's newest commit (``history``: the table's commits, newest
    first) when the asset's latest materialization recorded an older one (``recorded``: its
    ``delta_version``, None without one): a run committed, then died before recording it, and
    what follows the table would wait for a record that never comes. None when all is recorded
    (maintenance commits, OPTIMIZE and VACUUM, are not the stream's)."""
    writes = (c["version"] for c in history if c.get("operation") in (STREAM_WRITE, "WRITE"))
    written = next(writes, None)
    if written is None or (
        recorded is not None and recorded.isdigit() and int(recorded) >= written
    ):
        return None
    return written


def _record_run(
    context: dg.SensorEvaluationContext,
    lake: LakeResource,
    key: dg.AssetKey,
    stream: str,
    busy: Sequence[str],
) -> dg.SensorResult | None:
    """A run recording the stream's last write when no materialization did (a run in progress
    will record it itself)."""
    if busy:
        return None
    event = context.instance.get_latest_materialization_event(key)
    metadata = event.asset_materialization.metadata if event and event.asset_materialization else {}
    recorded = metadata.get("delta_version")
    recorded_text = None if recorded is None else str(recorded.value)
    written = unreported_write(lake.history(*key.path, limit=20), recorded_text)
    if written is None:
        return None
    reason = (
        f"{key.to_user_string()} is at Delta version {written}, but its last materialization "
        f"recorded {recorded_text or 'none'} (a run died after its commit): launching {stream} "
        "to record it, so that the tables downstream follow."
    )
    context.log.info(reason)
    return dg.SensorResult(run_requests=[_request(context, key, stream)])


def reported_lately(cursor: str | None, state: Mapping[str, Any], now: float) -> bool:
    """Whether the sensor recorded ``state`` (what its events say) less than
    ``REPORT_AGAIN_S`` before ``now``, as its cursor says."""
    try:
        last = json.loads(cursor or "{}")
    except ValueError:  # a cursor of another version
        return False
    return last.get("state") == state and now - last.get("at", 0.0) < REPORT_AGAIN_S


def _result(
    context: dg.SensorEvaluationContext,
    key: dg.AssetKey,
    stream: str,
    decision: Decision,
    waiting: Waiting,
    now: float,
    events: Sequence[dg.AssetObservation | dg.AssetCheckEvaluation],
) -> dg.SensorResult:
    """The decision, with ``events`` unless the sensor recorded the same lag and freshness
    outcome lately (``reported_lately``)."""
    context.log.info(decision.reason)
    checks = [e.passed for e in events if isinstance(e, dg.AssetCheckEvaluation)]
    state = {"waiting": dict(waiting.parts), "since": waiting.since, "passed": checks}
    state = json.loads(json.dumps(state))  # as a cursor holds it
    cursor = context.cursor
    if reported_lately(cursor, state, now):
        events = ()
    else:
        cursor = json.dumps({"state": state, "at": now})
    if decision.launch:
        return dg.SensorResult(
            run_requests=[_request(context, key, stream)], asset_events=list(events), cursor=cursor
        )
    return dg.SensorResult(skip_reason=decision.reason, asset_events=list(events), cursor=cursor)


def lag_observation(key: dg.AssetKey, waiting: Waiting, now: float) -> dg.AssetObservation:
    """The lag of ``key``'s stream as an observation: records waiting and the oldest's age
    (charted), and the records waiting per partition."""
    return dg.AssetObservation(
        asset_key=key,
        metadata={
            LAG_RECORDS: dg.MetadataValue.int(waiting.count),
            LAG_OLDEST_S: dg.MetadataValue.float(round(waiting.age_s(now), 1)),
            LAG_BY_PARTITION: dg.MetadataValue.json(dict(waiting.parts)),
        },
    )


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
        asset_selection=dg.AssetSelection.assets(key).downstream(),
        minimum_interval_seconds=settings.interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Runs {stream} when its Kafka lag exceeds {settings.lag_threshold} records "
        f"or a record has waited {settings.lag_max_wait_s} s.",
    )
    def _sensor(
        context: dg.SensorEvaluationContext, kafka: KafkaResource, lake: LakeResource
    ) -> dg.SensorResult:
        busy = runs_in_progress(context.instance, key)
        if not lake.exists(BRONZE, table):
            return _first_run(context, key, stream, busy)
        if recording := _record_run(context, lake, key, stream, busy):
            return recording
        now, waiting = time.time(), kafka_waiting(kafka, lake, table, topics, pattern)
        decision = lag_decision(stream, waiting, settings, now, busy)
        events = [lag_observation(key, waiting, now), freshness_evaluation(key, waiting, now)]
        return _result(context, key, stream, decision, waiting, now, events)

    return _sensor


def landing_sensor(source: str, settings: SensorSettings) -> dg.SensorDefinition:
    """Launches ``bronze/<source>`` when its landing folder holds files the stream has not read."""
    key, stream = asset_key(BRONZE, source), stream_name(BRONZE, source)

    @dg.sensor(
        name=f"{source}_landing_files",
        asset_selection=dg.AssetSelection.assets(key).downstream(),
        minimum_interval_seconds=settings.interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Runs {stream} when new files arrive in landing/{source}/.",
    )
    def _sensor(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SensorResult:
        busy = runs_in_progress(context.instance, key)
        if not lake.exists(BRONZE, source):
            return _first_run(context, key, stream, busy)
        if recording := _record_run(context, lake, key, stream, busy):
            return recording
        now, waiting = time.time(), landing_waiting(lake, source)
        decision = landing_decision(stream, f"landing/{source}/", waiting, now, busy)
        events = [freshness_evaluation(key, waiting, now)]
        return _result(context, key, stream, decision, waiting, now, events)

    return _sensor
