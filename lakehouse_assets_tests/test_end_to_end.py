"""Generated events through the whole graph on the embedded broker; gold equals what the
plain-Python oracle computes from the same events, after a second batch, after a full refresh of
silver, after a re-run that finds nothing new, and rebuilt one day per run (as a backfill of
single partitions does) equals gold computed over ranges of days.
(The Dagster CLI runs the whole graph in test_standalone.)"""

from __future__ import annotations

import shutil
from collections import Counter
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.bronze.columns import KAFKA_RECORD, LANDING_LINE
from lakehouse_assets.constants import BRONZE, GOLD, QUARANTINE_SUFFIX, SILVER, consumer_app_id
from lakehouse_assets.definitions import all_assets, defs
from lakehouse_assets.fitness.gold import columns as gold_columns
from lakehouse_assets.fitness.names import (
    COMPLETED_WORKOUTS,
    GYM_SUMMARY,
    HEART_RATE,
    KAFKA_TOPICS,
    LANDING_COLUMNS,
    USER_BINS,
    USERS,
    WORKOUT_BPM,
)
from lakehouse_assets.fitness.names import WORKOUT_BPM_SUMMARY as BPM_SUMMARY
from lakehouse_assets.fitness.silver import columns as silver_columns
from lakehouse_assets.fitness.silver.parsed import PARSED_TABLES
from lakehouse_assets_tests import fitness_oracle as oracle
from lakehouse_tools import sample_data
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.demo import materialize_graph, silver_days
from resources import CalendarResource, LakeResource

AS_OF = date(2026, 11, 21)
# What each table's columns hold, by layer and table.
DESCRIPTIONS = {
    BRONZE: {topic: KAFKA_RECORD for topic in KAFKA_TOPICS}
    | {source: LANDING_LINE for source in LANDING_COLUMNS},
    SILVER: silver_columns.DESCRIPTIONS,
    GOLD: gold_columns.DESCRIPTIONS,
}
BATCHES = (
    {"users": 6, "days": 2, "first_day": date(2026, 11, 1), "seed": 11},
    {"users": 6, "days": 2, "first_day": date(2026, 11, 3), "seed": 12},
)
# Spark rounds the double minutes; the oracle rounds exact microseconds: a cent apart at most.
CENT = 0.0051


def gold(spark: SparkSession, resources: dict[str, Any], table: str) -> list[dict[str, Any]]:
    return [row.asDict() for row in resources["lake"].read(spark, GOLD, table).collect()]


def gold_rows(lake: LakeResource, table: str) -> list[dict[str, Any]]:
    """A gold table's rows, read with delta-rs (no Spark session needed), on any lake root."""
    return lake.table(GOLD, table).to_pyarrow_table().to_pylist()


def ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: sorted((k, str(v)) for k, v in row.items()))


def assert_reports_match(
    bpm_summary: list[dict[str, Any]],
    gym_summary: list[dict[str, Any]],
    lake: LakeResource,
    batches: list[sample_data.SampleData],
) -> None:
    """Both gold reports' rows and the quarantine counts equal the oracle's for ``batches``."""
    expected = ordered(oracle.workout_bpm_summary(batches, AS_OF))
    actual = ordered(bpm_summary)
    assert len(actual) == len(expected) > 0
    for got, want in zip(actual, expected, strict=True):
        assert got == {**want, "avg_bpm": pytest.approx(want["avg_bpm"], rel=1e-9)}

    expected = ordered(oracle.gym_summary(batches))
    actual = ordered(gym_summary)
    assert len(actual) == len(expected) > 0
    for got, want in zip(actual, expected, strict=True):
        for minutes in ("minutes_in_gym", "minutes_exercising"):
            want = {**want, minutes: pytest.approx(want[minutes], abs=CENT)}
        assert got == want

    quarantined = {
        spec.source: lake.row_count(SILVER, spec.source + QUARANTINE_SUFFIX)
        for spec in PARSED_TABLES
    }
    assert quarantined == oracle.quarantine_counts(batches)


def assert_gold_matches(
    spark: SparkSession, resources: dict[str, Any], batches: list[sample_data.SampleData]
) -> None:
    bpm_summary, gym_summary = (gold(spark, resources, t) for t in (BPM_SUMMARY, GYM_SUMMARY))
    assert_reports_match(bpm_summary, gym_summary, resources["lake"], batches)


