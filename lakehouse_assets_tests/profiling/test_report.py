"""A profile shown and kept: Dagster metadata, the profiles Delta table, the CLI, and the switch."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.profiling.report import (
    PROFILE_SCHEMA,
    STATISTICS,
    format_profile,
    profile_metadata,
    profile_rows,
)
from lakehouse_assets.profiling.store import profile_after_write
from lakehouse_assets.profiling.transforms import profile
from lakehouse_assets_tests.profiling.test_transforms import OPTIONS, table
from lakehouse_tools.cli import main
from resources import LakeResource
from resources.settings import ENV_PROFILE, profile_mode

AT = datetime(2026, 11, 24, 12, tzinfo=UTC)


def test_metadata_rows_and_text_of_a_profile(spark: SparkSession) -> None:
    taken = profile(table(spark), OPTIONS)
    metadata = profile_metadata(taken)
    assert set(metadata) == {"profile", "profile_summary", "profile_histograms"}
    shown = metadata["profile"]
    assert isinstance(shown, dg.TableMetadataValue)
    assert [c.name for c in shown.schema.columns] == list(STATISTICS)
    code = shown.records[5].data
    assert (code["column"], code["missing"], code["distinct"]) == ("code", 3, 6)
    assert code["top_values"] == "'42' (3), '007' (2), '' (1), 'AB-2' (1)"
    summary = metadata["profile_summary"].value
    assert "**10 rows, 7 columns.** Candidate keys: (id), (twice), (group, seq)." in summary
    assert "| **id** | 1 | 0.87 |" in summary  # the correlation matrix, id against group
    assert metadata["profile_histograms"].value.startswith("![histograms](data:image/png;base64,")

    rows = profile_rows(taken, AT, version=3)
    assert rows.schema == PROFILE_SCHEMA and rows.num_rows == 7
    code_row = rows.to_pylist()[5]
    assert code_row["profiled_at"] == AT and code_row["table_version"] == 3
    assert code_row["top_values"][0] == {"value": "42", "count": 3}
    assert [r["candidate_key"] for r in rows.to_pylist()] == [True, False, False, True] + [
        False
    ] * 3
    assert "code:\n  type: string\n  count: 9\n  missing: 3" in format_profile(taken)


def test_profiles_are_kept_and_printed(
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(ENV_PROFILE, "materialization")  # the tests' default is off
    lake = LakeResource(root=str(tmp_path))
    lake.append("silver", "sample", table(spark))
    assert "profile" in profile_after_write(lake, spark, "silver", "sample")
    monkeypatch.setenv("LAKEHOUSE_ROOT", str(tmp_path))
    main(["profile", "silver", "sample"])
    printed = capsys.readouterr().out
    assert "10 rows, 7 columns. Candidate keys: (id), (twice), (group, seq)." in printed
    kept = lake.read(spark, "profiles", "silver__sample")
    assert kept.count() == 2 * 7  # one row per column per profile, two profiles
    with pytest.raises(SystemExit, match=r"No Delta table at .*silver/missing"):
        main(["profile", "silver", "missing"])


def test_profiling_can_be_switched_off(spark: SparkSession, tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path))
    lake.append("gold", "sample", table(spark))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_PROFILE, "off")
        assert profile_after_write(lake, spark, "gold", "sample") == {}
    assert not lake.exists("profiles", "gold__sample")
    with pytest.raises(
        ValueError, match="LAKEHOUSE_PROFILE must be one of materialization, schedule, off"
    ):
        profile_mode({ENV_PROFILE: "always"})
