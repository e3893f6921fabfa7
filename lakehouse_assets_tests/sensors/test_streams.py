"""The stream sensors, evaluated as the daemon would, against the real embedded broker."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any
from unittest.mock import patch

import dagster as dg

from lakehouse_assets.checks.freshness import kafka_waiting
from lakehouse_assets.constants import BRONZE, CHECKPOINTS_DIR, LANDING_DIR, asset_key, stream_name
from lakehouse_assets.fitness.names import LANDING_GYM_LOGINS, TOPIC_BPM, TOPIC_WORKOUT
from lakehouse_assets.fitness.pipeline import bronze_kafka_assets, bronze_landing_assets
from lakehouse_assets.sensors.streams import (
    LAG_BY_PARTITION,
    LAG_RECORDS,
    REPORT_AGAIN_S,
    kafka_lag_sensor,
    landing_sensor,
)
from lakehouse_assets_tests.conftest import produce
from lakehouse_tools.broker import EmbeddedBroker
from resources import SensorSettings
from resources.checkpoints import committed_offsets
from resources.kafka_client import from_offsets

SETTINGS = SensorSettings(interval_s=30, lag_threshold=0, lag_max_wait_s=300)
SENSORS = {topic: kafka_lag_sensor(topic, SETTINGS) for topic in (TOPIC_BPM, TOPIC_WORKOUT)}
ASSETS = {a.key: a for a in [*bronze_kafka_assets, *bronze_landing_assets]}


def evaluate(
    sensor: dg.SensorDefinition, instance: dg.DagsterInstance, resources: dict[str, Any]
) -> Any:
    context = dg.build_sensor_context(instance=instance, resources=resources)
    return sensor(context)


def requested(result: Any) -> list[dg.AssetKey]:
    requests = result.run_requests if isinstance(result, dg.SensorResult) else []
    return [key for request in requests or [] for key in request.asset_selection or []]


def lag_seen(result: Any) -> dict[str, Any]:
    """The lag the sensor observed: records waiting in all, and per partition."""
    observation = result.asset_events[0]
    assert isinstance(observation, dg.AssetObservation)
    metadata = observation.metadata
    return {"total": metadata[LAG_RECORDS].value, **metadata[LAG_BY_PARTITION].value}


def skip_reason(result: Any) -> str:
    assert isinstance(result, dg.SensorResult) and result.skip_reason
    return result.skip_reason.skip_message or ""


def materialize(key: dg.AssetKey, resources: dict[str, Any], instance: dg.DagsterInstance) -> None:
    dg.materialize([ASSETS[key]], resources=resources, instance=instance)


def test_kafka_lag_sensors_launch_exactly_the_lagging_stream(
    broker: EmbeddedBroker, resources: dict[str, Any]
) -> None:
    instance = dg.DagsterInstance.ephemeral()
    kafka, lake = resources["kafka"], resources["lake"]
    kafka.create_topic(TOPIC_BPM, partitions=2)
    kafka.create_topic(TOPIC_WORKOUT, partitions=2)
    workout = asset_key(BRONZE, TOPIC_WORKOUT)
    assert requested(evaluate(SENSORS[TOPIC_WORKOUT], instance, resources)) == [workout]
    materialize(workout, resources, instance)  # its first run creates the (empty) table
    produce(broker.bootstrap_servers, TOPIC_BPM, [{"n": n} for n in range(500)])
    materialize(asset_key(BRONZE, TOPIC_BPM), resources, instance)

    caught_up = evaluate(SENSORS[TOPIC_BPM], instance, resources)
    assert requested(caught_up) == [] and lag_seen(caught_up)["total"] == 0
    assert requested(evaluate(SENSORS[TOPIC_WORKOUT], instance, resources)) == []

    produce(broker.bootstrap_servers, TOPIC_WORKOUT, [{"n": n} for n in range(120)])
    materialize(asset_key(BRONZE, TOPIC_WORKOUT), resources, instance)
    produce(broker.bootstrap_servers, TOPIC_WORKOUT, [{"n": n} for n in range(30)])
    lagging = evaluate(SENSORS[TOPIC_WORKOUT], instance, resources)
    assert requested(lagging) == [asset_key(BRONZE, TOPIC_WORKOUT)]
    assert requested(evaluate(SENSORS[TOPIC_BPM], instance, resources)) == []

    checkpoint = lake.spark_path(CHECKPOINTS_DIR, stream_name(BRONZE, TOPIC_WORKOUT))
    committed = from_offsets(committed_offsets(checkpoint) or {})
    ends = kafka.end_offsets([TOPIC_WORKOUT])
    seen = lag_seen(lagging)
    assert seen["total"] == 30
    for (topic, partition), end in ends.items():
        assert seen[f"{topic}-{partition}"] == end - committed[(topic, partition)]

    key = asset_key(BRONZE, TOPIC_WORKOUT)
    instance.add_run(
        dg.DagsterRun(
            job_name="__ASSET_JOB",
            run_id=str(uuid.uuid4()),
            status=dg.DagsterRunStatus.STARTED,
            asset_selection=frozenset({key}),
        )
    )
    busy = evaluate(SENSORS[TOPIC_WORKOUT], instance, resources)
    assert requested(busy) == [] and "in progress" in skip_reason(busy)
    assert "30 records waiting" in skip_reason(busy)


def test_landing_sensor_launches_for_complete_unread_files(
    resources: dict[str, Any], lake_root: Path
) -> None:
    instance = dg.DagsterInstance.ephemeral()
    sensor = landing_sensor(LANDING_GYM_LOGINS, SETTINGS)
    folder = lake_root / LANDING_DIR / LANDING_GYM_LOGINS
    key = asset_key(BRONZE, LANDING_GYM_LOGINS)
    assert requested(evaluate(sensor, instance, resources)) == [key]  # creates the table
    materialize(key, resources, instance)
    assert requested(evaluate(sensor, instance, resources)) == []

    (folder / ".half-written.csv").write_text("mac_address,gym,login,logout\n")
    assert requested(evaluate(sensor, instance, resources)) == []

    (folder / "a.csv").write_text("mac_address,gym,login,logout\nm1,5,100,200\n")
    assert requested(evaluate(sensor, instance, resources)) == [key]
    materialize(key, resources, instance)
    assert requested(evaluate(sensor, instance, resources)) == []

    # A run that committed, then died before recording it (here: recorded elsewhere): the
    # sensor launches one that records it, so that silver follows.
    (folder / "b.csv").write_text("mac_address,gym,login,logout\nm2,5,300,400\n")
    materialize(key, resources, dg.DagsterInstance.ephemeral())
    unrecorded = evaluate(sensor, instance, resources)
    assert requested(unrecorded) == [key]
    materialize(key, resources, instance)
    assert requested(evaluate(sensor, instance, resources)) == []


def test_small_lag_waits_until_the_oldest_record_has_waited_long_enough(
    broker: EmbeddedBroker, resources: dict[str, Any]
) -> None:
    instance = dg.DagsterInstance.ephemeral()
    sensor = kafka_lag_sensor(TOPIC_WORKOUT, SensorSettings(lag_threshold=100, lag_max_wait_s=60))
    materialize(asset_key(BRONZE, TOPIC_WORKOUT), resources, instance)  # the table exists, empty
    produce(broker.bootstrap_servers, TOPIC_WORKOUT, [{"n": n} for n in range(30)])

    first = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    assert requested(first) == [] and lag_seen(first)["total"] == 30  # 30 <= 100: wait
    assert "30 records waiting" in skip_reason(first)
    assert "within the threshold of 100 records" in skip_reason(first)
    # The same lag at the next tick is not recorded again...
    again = sensor(dg.build_sensor_context(instance, cursor=first.cursor, resources=resources))
    assert requested(again) == [] and again.asset_events == []
    assert "30 records waiting" in skip_reason(again)
    # ...but the same records a minute later (by their Kafka timestamps) have waited long
    # enough: the stream is launched (the lag, still the same, is not recorded).
    clock = "lakehouse_assets.sensors.streams.time.time"
    with patch(clock, return_value=time.time() + 61):
        late = sensor(dg.build_sensor_context(instance, cursor=again.cursor, resources=resources))
    assert requested(late) == [asset_key(BRONZE, TOPIC_WORKOUT)] and late.asset_events == []
    # An unchanged lag is recorded again after REPORT_AGAIN_S, and a changed one at once.
    with patch(clock, return_value=time.time() + REPORT_AGAIN_S + 1):
        later = sensor(dg.build_sensor_context(instance, cursor=late.cursor, resources=resources))
    assert lag_seen(later)["total"] == 30 and len(later.asset_events) == 2
    produce(broker.bootstrap_servers, TOPIC_WORKOUT, [{"n": 30}])
    more = sensor(dg.build_sensor_context(instance, cursor=again.cursor, resources=resources))
    assert lag_seen(more)["total"] == 31 and len(more.asset_events) == 2


def test_the_lag_of_a_topic_pattern_counts_every_matching_topic(
    broker: EmbeddedBroker, resources: dict[str, Any]
) -> None:
    for topic in ("prices.eu", "prices.us", "prices.eu.archive"):
        resources["kafka"].create_topic(topic, partitions=1)
    produce(broker.bootstrap_servers, "prices.eu", [{"p": n} for n in range(3)])
    produce(broker.bootstrap_servers, "prices.us", [{"p": n} for n in range(2)])
    produce(broker.bootstrap_servers, "prices.eu.archive", [{"p": 0}])  # not a whole match
    waiting = kafka_waiting(
        resources["kafka"], resources["lake"], "prices", pattern=r"prices\.(eu|us)"
    )
    assert (waiting.count, waiting.parts) == (5, {"prices.eu-0": 3, "prices.us-0": 2})


def test_a_first_run_in_progress_is_not_launched_twice(env: dict[str, Any]) -> None:
    instance = dg.DagsterInstance.ephemeral()
    sensor = landing_sensor(LANDING_GYM_LOGINS, SETTINGS)
    key = asset_key(BRONZE, LANDING_GYM_LOGINS)
    assert requested(evaluate(sensor, instance, env)) == [key]  # the table does not exist yet
    queued = dg.DagsterRun(  # started, not queued: a queued run needs a code location
        job_name="__ASSET_JOB",
        run_id=str(uuid.uuid4()),
        status=dg.DagsterRunStatus.STARTING,
        asset_selection=frozenset({key}),
    )
    instance.add_run(queued)
    again = evaluate(sensor, instance, env)
    assert requested(again) == []
    assert skip_reason(again) == (
        f"A run of lakehouse-bronze-gym_logins is queued or in progress ({queued.run_id}); it "
        "creates the table."
    )
