"""The lakehouse running itself: stream sensors and the automation conditions, ticked the way the
daemon ticks them against a real Dagster instance, bring new data to gold without a manual
materialization."""

from __future__ import annotations

import functools
import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from lakehouse_assets.constants import GOLD, SILVER, asset_key
from lakehouse_assets.definitions import all_assets
from lakehouse_assets.fitness.names import (
    COMPLETED_WORKOUTS,
    HEART_RATE,
    TOPIC_BPM,
    TOPIC_WORKOUT,
    WORKOUT_BPM,
    WORKOUT_BPM_SUMMARY,
)
from lakehouse_assets.fitness.pipeline import fitness_sensors
from lakehouse_assets_tests import fitness_oracle as oracle
from lakehouse_tools import sample_data
from lakehouse_tools.broker import EmbeddedBroker
from resources import CalendarResource, sensor_settings
from resources.settings import ENV_PROFILE

ASSETS = {key: asset for asset in all_assets for key in asset.keys}
stream_sensors = fitness_sensors(sensor_settings())


def tick_stream_sensors(
    instance: dg.DagsterInstance, resources: dict[str, Any], raise_on_error: bool = True
) -> int:
    """Evaluate every stream sensor once, in the code location (whose asset graph its run
    follows), and launch what it requests as the daemon does (a run of the asset job with the
    request's selection and tags, which automation reads); returns the runs."""
    runs = 0
    definitions = dg.Definitions(assets=all_assets, sensors=stream_sensors, resources=resources)
    job = definitions.resolve_implicit_global_asset_job_def()
    for sensor in stream_sensors:
        context = dg.build_sensor_context(
            instance=instance, resources=resources, definitions=definitions
        )
        result = sensor(context)
        for request in result.run_requests if isinstance(result, dg.SensorResult) else []:
            job.execute_in_process(
                instance=instance, asset_selection=request.asset_selection, tags=request.tags,
                raise_on_error=raise_on_error,
            )  # fmt: skip
            runs += 1
    return runs


class AutomationDaemon:
    """The automation sensor's loop: evaluate with the previous cursor, run what is requested."""

    def __init__(
        self, instance: dg.DagsterInstance, resources: dict[str, Any], raise_on_error: bool = True
    ) -> None:
        self.instance, self.resources, self.raise_on_error = instance, resources, raise_on_error
        self.definitions = dg.Definitions(assets=all_assets, resources=resources)
        self.cursor: Any = None

    def tick(self) -> int:
        """One evaluation; returns how many asset partitions it requested (and ran)."""
        evaluation = dg.evaluate_automation_conditions(
            self.definitions, self.instance, cursor=self.cursor
        )
        self.cursor = evaluation.cursor
        self.requested = {key for key in ASSETS if evaluation.get_num_requested(key)}
        unpartitioned, days = [], set()
        for key, asset in ASSETS.items():
            if evaluation.get_num_requested(key) == 0:
                continue
            if asset.partitions_def is None:
                unpartitioned.append(key)
            else:
                days.update(evaluation.get_requested_partitions(key))
        run = functools.partial(
            dg.materialize,
            instance=self.instance,
            resources=self.resources,
            raise_on_error=self.raise_on_error,
        )
        if unpartitioned:
            run([ASSETS[key] for key in unpartitioned], selection=unpartitioned)
        if days:
            gold = [asset for asset in all_assets if asset.partitions_def is not None]
            run(gold, tags={"dagster/asset_partition_range_start": min(days),
                            "dagster/asset_partition_range_end": max(days)})  # fmt: skip
        return evaluation.total_requested

    def tick_until_quiet(self) -> int:
        """Tick until nothing is requested; returns the number of ticks that requested."""
        busy = 0
        while self.tick():
            busy += 1
            assert busy < 10, "automation keeps requesting"
        return busy


def assert_profiled(instance: dg.DagsterInstance, key: dg.AssetKey, column: str) -> None:
    """The latest materialization of ``key`` carries a profile with ``column`` among its rows."""
    event = instance.get_latest_materialization_event(key)
    assert event is not None and event.asset_materialization is not None
    metadata = event.asset_materialization.metadata
    profile = metadata["profile"]
    assert isinstance(profile, dg.TableMetadataValue)
    assert column in [record.data["column"] for record in profile.records]
    assert {"profile_summary", "profile_histograms"} <= set(metadata)


