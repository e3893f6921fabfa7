"""Declared expectations at run time, on the embedded broker: warn keeps and counts, drop sends
to the quarantine with the reason ``expectation <name>``, fail records the rows and the counts,
then fails the step. Expected rows and counts are written by hand from the records produced and
the rules (docs/data_quality.md, "Your own expectations")."""

from __future__ import annotations

import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE, SILVER, asset_key
from lakehouse_assets.fitness.names import LANDING_REGISTERED_USERS, USERS
from lakehouse_assets.fitness.pipeline import fitness_assets
from lakehouse_assets.sources.assets import source_assets
from lakehouse_assets.sources.declaration.files import load_declaration
from lakehouse_assets_tests import fitness_oracle as oracle
from lakehouse_assets_tests.sources.test_debezium import TOPIC, change, table
from lakehouse_assets_tests.sources.test_declared_fields import BADGES, drop_file, quarantined
from lakehouse_assets_tests.sources.test_json_sources import declare, record, rows
from lakehouse_tools import sample_data
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.sample_data import Message, produce
from resources import LakeResource

REPO_ROOT = Path(__file__).resolve().parents[2]

METERS = """\
topic: meters
empty_strings: keep
fields:
  - {name: meter_id, type: integer}
  - {name: quarter, type: string}
  - {name: kwh, type: number, required: false}
  - {name: site, type: string, required: false}
expectations:
  - {name: kwh_not_negative, check: "kwh >= 0", on_violation: drop}
  - {name: known_site, check: "site <> ''", on_violation: warn}
  - {name: one_per_quarter, unique: [meter_id, quarter], on_violation: warn}
  - {name: enough_rows, row_count: {min: 1}}
"""


def outcomes(result: dg.ExecuteInProcessResult) -> dict[str, tuple[bool, str, int | None]]:
    """Each expectation's (passed, severity, its count) in a run."""
    counted = ("dropped_records", "violating_records", "violating_rows", "rows")
    found = {}
    for evaluation in result.get_asset_check_evaluations():
        metadata = evaluation.metadata
        count = next((metadata[name].value for name in counted if name in metadata), None)
        found[evaluation.check_name] = (evaluation.passed, evaluation.severity.value, count)
    return found


def meter(key: str, meter_id: Any, quarter: str, kwh: Any, site: Any) -> Message:
    value = {"meter_id": meter_id, "quarter": quarter, "kwh": kwh, "site": site}
    return record(key, value, "meters")


