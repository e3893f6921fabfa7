"""The warning that a table is empty while a table it is computed from has rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from lakehouse_assets.checks.results import not_empty_result
from lakehouse_assets.constants import BRONZE, SILVER, asset_key
from resources import LakeResource

ONE_ROW, NO_ROWS = pa.table({"n": [1]}), pa.table({"n": pa.array([], pa.int64())})
TABLE, UPSTREAM = asset_key(SILVER, "users"), asset_key(BRONZE, "registered_users")


def lake_with(tmp_path: Path, table: pa.Table, upstream: pa.Table) -> LakeResource:
    lake = LakeResource(root=str(tmp_path))
    write_deltalake(lake.table_uri(*TABLE.path), table)
    write_deltalake(lake.table_uri(*UPSTREAM.path), upstream)
    return lake


def test_an_empty_table_with_rows_upstream_warns(tmp_path: Path) -> None:
    result = not_empty_result(lake_with(tmp_path, NO_ROWS, ONE_ROW), TABLE, [UPSTREAM])
    assert not result.passed and result.severity.value == "WARN"
    assert result.metadata["rows"].value == 0
    assert result.metadata["upstream_rows"].value == {"bronze/registered_users": 1}


def test_an_empty_table_with_nothing_upstream_passes(tmp_path: Path) -> None:
    assert not_empty_result(lake_with(tmp_path, NO_ROWS, NO_ROWS), TABLE, [UPSTREAM]).passed


def test_a_table_with_rows_passes(tmp_path: Path) -> None:
    assert not_empty_result(lake_with(tmp_path, ONE_ROW, ONE_ROW), TABLE, [UPSTREAM]).passed