def test_generated_events_reach_gold_exactly_as_computed_by_hand(
    broker: EmbeddedBroker, resources: dict[str, Any], lake_root: Path, spark: SparkSession
) -> None:
    resources["calendar"] = CalendarResource(as_of_date=AS_OF.isoformat())
    produced: list[sample_data.SampleData] = []
    for arguments in BATCHES:
        batch = sample_data.generate(**arguments)
        sample_data.write_landing(lake_root, batch.files)
        sample_data.produce(broker.bootstrap_servers, batch.messages)
        produced.append(batch)
        results = materialize_graph(resources)
        assert all(result.success for result in results)
        assert_gold_matches(spark, resources, produced)
        assert_every_column_described(results)
        assert_rows_per_gold_day(results, produced)

    # Full refresh: each silver table's rows replaced from all of its upstream in one commit (no
    # reader sees a part), which records the versions of the upstream tables it read: for
    # workout_bpm, three (every upstream table is rebuilt first: their versions now).
    lake = resources["lake"]
    silver_tables = [key.path[1] for key in defs.resolve_all_asset_keys() if key.path[0] == SILVER]
    silver_versions = {table: lake.version(SILVER, table) for table in silver_tables}
    rebuild = {"ops": {op: {"config": {"full_refresh": True}} for op in silver_ops()}}
    selection = dg.AssetSelection.groups(SILVER)
    assert dg.materialize(
        all_assets, selection=selection, resources=resources, run_config=rebuild
    ).success
    for table, before in silver_versions.items():
        assert rebuild_commits(lake, table, before) == ["Overwrite"], table
    read = (COMPLETED_WORKOUTS, HEART_RATE, USERS)
    apps = [consumer_app_id(WORKOUT_BPM, (SILVER, upstream)) for upstream in read]
    held = lake.committed_versions(SILVER, WORKOUT_BPM, apps)
    assert list(held.values()) == [lake.version(SILVER, upstream) for upstream in read]
    rebuilt = {t: lake.version(SILVER, t) for t in silver_tables}
    assert all(result.success for result in materialize_graph(resources))  # nothing new
    assert_gold_matches(spark, resources, produced)
    assert {t: resources["lake"].version(SILVER, t) for t in silver_tables} == rebuilt

    # Gold from nothing, one day per run: the same rows as the runs over ranges of days above.
    shutil.rmtree(lake_root / GOLD)
    first, last = silver_days(resources)
    assert (first, last) == (BATCHES[0]["first_day"], date(2026, 11, 4))  # both batches' days
    gold_group = dg.AssetSelection.groups(GOLD)
    for offset in range((last - first).days + 1):
        day = (first + timedelta(days=offset)).isoformat()
        assert dg.materialize(
            all_assets, selection=gold_group, resources=resources, partition_key=day
        ).success
    assert_gold_matches(spark, resources, produced)


def rebuild_commits(lake: LakeResource, table: str, before: int) -> list[str]:
    """The kinds of the silver table's commits after version ``before``, oldest first: a write's
    mode, or "marker" for an append of no rows (one that only records a marker)."""
    commits = [c for c in reversed(lake.history(SILVER, table)) if c["version"] > before]
    kinds = []
    for commit in commits:
        assert commit["operation"] == "WRITE", commit
        rows = int(commit["operationMetrics"]["numOutputRows"])
        mode = commit["operationParameters"]["mode"]
        kinds.append("marker" if mode == "Append" and rows == 0 else mode)
    return kinds


def materializations(results: list[dg.ExecuteInProcessResult]) -> list[dg.AssetMaterialization]:
    return [
        event.materialization
        for result in results
        for event in result.get_asset_materialization_events()
        if event.materialization
    ]


def assert_every_column_described(results: list[dg.ExecuteInProcessResult]) -> None:
    """Each table's column schema names exactly the columns its layer describes, each with its
    description and a type, and the tables computed from others carry their column lineage."""
    seen = set()
    for materialization in materializations(results):
        layer, table = materialization.asset_key.path
        schema = materialization.metadata["dagster/column_schema"].value
        assert isinstance(schema, dg.TableSchema)
        described = DESCRIPTIONS[layer][table]
        assert {column.name for column in schema.columns} == set(described), table
        for column in schema.columns:
            assert column.description == described[column.name] and column.type
        if layer == GOLD or table in (COMPLETED_WORKOUTS, WORKOUT_BPM, USER_BINS):
            lineage = materialization.metadata["dagster/column_lineage"].value
            assert isinstance(lineage, dg.TableColumnLineage)
            assert set(lineage.deps_by_column) == set(described), table
        seen.add(materialization.asset_key)
    assert seen == set(defs.resolve_all_asset_keys())


def assert_rows_per_gold_day(
    results: list[dg.ExecuteInProcessResult], batches: list[sample_data.SampleData]
) -> None:
    """Each gold day's materialization counts that day's rows (the oracle's), not the range's."""
    expected = {
        BPM_SUMMARY: Counter(
            str(row["date"]) for row in oracle.workout_bpm_summary(batches, AS_OF)
        ),
        GYM_SUMMARY: Counter(str(row["date"]) for row in oracle.gym_summary(batches)),
    }
    days = 0
    for materialization in materializations(results):
        layer, table = materialization.asset_key.path
        if layer == GOLD:
            count = materialization.metadata["dagster/partition_row_count"].value
            assert count == expected[table][materialization.partition], materialization.partition
            days += 1
    assert days > 2  # both tables, a range of days


def silver_ops() -> list[str]:
    return [a.op.name for a in all_assets if SILVER in a.group_names_by_key.values()]