def test_drop_and_warn_on_a_run_its_records_and_again_on_the_table_it_made(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    source = declare(tmp_path, resources, "meters", METERS)
    lake: LakeResource = resources["lake"]
    produce(broker.bootstrap_servers, [
        meter("a", 1, "q1", 5, "north"),
        meter("b", 1, "q2", -1, "north"),  # dropped: kwh < 0
        meter("c", 2, "q1", None, ""),  # kept: a null kwh meets the check; '' breaks known_site
        meter("d", 3, "q1", 2, None),  # kept: a null site meets known_site
        meter("e", "x", "q1", 1, "a"),  # its type's reason, not an expectation's
        meter("f", 2, "q1", 1, "south"),  # kept: the second row of (2, q1)
    ])  # fmt: skip
    result = dg.materialize(source_assets(source), resources=resources)
    assert result.success
    assert [r["_kafka_offset"] for r in rows(spark, lake, "meters", "_kafka_offset")] == [
        0,
        2,
        3,
        5,
    ]
    assert quarantined(spark, lake, "meters") == [
        (1, "expectation kwh_not_negative"), (4, "wrong type meter_id"),
    ]  # fmt: skip
    got = outcomes(result)
    assert {name: got[name] for name in ("kwh_not_negative", "known_site", "one_per_quarter")} == {
        "kwh_not_negative": (False, "WARN", 1),
        "known_site": (False, "WARN", 1),
        "one_per_quarter": (False, "WARN", 1),
    }
    assert got["enough_rows"] == (True, "WARN", 4)
    assert got["reconciled_with_bronze"][0]  # a dropped record is in the quarantine

    # A second run, on the table the first made: (3, q1) again breaks uniqueness across runs;
    # its own records break nothing else.
    produce(broker.bootstrap_servers, [meter("g", 3, "q1", 0, "east")])
    got = outcomes(dg.materialize(source_assets(source), resources=resources))
    assert got["kwh_not_negative"] == (True, "WARN", 0)
    assert got["known_site"] == (True, "WARN", 0)
    assert got["one_per_quarter"] == (False, "WARN", 2)  # (2, q1) and (3, q1) once each

    # Nothing new: no record of the run breaks a check; the table's facts stand.
    got = outcomes(dg.materialize(source_assets(source), resources=resources))
    assert got["kwh_not_negative"] == (True, "WARN", 0)
    assert got["one_per_quarter"] == (False, "WARN", 2)

    # A batch whose every record is dropped: the table keeps its rows, the quarantine gains them.
    produce(broker.bootstrap_servers, [meter("h", 4, "q1", -2, "x"), meter("i", 5, "q2", -3, "")])
    result = dg.materialize(source_assets(source), resources=resources)
    assert outcomes(result)["kwh_not_negative"] == (False, "WARN", 2)
    assert len(rows(spark, lake, "meters", "_kafka_offset")) == 5
    assert quarantined(spark, lake, "meters")[-2:] == [
        (7, "expectation kwh_not_negative"), (8, "expectation kwh_not_negative"),
    ]  # fmt: skip


READINGS = """\
topic: readings
expectations:
  - {name: positive, check: "kwh > 0", on_violation: fail}
  - name: meter_exists
    references: {table: silver.meters, columns: [meter_id]}
"""


def test_fail_records_the_rows_and_counts_then_fails_and_a_reference_heals_later(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    meters = declare(tmp_path, resources, "meters", "topic: meters\n")
    readings = declare(tmp_path, resources, "readings", READINGS)
    lake: LakeResource = resources["lake"]
    produce(broker.bootstrap_servers, [record("m1", {"meter_id": 1}, "meters")])
    assert dg.materialize(source_assets(meters), resources=resources).success
    produce(broker.bootstrap_servers, [
        record(None, {"meter_id": 1, "kwh": 3}, "readings"),
        record(None, {"meter_id": 2, "kwh": -1}, "readings"),  # breaks positive; meter 2 unknown
    ])  # fmt: skip
    result = dg.materialize(source_assets(readings), resources=resources, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "positive (1 violating records)" in str(failure.event_specific_data)
    assert [(r["meter_id"], r["kwh"]) for r in rows(spark, lake, "readings", "_kafka_offset")] == [
        (1, 3), (2, -1),  # fail keeps the batch: data already accepted is never lost
    ]  # fmt: skip
    got = outcomes(result)
    assert got["positive"] == (False, "ERROR", 1)
    assert got["meter_exists"] == (False, "WARN", 1)

    # The meters table gains meter 2; the next run of readings passes both.
    produce(broker.bootstrap_servers, [record("m2", {"meter_id": 2}, "meters")])
    assert dg.materialize(source_assets(meters), resources=resources).success
    produce(broker.bootstrap_servers, [record(None, {"meter_id": 2, "kwh": 4}, "readings")])
    result = dg.materialize(source_assets(readings), resources=resources)
    assert result.success
    got = outcomes(result)
    assert got["positive"] == (True, "ERROR", 0)
    assert got["meter_exists"] == (True, "WARN", 0)
    assert len(rows(spark, lake, "readings", "_kafka_offset")) == 3


def test_a_check_naming_a_column_the_records_lack_stops_the_step_until_fixed(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    wrong = 'topic: gauges\nexpectations:\n  - {name: up, check: "levle > 0"}\n'
    source = declare(tmp_path, resources, "gauges", wrong)
    lake: LakeResource = resources["lake"]
    produce(broker.bootstrap_servers, [record(None, {"level": 1}, "gauges")])
    result = dg.materialize(source_assets(source), resources=resources, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "'up' of the source 'gauges' names levle" in str(failure.event_specific_data)
    assert not lake.exists("silver", "gauges")  # nothing written: the record waits in bronze

    path = tmp_path / "gauges.yaml"
    path.write_text(wrong.replace("levle", "level"))
    fixed = load_declaration(path)
    assert dg.materialize(source_assets(fixed), resources=resources).success
    assert [r["level"] for r in rows(spark, lake, "gauges", "_kafka_offset")] == [1]


def test_a_cdc_source_drops_changes_but_never_a_delete(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    resources["kafka"].create_topic(TOPIC, partitions=1)
    path = tmp_path / "customers.yaml"
    path.write_text(
        f"topic: {TOPIC}\nformat: debezium-json\nmode: cdc-scd1\nkeys: [id]\n"
        "order_by: source.lsn\nexpectations:\n"
        '  - {name: named, check: "name IS NOT NULL", on_violation: drop}\n'
    )
    source = load_declaration(path)
    lake: LakeResource = resources["lake"]
    produce(broker.bootstrap_servers, [
        change("r", 1, 100, "Ann"),
        change("c", 2, 110, "Bob"),
        change("u", 2, 120),  # no name: dropped, Bob stays
        change("d", 1, 130),  # its before image has no name: a delete is applied all the same
    ])  # fmt: skip
    result = dg.materialize(source_assets(source), resources=resources)
    assert outcomes(result)["named"] == (False, "WARN", 1)
    assert table(spark, lake, "customers", "id", "name") == [(2, "Bob")]
    assert table(spark, lake, "customers_quarantine", "offset", "reason") == [
        (2, "expectation named")
    ]

    # Only deletes, one of a key never seen: applied, none dropped.
    produce(broker.bootstrap_servers, [change("d", 7, 140), change("d", 2, 150)])
    result = dg.materialize(source_assets(source), resources=resources)
    assert outcomes(result)["named"] == (True, "WARN", 0)
    assert table(spark, lake, "customers", "id", "name") == []


def documented_example() -> str:
    """The declaration docs/data_quality.md shows under "Your own expectations"."""
    text = (REPO_ROOT / "docs" / "data_quality.md").read_text()
    found = re.search(r"```yaml\n# sources/pulses\.yaml[^\n]*\n(.*?)```", text, re.S)
    assert found is not None
    return found[1]


def test_the_documented_example_on_the_sample(
    tmp_path: Path,
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    spark: SparkSession,
    lake_root: Path,
) -> None:
    path = tmp_path / "pulses.yaml"
    path.write_text(documented_example())
    source = load_declaration(path)
    batch = sample_data.generate(users=4, days=1)
    sample_data.write_landing(lake_root, batch.files)
    sample_data.produce(broker.bootstrap_servers, batch.messages)
    users = [a for a in fitness_assets if asset_key(SILVER, USERS) in a.keys]
    users += [a for a in fitness_assets if asset_key(BRONZE, LANDING_REGISTERED_USERS) in a.keys]
    assert dg.materialize(users, resources=resources).success  # the table referenced, first
    result = dg.materialize(source_assets(source), resources=resources)
    assert result.success

    # Expected from the records produced, by the fitness pipeline's rules for bpm (the same
    # fields and types as the declaration's) and the users the oracle registers.
    values = [m.value for m in batch.messages if m.topic == "bpm"]
    accepted = [json.loads(v, parse_float=Decimal) for v in values
                if v is not None and oracle.kafka_reason("bpm", v) is None]  # fmt: skip
    dropped = [r for r in accepted if r.get("heartrate") is not None and r["heartrate"] <= 0]
    kept = [r for r in accepted if r not in dropped]
    repeated = Counter((r["device_id"], r["time"]) for r in kept)
    devices = {user["device_id"] for user in oracle.users([batch])}
    assert dropped and any(r.get("heartrate") is None for r in kept)  # the sample has both
    got = outcomes(result)
    assert got["heartrate_positive"] == (False, "WARN", len(dropped))
    assert got["heartrate_present"] == (
        False, "WARN", sum(r.get("heartrate") is None for r in kept),
    )  # fmt: skip
    assert got["one_reading_per_time"][2] == sum(n - 1 for n in repeated.values())
    assert got["known_device"][2] == sum(r["device_id"] not in devices for r in kept)
    assert got["some_readings"] == (True, "ERROR", len(kept))
    lake: LakeResource = resources["lake"]
    reasons = Counter(r["reason"] for r in lake.read(spark, SILVER, "pulses_quarantine").collect())
    assert reasons["expectation heartrate_positive"] == len(dropped)

    # "Replaying the quarantine": heartrate_positive warns instead, and its reason is replayed.
    drop = 'check: "heartrate > 0", on_violation: drop'
    assert drop in documented_example()
    path.write_text(documented_example().replace(drop, drop.replace("drop", "warn")))
    reason = {"reason": "expectation heartrate_positive"}
    run_config = {"ops": {"silver_pulses": {"config": {"replay": reason}}}}
    result = dg.materialize(
        source_assets(load_declaration(path)), resources=resources, run_config=run_config
    )
    quarantine = result.asset_materializations_for_node("silver_pulses")[1].metadata
    assert quarantine["records_replayed"].value == len(dropped)
    assert outcomes(result)["heartrate_positive"] == (False, "WARN", len(dropped))
    assert lake.row_count(SILVER, "pulses") == len(accepted)
    # Each record the replay read has a row in the replay log, and passed (no reason).
    log = lake.read(spark, SILVER, "pulses_quarantine_replays").collect()
    assert len(log) == len(dropped)
    assert {row["reason"] for row in log} == {None}
    assert quarantine["open_records"].value == sum(reasons.values()) - len(dropped)


def test_a_csv_source_drops_a_landing_row_before_its_key_is_kept(
    tmp_path: Path, resources: dict[str, Any], spark: SparkSession
) -> None:
    path = tmp_path / "badges.yaml"
    path.write_text(
        BADGES + "expectations:\n"
        "  - {name: known_door, check: \"door IN ('north', 'south')\", on_violation: drop}\n"
        "  - {name: some_badges, row_count: {max: 1}, on_violation: fail}\n"
    )
    source = load_declaration(path)
    lake: LakeResource = resources["lake"]
    drop_file(lake, "badges", "scans-1.csv", "badge_id,door,at\n1,north,100\n1,attic,200\n2,,5\n")
    result = dg.materialize(source_assets(source), resources=resources)
    assert result.success
    # (1, attic, 200) would have been the key's row; dropped, (1, north, 100) is kept.
    kept = rows(spark, lake, "badges", "badge_id")
    assert [(r["badge_id"], r["door"], r["at"]) for r in kept] == [(1, "north", 100)]
    rejected = rows(spark, lake, "badges_quarantine", "raw_text")
    assert [(r["raw_text"], r["reason"]) for r in rejected] == [
        ("1,attic,200", "expectation known_door"), ("2,,5", "missing door"),
    ]  # fmt: skip
    got = outcomes(result)
    assert got["known_door"] == (False, "WARN", 1)
    assert got["some_badges"] == (True, "ERROR", 1)

    # A second key makes two rows: above the bound, the step fails after writing.
    drop_file(lake, "badges", "scans-2.csv", "3,south,300\n")
    result = dg.materialize(source_assets(source), resources=resources, raise_on_error=False)
    assert not result.success
    assert outcomes(result)["some_badges"] == (False, "ERROR", 2)
    assert len(rows(spark, lake, "badges", "badge_id")) == 2


def test_a_table_wide_expectation_naming_a_missing_column_fails_its_check_not_the_step(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    text = (
        "topic: gauges\nexpectations:\n  - {name: one_each, unique: [nope], on_violation: warn}\n"
    )
    source = declare(tmp_path, resources, "gauges", text)
    produce(broker.bootstrap_servers, [record(None, {"level": 1}, "gauges")])
    result = dg.materialize(source_assets(source), resources=resources)
    assert result.success  # the run's records are written; the declaration is to fix
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == "one_each"]
    assert not evaluation.passed
    assert "names nope, which silver.gauges does not have" in evaluation.metadata["error"].value
    assert len(rows(spark, resources["lake"], "gauges", "_kafka_offset")) == 1