def produce_implausible_reading(broker: EmbeddedBroker, day: date, hour: int) -> None:
    """A valid reading of 300 bpm from user 1's device: silver keeps it, its check fails."""
    device = sample_data.DEVICE_ID_OFFSET + 1
    at = int(datetime(day.year, day.month, day.day, hour, tzinfo=UTC).timestamp())
    reading = {"device_id": device, "time": at, "heartrate": 300}
    message = sample_data.Message(TOPIC_BPM, str(device), json.dumps(reading))
    sample_data.produce(broker.bootstrap_servers, [message])


def assert_blocked_by_an_implausible_reading(
    instance: dg.DagsterInstance,
    daemon: AutomationDaemon,
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    today: date,
) -> None:
    """silver/heart_rate takes a reading of 300 bpm and its blocking check fails: workout_bpm
    (and so gold) does not follow, neither in the stream's run, nor in a later stream's run
    whose way passes it, nor in automation's ticks."""
    heart_rate, workout_bpm = asset_key(SILVER, HEART_RATE), asset_key(SILVER, WORKOUT_BPM)
    check = dg.AssetCheckKey(heart_rate, "heartrate_plausible")
    before = instance.get_latest_materialization_event(workout_bpm)
    produce_implausible_reading(broker, today, hour=12)
    # One run for bronze, heart_rate and, downstream of it, workout_bpm and gold...
    assert tick_stream_sensors(instance, resources, raise_on_error=False) == 1
    assert daemon.tick() == 0  # ...which left automation nothing to do
    latest = instance.event_log_storage.get_latest_asset_check_execution_by_key([check])[check]
    assert latest.status.value == "FAILED"
    updated = instance.get_latest_materialization_event(heart_rate)
    assert updated is not None and updated.run_id == latest.run_id  # the table did change...
    after = instance.get_latest_materialization_event(workout_bpm)
    assert before is not None and after is not None and after.run_id == before.run_id  # ...alone
    # A new workout would bring workout_bpm up to date, but heart_rate's failed check holds it.
    start = int(datetime(today.year, today.month, today.day, 14, tzinfo=UTC).timestamp())
    actions = [("start", start), ("stop", start + 600)]
    workout = [{"user_id": 1, "workout_id": 99, "session_id": 1, "action": action,
                "timestamp": at} for action, at in actions]  # fmt: skip
    messages = [sample_data.Message(TOPIC_WORKOUT, "1", json.dumps(value)) for value in workout]
    sample_data.produce(broker.bootstrap_servers, messages)
    assert tick_stream_sensors(instance, resources) == 1
    daemon.tick_until_quiet()
    completed = instance.get_latest_materialization_event(asset_key(SILVER, COMPLETED_WORKOUTS))
    assert completed is not None and completed.timestamp > after.timestamp  # it did change
    held = instance.get_latest_materialization_event(workout_bpm)
    assert held is not None and held.run_id == before.run_id  # eager alone would run it


def test_new_data_reaches_gold_by_itself(
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    lake_root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    today = datetime.now(UTC).date()
    resources["calendar"] = CalendarResource(as_of_date=today.isoformat())
    sample = sample_data.generate(users=3, days=2, first_day=today - timedelta(days=2), seed=5)
    with dg.instance_for_test() as instance:
        daemon = AutomationDaemon(instance, resources)
        assert daemon.tick() == 0  # the daemon was already running before any data
        assert tick_stream_sensors(instance, resources) == 5  # first runs create the tables
        assert tick_stream_sensors(instance, resources) == 0  # no data: no run
        daemon.tick_until_quiet()  # silver and gold of the empty tables
        monkeypatch.setenv(ENV_PROFILE, "materialization")  # for the data's runs (Spark jobs)
        sample_data.write_landing(lake_root, sample.files)
        sample_data.produce(broker.bootstrap_servers, sample.messages)
        # 3 topics, 2 landing folders: each run takes its records from bronze to gold...
        assert tick_stream_sensors(instance, resources) == 5
        assert daemon.tick() == 0  # ...and leaves automation nothing to run again
        assert tick_stream_sensors(instance, resources) == 0
        assert_profiled(instance, asset_key(GOLD, WORKOUT_BPM_SUMMARY), "num_recordings")
        monkeypatch.setenv(ENV_PROFILE, "off")
        assert_blocked_by_an_implausible_reading(instance, daemon, broker, resources, today)

    expected = oracle.workout_bpm_summary([sample], today)
    rows = resources["lake"].read(resources["spark"].get_session(), GOLD, WORKOUT_BPM_SUMMARY)
    days = {row.date for row in rows.select("date").distinct().collect()}
    assert len(expected) > 0 and rows.count() == len(expected)
    assert days == {row["date"] for row in expected} and all(isinstance(d, date) for d in days)
