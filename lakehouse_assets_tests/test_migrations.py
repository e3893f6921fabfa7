"""Tables written by earlier versions: refused with a clear error, upgraded by `lakehouse migrate`
keeping every row, the streams' markers and what downstream has already consumed."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from lakehouse_assets import cli, migrations
from lakehouse_assets.constants import (
    BRONZE,
    HEART_RATE,
    LANDING_REGISTERED_USERS,
    SILVER,
    TOPIC_BPM,
    TOPIC_WORKOUT,
    USERS,
    asset_key,
)
from lakehouse_assets.devtools.broker import EmbeddedBroker
from lakehouse_assets.migrations import OutdatedTableError
from lakehouse_assets.sample_data import Message, produce
from lakehouse_assets.silver.assets import silver_assets
from lakehouse_assets_tests.bronze.helpers import BPM_ASSET, HEART_RATE_ASSET
from resources import ENV_KAFKA_BOOTSTRAP_SERVERS, ENV_LAKEHOUSE_ROOT, LakeResource

# The layouts of the earlier version.
OLD_KAFKA_BRONZE = (
    "topic string, partition int, offset long, key string, value string, timestamp timestamp, "
    "ingested_at timestamp, date date"
)
OLD_QUARANTINE = (
    "source string, partition int, offset long, raw string, reason string, ingested_at timestamp"
)
OLD_LANDING = (
    "user_id string, device_id string, mac_address string, registration_timestamp string, "
    "source_file string, ingested_at timestamp"
)
OLD_MARKER = ("lakehouse-bronze-bpm/an-earlier-query", 5)
USERS_ASSET = next(a for a in silver_assets if asset_key(SILVER, USERS) in a.keys)
AT = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def old_reading(offset: int, value: str) -> tuple[Any, ...]:
    return (TOPIC_BPM, 0, offset, "7", value, AT, AT, date(2025, 3, 1))


def reading(time: int) -> str:
    return json.dumps({"device_id": 7, "time": time, "heartrate": 80.0})


def test_old_tables_are_refused_then_upgraded_keeping_rows_markers_and_consumers(
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake: LakeResource = resources["lake"]
    old_rows = [old_reading(0, reading(1_740_830_400)), old_reading(1, "{broken é")]
    lake.append(
        BRONZE, TOPIC_BPM, spark.createDataFrame(old_rows, OLD_KAFKA_BRONZE), ["date"],
        markers=dict([OLD_MARKER]),
    )  # fmt: skip
    quarantined = [(TOPIC_WORKOUT, 0, 3, "[1, 2]", "malformed json", AT)]
    lake.append(SILVER, "workout_quarantine", spark.createDataFrame(quarantined, OLD_QUARANTINE))
    registered = [("1", "7", "aa:bb", "1740830400", "a.csv", AT)]
    lake.append(BRONZE, LANDING_REGISTERED_USERS, spark.createDataFrame(registered, OLD_LANDING))

    # Silver reads the old bronze layout (its rejects go to a new quarantine table).
    dg.materialize([HEART_RATE_ASSET], resources=resources)
    assert (lake.row_count(SILVER, HEART_RATE), lake.row_count(SILVER, "bpm_quarantine")) == (1, 1)

    produce(broker.bootstrap_servers, [Message(TOPIC_BPM, "7", reading(1_740_830_401))])
    with pytest.raises(OutdatedTableError, match="`lakehouse migrate`"):
        dg.materialize([BPM_ASSET], resources=resources)
    assert lake.version(BRONZE, TOPIC_BPM) == 0  # nothing written

    monkeypatch.setenv(ENV_LAKEHOUSE_ROOT, lake.root)
    monkeypatch.setenv(ENV_KAFKA_BOOTSTRAP_SERVERS, broker.bootstrap_servers)
    with pytest.raises(SystemExit, match=r"Materialize silver\.users first"):
        cli.main(["migrate"])  # silver.users must read the registrations' old layout first
    assert "bronze.bpm: key and value as bytes" in capsys.readouterr().out
    dg.materialize([USERS_ASSET], resources=resources)
    assert lake.row_count(SILVER, USERS) == 1
    cli.main(["migrate"])
    printed = capsys.readouterr().out
    assert "bronze.registered_users: each row as a line" in printed
    assert "silver.workout_quarantine: raw as bytes" in printed
    assert migrations.pending(lake) == []
    lines = lake.read(spark, BRONZE, LANDING_REGISTERED_USERS).collect()
    assert [(r.line, r.source_file) for r in lines] == [(b"1,7,aa:bb,1740830400", "a.csv")]

    bronze = lake.read(spark, BRONZE, TOPIC_BPM).orderBy("offset").collect()
    assert [(r.key, r.value, r.timestampType, r.headers) for r in bronze] == [
        (b"7", reading(1_740_830_400).encode(), None, None),
        (b"7", "{broken é".encode(), None, None),
    ]
    assert lake.committed_version(BRONZE, TOPIC_BPM, OLD_MARKER[0]) == OLD_MARKER[1]
    workouts = lake.read(spark, SILVER, "workout_quarantine").collect()
    assert [(r.raw, r.raw_text, r.reason) for r in workouts] == [
        (b"[1, 2]", "[1, 2]", "malformed json")
    ]

    # The stream goes on; silver takes the new record only (the rewrite is no data change).
    dg.materialize([BPM_ASSET, HEART_RATE_ASSET], resources=resources)
    assert lake.row_count(BRONZE, TOPIC_BPM) == 3
    assert (lake.row_count(SILVER, HEART_RATE), lake.row_count(SILVER, "bpm_quarantine")) == (2, 1)

    cli.main(["migrate"])
    assert "is in this version's layout" in capsys.readouterr().out
