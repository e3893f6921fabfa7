"""Freshness of bronze against its source: the oldest waiting Kafka record or landing file."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from kafka import KafkaProducer

from lakehouse_assets.bronze.assets import kafka_bronze_asset
from lakehouse_assets.checks.freshness import (
    FRESHNESS,
    freshness_evaluation,
    kafka_freshness_check,
    kafka_waiting,
    landing_waiting,
)
from lakehouse_assets.constants import BRONZE, LANDING_DIR, asset_key
from lakehouse_assets.fitness.names import LANDING_GYM_LOGINS
from lakehouse_assets.sensors.streams import kafka_lag_sensor
from lakehouse_tools.broker import EmbeddedBroker
from resources import SensorSettings
from resources.settings import ENV_FRESHNESS_S, freshness_limit_s

TOPIC = "heartbeats"
KEY = asset_key(BRONZE, TOPIC)


def produce_at(broker: EmbeddedBroker, partition: int, timestamps_ms: list[int]) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for at in timestamps_ms:
        producer.send(TOPIC, b'{"n": 1}', partition=partition, timestamp_ms=at)
    producer.flush()
    producer.close()


def test_a_kafka_table_is_as_fresh_as_its_oldest_waiting_record(
    broker: EmbeddedBroker, resources: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    kafka, lake = resources["kafka"], resources["lake"]
    kafka.create_topic(TOPIC, partitions=2)
    now_ms = int(time.time() * 1000)
    old, recent = now_ms - 2_000_000, now_ms - 100_000  # 2,000 s and 100 s ago
    produce_at(broker, 0, [old, old + 1, old + 2])
    produce_at(broker, 1, [recent, recent + 1])

    waiting = kafka_waiting(kafka, lake, TOPIC)
    assert waiting.count == 5 and waiting.parts == {f"{TOPIC}-0": 3, f"{TOPIC}-1": 2}
    assert waiting.since == old / 1000
    stale = freshness_evaluation(KEY, waiting, now=now_ms / 1000)
    assert (stale.check_name, stale.passed, stale.severity) == (
        FRESHNESS,
        False,
        dg.AssetCheckSeverity.WARN,
    )
    assert stale.metadata["oldest_waiting_s"].value == 2000.0  # the default limit is 900 s
    monkeypatch.setenv(ENV_FRESHNESS_S, "2500")
    assert freshness_evaluation(KEY, waiting, now=now_ms / 1000).passed

    # The lag sensor reports it at every evaluation.
    monkeypatch.delenv(ENV_FRESHNESS_S)
    sensor = kafka_lag_sensor(TOPIC, SensorSettings(30, 0, 300))
    bronze, check = kafka_bronze_asset(TOPIC, [TOPIC]), kafka_freshness_check(TOPIC, [TOPIC])
    instance = dg.DagsterInstance.ephemeral()
    dg.materialize([bronze], resources=resources, instance=instance)  # the first run reads all
    produce_at(broker, 1, [old])  # an old record arriving late waits from its own time
    result = sensor(dg.build_sensor_context(instance=instance, resources=resources))
    [reported] = [e for e in result.asset_events if isinstance(e, dg.AssetCheckEvaluation)]
    assert (reported.asset_key, reported.passed) == (KEY, False)
    assert reported.metadata["waiting"].value == 1

    # The check run on its own, once bronze holds everything.
    ran = dg.materialize([bronze, check], resources=resources)
    [evaluation] = ran.get_asset_check_evaluations()
    assert (evaluation.check_name, evaluation.passed) == (FRESHNESS, True)
    assert evaluation.metadata["waiting"].value == 0


def test_a_landing_table_is_as_fresh_as_its_oldest_unread_file(lake_root: Path) -> None:
    from resources import LakeResource

    lake = LakeResource(root=str(lake_root))
    assert landing_waiting(lake, LANDING_GYM_LOGINS).count == 0
    folder = lake_root / LANDING_DIR / LANDING_GYM_LOGINS
    folder.mkdir(parents=True)
    now = time.time()
    for name, age_s in [("a.csv", 1_000), ("b.csv", 10), (".hidden.csv", 5_000)]:
        (folder / name).write_text("mac,login,logout\n")
        os.utime(folder / name, (now - age_s, now - age_s))
    waiting = landing_waiting(lake, LANDING_GYM_LOGINS)
    assert (waiting.count, waiting.since) == (2, pytest.approx(now - 1_000))
    assert not freshness_evaluation(asset_key(BRONZE, LANDING_GYM_LOGINS), waiting, now).passed


@pytest.mark.parametrize("raw", ["soon", "0", "-5"])
def test_a_bad_freshness_limit_is_refused_with_its_name(raw: str) -> None:
    with pytest.raises(ValueError, match=ENV_FRESHNESS_S):
        freshness_limit_s({ENV_FRESHNESS_S: raw})
