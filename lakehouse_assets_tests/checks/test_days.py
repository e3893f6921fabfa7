"""Rules whose key fixes the day are checked on the days a run wrote, unless the table's last
write failed a check: then on the whole table, so a table still broken on an older day stays
blocked and one mended by the write is unblocked."""

from datetime import date
from pathlib import Path

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.checks.results import check_results, checked_days
from lakehouse_assets.checks.rules import TableRules, condition, primary_key
from lakehouse_assets.constants import SILVER, asset_key
from resources import LakeResource

KEY = asset_key(SILVER, "readings")
RULES = TableRules(
    (*primary_key("device", "time"), condition("plausible", "bpm BETWEEN 25 AND 250", "plausible")),
    key_fixes_day=True,
)
SCHEMA = "device string, time string, bpm int, date date"


def _writer(spark: SparkSession, lake: LakeResource) -> dg.AssetsDefinition:
    @dg.asset(
        key=KEY,
        check_specs=[dg.AssetCheckSpec(n, asset=KEY, blocking=True) for n in RULES.check_names()],
        config_schema={"rows": list, "day": str},
    )
    def readings(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        day = context.op_config["day"]
        rows = [(*row, date.fromisoformat(day)) for row in context.op_config["rows"]]
        written = [("date", "in", [day])]
        lake.replace_partitions(
            SILVER, "readings", spark.createDataFrame(rows, SCHEMA), written, ["date"]
        )
        scope = checked_days(context, KEY, written)
        return dg.MaterializeResult(
            check_results=check_results(lake, spark, SILVER, "readings", RULES, written=scope)
        )

    return readings


def _checks(
    instance: dg.DagsterInstance, asset: dg.AssetsDefinition, day: str, rows: list[list[object]]
) -> dict[str, tuple[bool, int, str | None]]:
    config = {"ops": {"silver__readings": {"config": {"day": day, "rows": rows}}}}
    result = dg.materialize([asset], instance=instance, run_config=config, raise_on_error=False)
    evaluations = result.get_asset_check_evaluations()
    return {
        e.check_name: (
            e.passed,
            e.metadata["offending_rows"].value,
            e.metadata["partitions"].value if "partitions" in e.metadata else None,
        )
        for e in evaluations
    }  # pyright: ignore[reportReturnType]


def test_checks_read_the_days_written_until_a_check_fails(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = LakeResource(root=str(tmp_path))
    asset = _writer(spark, lake)
    instance = dg.DagsterInstance.ephemeral()
    day_one = "`date` IN ('2026-11-01')"
    # Day 1: a reading of 999 bpm. The first write is checked on its own day: it fails.
    checks = _checks(instance, asset, "2026-11-01", [["a", "08:00", 70], ["a", "08:01", 999]])
    assert checks["plausible"] == (False, 1, day_one)
    assert checks["primary_key_unique"] == (True, 0, day_one)
    # Day 2, clean: the last write failed, so the whole table is checked: still failing (day 1).
    checks = _checks(instance, asset, "2026-11-02", [["a", "09:00", 80]])
    assert checks["plausible"] == (False, 1, None)
    # Day 1 written again, mended: the whole table again, which passes every check now.
    checks = _checks(instance, asset, "2026-11-01", [["a", "08:00", 70]])
    assert all(passed and scope is None for passed, _, scope in checks.values())
    # Every check passed last time: day 3 is checked on its own, and fails on its own repeat.
    checks = _checks(instance, asset, "2026-11-03", [["b", "10:00", 60], ["b", "10:00", 61]])
    assert checks["plausible"] == (True, 0, "`date` IN ('2026-11-03')")
    assert checks["primary_key_unique"] == (False, 1, "`date` IN ('2026-11-03')")
