"""Tables written by earlier versions: refused with a clear error, upgraded by `lakehouse migrate`
keeping every row, the streams' markers and what downstream has already consumed."""

from __future__ import annotations

import base64
import json
import shutil
import tarfile
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from pyspark.sql import SparkSession

from lakehouse_assets import lake_migrations, migrations
from lakehouse_assets.constants import (
    BRONZE,
    CHECKPOINTS_DIR,
    LANDING_DIR,
    SILVER,
    asset_key,
    stream_name,
)
from lakehouse_assets.fitness.names import (
    GYM_SUMMARY,
    HEART_RATE,
    KAFKA_TOPICS,
    LANDING_COLUMNS,
    LANDING_REGISTERED_USERS,
    TOPIC_BPM,
    TOPIC_WORKOUT,
    USERS,
    WORKOUT_BPM_SUMMARY,
)
from lakehouse_assets.fitness.silver.assets import silver_assets
from lakehouse_assets.fitness.silver.parsed import PARSED_TABLES
from lakehouse_assets.fitness.upgrades import UPGRADES
from lakehouse_assets.migrations import OutdatedTableError
from lakehouse_assets_tests.bronze.helpers import BPM_ASSET, HEART_RATE_ASSET
from lakehouse_assets_tests.test_end_to_end import AS_OF, assert_reports_match, gold_rows
from lakehouse_tools import cli, sample_data
from lakehouse_tools.admin import keys_missing
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.demo import materialize_graph
from lakehouse_tools.sample_data import LandingFile, Message, produce
from resources import (
    ENV_AS_OF_DATE,
    ENV_KAFKA_BOOTSTRAP_SERVERS,
    ENV_LAKEHOUSE_ROOT,
    LakeResource,
    build_resources,
)

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
    assert migrations.pending(lake, UPGRADES) == []
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


# A lake made by the version before Delta Lake for Spark and Spark's Kafka source (2dae931:
# tables written by delta-rs, streams read by a Python Kafka source), by
# fixtures/make_lake_2dae931.py at EARLIER_ROOT, with every record its broker held.
EARLIER_LAKE = Path(__file__).parent / "fixtures" / "lake_2dae931.tar.gz"
EARLIER_ROOT = "/tmp/oldfix/lake"
# User 2 registered twice in the earlier lake's landing files (its registered_users CSV lines
# "2,1002,a2:4e:00:00:00:02,1704078026" and "...,1793595411"); its silver.users kept the latest.
USER_2_REGISTRATIONS = {1704078026, 1793595411}


def unpack_earlier_lake(root: Path) -> list[dict[str, Any]]:
    """The earlier version's lake at ``root`` (its file streams' logs, which name the files they
    read, re-pointed there: the lake moved), and the records its broker held."""
    with tarfile.open(EARLIER_LAKE) as archive:
        archive.extractall(root.parent / "earlier")  # the project's own archive
    shutil.move(root.parent / "earlier" / "lake", root)
    for log in root.glob("_checkpoints/*/sources/0/[0-9]*"):
        log.write_text(log.read_text().replace(f"file://{EARLIER_ROOT}/", f"file://{root}/"))
        (log.parent / f".{log.name}.crc").unlink()  # Hadoop would find the checksum wrong
    return json.loads((root.parent / "earlier" / "records.json").read_text())["records"]


def replay(bootstrap_servers: str, records: list[dict[str, Any]]) -> None:
    """Give the broker the earlier broker's records at the same partitions and offsets."""
    partitions = Counter(r["topic"] for r in records if r["offset"] == 0)
    for topic in partitions:
        partitions[topic] = 1 + max(r["partition"] for r in records if r["topic"] == topic)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    admin.create_topics([NewTopic(t, n, 1) for t, n in partitions.items()])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers)
    for r in sorted(records, key=lambda r: (r["topic"], r["partition"], r["offset"])):
        key, value = (
            base64.b64decode(r[f]) if r[f] is not None else None for f in ("key", "value")
        )
        sent = producer.send(r["topic"], key=key, value=value, partition=r["partition"],
                             timestamp_ms=r["timestamp"]).get(timeout=30)  # fmt: skip
        assert sent.offset == r["offset"]
    producer.close()


