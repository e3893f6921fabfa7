"""Silver assets: incremental, exactly once, even when a run dies between two commits."""

from __future__ import annotations

import base64
import json
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.checks.reconciliation import RECONCILED_WITH_BRONZE
from lakehouse_assets.constants import SILVER
from lakehouse_assets.fitness.names import HEART_RATE, TOPIC_BPM
from lakehouse_assets.refinement import parsed
from lakehouse_assets_tests.bronze.helpers import BPM_ASSET, HEART_RATE_ASSET
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.sample_data import Message, produce
from resources import LakeResource

BPM_ASSETS = [BPM_ASSET, HEART_RATE_ASSET]


def readings(first: int, count: int) -> list[Message]:
    """Valid readings at the times ``first .. first + count - 1``, and one malformed record."""
    times = range(1_700_000_000 + first, 1_700_000_000 + first + count)
    values = [{"device_id": 7, "time": t, "heartrate": 80.0} for t in times]
    messages = [Message(TOPIC_BPM, "7", json.dumps(v)) for v in values]
    return [*messages, Message(TOPIC_BPM, "7", f"{{broken {first}")]


def counts(lake: LakeResource) -> tuple[int, int]:
    return lake.row_count(SILVER, HEART_RATE), lake.row_count(SILVER, "bpm_quarantine")


@pytest.mark.local_spark  # also on a local Spark application
def test_a_run_dying_between_quarantine_and_table_commits_is_redone_exactly_once(
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lake: LakeResource = resources["lake"]
    produce(broker.bootstrap_servers, readings(0, 40))
    dg.materialize(BPM_ASSETS, resources=resources)
    assert counts(lake) == (40, 1)

    produce(broker.bootstrap_servers, readings(40, 10))

    def die(*args: Any, **kwargs: Any) -> int:
        raise RuntimeError("killed after the quarantine commit")

    monkeypatch.setattr(LakeResource, "merge", die)
    failed = dg.materialize(BPM_ASSETS, resources=resources, raise_on_error=False)
    assert not failed.success
    monkeypatch.undo()
    assert counts(lake) == (40, 2)  # the quarantine commit happened, the table's did not

    dg.materialize(BPM_ASSETS, resources=resources)
    assert counts(lake) == (50, 2)  # the table catches up; the quarantine is not doubled
    version = lake.version(SILVER, HEART_RATE)
    dg.materialize(BPM_ASSETS, resources=resources)  # nothing new: nothing changes
    assert counts(lake) == (50, 2) and lake.version(SILVER, HEART_RATE) == version


def test_a_reading_sent_again_with_another_rate_keeps_its_first_record(
    broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    lake: LakeResource = resources["lake"]
    t = 1_700_000_000

    def reading(at: int, rate: float) -> Message:
        return Message(TOPIC_BPM, "7", json.dumps({"device_id": 7, "time": at, "heartrate": rate}))

    produce(broker.bootstrap_servers, [reading(t, 80.0), reading(t + 1, 81.0), reading(t, 90.0)])
    dg.materialize(BPM_ASSETS, resources=resources)
    first = lake.version(SILVER, HEART_RATE)
    # The same readings again, one with another rate, and a new one: only the new one is taken.
    produce(
        broker.bootstrap_servers, [reading(t, 100.0), reading(t + 1, 81.0), reading(t + 2, 82.0)]
    )
    dg.materialize(BPM_ASSETS, resources=resources)
    rows = lake.read(spark, SILVER, HEART_RATE).orderBy("time").collect()
    assert [r.heartrate for r in rows] == [80.0, 81.0, 82.0]  # at t, t + 1, t + 2
    changes, _ = lake.changes_since(spark, SILVER, HEART_RATE, first, with_change_type=True)
    assert [(r._change_type, r.heartrate) for r in changes.collect()] == [("insert", 82.0)]
    assert [c["operation"] for c in lake.history(SILVER, HEART_RATE, 1)] == ["MERGE"]


def test_a_row_the_merge_lost_fails_the_reconciliation_which_reads_the_runs_days(
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    produce(broker.bootstrap_servers, readings(0, 40))  # 2023-11-14 from 22:13:20 UTC
    dg.materialize(BPM_ASSETS, resources=resources)
    produce(broker.bootstrap_servers, readings(6390, 20))  # 10 on 2023-11-14, 10 on 2023-11-15
    lost = 1_700_006_405  # 2023-11-15 00:00:05

    merge = LakeResource.merge

    def lossy(self: LakeResource, layer: str, table: str, rows: Any, *args: Any, **kw: Any) -> Any:
        rows = rows.where(F.col("time").cast("long") != lost) if table == HEART_RATE else rows
        return merge(self, layer, table, rows, *args, **kw)

    monkeypatch.setattr(LakeResource, "merge", lossy)
    ran = dg.materialize(BPM_ASSETS, resources=resources, raise_on_error=False)
    [reconciled] = [e for e in ran.get_asset_check_evaluations()
                    if e.check_name == RECONCILED_WITH_BRONZE]  # fmt: skip
    # The one row lost, no more: each of the run's rows was looked for on its own day.
    assert not reconciled.passed and reconciled.metadata["offending_rows"].value == 1
    assert "2023-11-15T00:00:05" in reconciled.metadata["sample"].value


def reconciliation(ran: dg.ExecuteInProcessResult) -> dg.AssetCheckEvaluation:
    [reconciled] = [e for e in ran.get_asset_check_evaluations()
                    if e.check_name == RECONCILED_WITH_BRONZE]  # fmt: skip
    return reconciled


def test_the_reconciliation_is_answered_by_the_runs_own_commits(
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def lookup(*args: Any) -> None:
        raise AssertionError("the commits' metrics should have answered")

    monkeypatch.setattr(parsed, "_reconcile", lookup)
    for first in (0, 100):  # the run creating the table, then a merge into it; a reject each
        produce(broker.bootstrap_servers, readings(first, 10))
        assert reconciliation(dg.materialize(BPM_ASSETS, resources=resources)).passed
    monkeypatch.undo()

    append = LakeResource.append

    def lossy(self: LakeResource, layer: str, table: str, rows: Any, *args: Any, **kw: Any) -> Any:
        rows = rows.limit(0) if table == "bpm_quarantine" else rows
        return append(self, layer, table, rows, *args, **kw)

    monkeypatch.setattr(LakeResource, "append", lossy)
    produce(broker.bootstrap_servers, readings(200, 10))
    reconciled = reconciliation(
        dg.materialize(BPM_ASSETS, resources=resources, raise_on_error=False)
    )
    # The append took none of the run's one reject: the lookup finds it missing, and shows it.
    assert not reconciled.passed and reconciled.metadata["offending_rows"].value == 1
    sample = reconciled.metadata["sample"].value
    assert "bpm_quarantine" in sample and base64.b64encode(b"{broken 200").decode() in sample
