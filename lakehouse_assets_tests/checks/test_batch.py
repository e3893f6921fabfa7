"""The checks of a table merged by its rules' key are counted on the rows the run merged when the
table's rules held before the write (it created the table, or its latest checks passed): rows
that pass there pass on the table. A failure on them, or a table whose latest checks failed, is
counted on the whole table, so the figures a failed check shows are the table's own."""

from pathlib import Path

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.checks.results import check_results, written_rows
from lakehouse_assets.checks.rules import TableRules, condition, primary_key
from lakehouse_assets.constants import SILVER, asset_key
from resources import LakeResource

KEY = asset_key(SILVER, "readings")
RULES = TableRules(
    (*primary_key("device", "time"), condition("plausible", "bpm BETWEEN 25 AND 250", "plausible"))
)
SCHEMA = "device string, time string, bpm int"
ON_BATCH = "the rows this run wrote"


def _writer(spark: SparkSession, lake: LakeResource) -> dg.AssetsDefinition:
    @dg.asset(
        key=KEY,
        check_specs=[dg.AssetCheckSpec(n, asset=KEY, blocking=True) for n in RULES.check_names()],
        config_schema={"rows": list},
    )
    def readings(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        rows = spark.createDataFrame(context.op_config["rows"], SCHEMA).localCheckpoint()
        created = not lake.exists(SILVER, "readings")
        lake.merge(SILVER, "readings", rows, list(RULES.keys))
        batch = written_rows(context, KEY, rows, created)
        return dg.MaterializeResult(
            check_results=check_results(lake, spark, SILVER, "readings", RULES, batch=batch)
        )

    return readings


def _checks(
    instance: dg.DagsterInstance, asset: dg.AssetsDefinition, rows: list[list[object]]
) -> dict[str, tuple[bool, int, str | None]]:
    config = {"ops": {"silver__readings": {"config": {"rows": rows}}}}
    result = dg.materialize([asset], instance=instance, run_config=config, raise_on_error=False)
    return {
        e.check_name: (
            e.passed,
            e.metadata["offending_rows"].value,
            e.metadata["evaluated_on"].value if "evaluated_on" in e.metadata else None,
        )
        for e in result.get_asset_check_evaluations()
    }  # pyright: ignore[reportReturnType]


def test_checks_count_the_merged_rows_until_one_fails_then_the_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = LakeResource(root=str(tmp_path))
    asset = _writer(spark, lake)
    instance = dg.DagsterInstance.ephemeral()
    # The first write creates the table, with a reading of 999 bpm: counted on the table.
    checks = _checks(instance, asset, [["a", "08:00", 70], ["a", "08:01", 999]])
    assert checks["plausible"] == (False, 1, None)
    assert checks["primary_key_unique"] == (True, 0, None)
    # A clean batch, but the last checks failed: the table, still failing.
    checks = _checks(instance, asset, [["a", "09:00", 80]])
    assert checks["plausible"] == (False, 1, None)
    # The bad reading merged again, mended: the table again, which passes now.
    checks = _checks(instance, asset, [["a", "08:01", 71]])
    assert set(checks.values()) == {(True, 0, None)}
    # Every check passed last time: a clean batch is enough, the table is not read.
    checks = _checks(instance, asset, [["a", "08:00", 72], ["b", "10:00", 60]])
    assert set(checks.values()) == {(True, 0, ON_BATCH)}
    # A batch holding one new key twice: the merge inserts both; the table shows the repeat.
    checks = _checks(instance, asset, [["c", "11:00", 60], ["c", "11:00", 61]])
    assert checks["primary_key_unique"] == (False, 1, None)
    assert lake.read(spark, SILVER, "readings").count() == 6


def test_rows_of_a_table_created_by_the_run_stand_for_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = LakeResource(root=str(tmp_path))
    checks = _checks(dg.DagsterInstance.ephemeral(), _writer(spark, lake), [["a", "08:00", 70]])
    assert set(checks.values()) == {(True, 0, ON_BATCH)}


def test_a_table_no_run_recorded_is_checked_whole(spark: SparkSession, tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path))
    stored = spark.createDataFrame([["a", "08:00", 999]], SCHEMA)  # written outside Dagster
    lake.merge(SILVER, "readings", stored, list(RULES.keys))
    checks = _checks(dg.DagsterInstance.ephemeral(), _writer(spark, lake), [["b", "09:00", 70]])
    assert checks["plausible"] == (False, 1, None)