def earlier_sample(root: Path, records: list[dict[str, Any]]) -> sample_data.SampleData:
    """The earlier lake's data as the oracle takes it: its records in production order (by
    timestamp) and its landing files."""
    ordered = sorted(
        records, key=lambda r: (r["timestamp"], r["topic"], r["partition"], r["offset"])
    )
    messages = [
        Message(r["topic"], base64.b64decode(r["key"]) if r["key"] else None,
                base64.b64decode(r["value"]).decode())
        for r in ordered
    ]  # fmt: skip
    files = [
        LandingFile(path.parent.name, path.name, path.read_text())
        for path in sorted(root.glob(f"{LANDING_DIR}/*/*.csv"))
    ]
    return sample_data.SampleData(messages, files)


def registrations(lake: LakeResource, spark: SparkSession, user_id: int) -> set[int]:
    rows = lake.read(spark, SILVER, USERS).where(f"user_id = {user_id}").collect()
    return {int(row.registration_timestamp.timestamp()) for row in rows}


def test_a_lake_of_the_delta_rs_era_is_taken_over_and_every_record_lands_once(
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    lake_root: Path,
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lake: LakeResource = resources["lake"]
    records = unpack_earlier_lake(lake_root)
    earlier = earlier_sample(lake_root, records)
    replay(broker.bootstrap_servers, records)
    # A run killed after bronze.bpm's commit, before its checkpoint marked the batch done.
    done = lake_root / CHECKPOINTS_DIR / stream_name(BRONZE, TOPIC_BPM) / "commits"
    for name in ("0", ".0.crc"):
        (done / name).unlink()
    assert registrations(lake, spark, 2) == {max(USER_2_REGISTRATIONS)}  # the earlier rule

    monkeypatch.setenv(ENV_LAKEHOUSE_ROOT, lake.root)
    monkeypatch.setenv(ENV_KAFKA_BOOTSTRAP_SERVERS, broker.bootstrap_servers)
    monkeypatch.setenv(ENV_AS_OF_DATE, AS_OF.isoformat())
    cli.main(["migrate"])
    printed = capsys.readouterr().out
    assert "Delta Lake for Spark reads the 20 tables" in printed
    assert "bronze.bpm: reader 1, writer 4" in printed
    assert "bronze.bpm: its stream's batch 0 recorded for Delta's streaming sink" in printed
    assert "silver.users: rebuilt from bronze" in printed
    assert registrations(lake, spark, 2) == USER_2_REGISTRATIONS

    later = sample_data.generate(users=3, days=1, first_day=date(2026, 11, 3), seed=42)
    sample_data.write_landing(lake_root, later.files)
    sample_data.produce(broker.bootstrap_servers, later.messages)
    results = materialize_graph(build_resources())
    assert all(result.success for result in results)

    batches = [earlier, later]
    for topic in KAFKA_TOPICS:
        rows = lake.read(spark, BRONZE, topic).select("partition", "offset")
        produced = sum(r["topic"] == topic for r in records) + sum(
            m.topic == topic for m in later.messages
        )
        assert (rows.count(), rows.distinct().count()) == (produced, produced), topic
    for source in LANDING_COLUMNS:
        lines = lake.read(spark, BRONZE, source).groupBy("source_file").count().collect()
        expected = {f.name: len(f.text.splitlines()) for b in batches for f in b.files
                    if f.source == source}  # fmt: skip
        assert {Path(r.source_file).name: r["count"] for r in lines} == expected
    assert_reports_match(
        gold_rows(lake, WORKOUT_BPM_SUMMARY), gold_rows(lake, GYM_SUMMARY), lake, batches
    )

    # Nothing is left to carry over or rebuild.
    assert lake_migrations.carry_stream_markers(spark, lake) == {}
    assert keys_missing(lake, spark, next(s for s in PARSED_TABLES if s.table == USERS)) == 0


def test_a_silver_table_without_its_bronze_table_has_nothing_to_rebuild(tmp_path: Path) -> None:
    """A lake holding a table named as a fitness silver table, but not its bronze source: migrate
    has no bronze to compare it with or rebuild it from (it failed, reading the missing table)."""
    write_deltalake(str(tmp_path / "lake" / "silver" / USERS), pa.table({"id": [1]}))
    lake = LakeResource(root=str(tmp_path / "lake"))
    spec = next(s for s in PARSED_TABLES if s.table == USERS)
    assert keys_missing(lake, None, spec) == 0  # type: ignore[arg-type]  # no Spark asked
