"""OPTIMIZE and VACUUM beside a writer: no row lost or duplicated, fewer files."""

from __future__ import annotations

import threading
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from resources import LakeResource
from resources.maintenance import SAFE_RETENTION_HOURS, optimize, vacuum


def ids(lake: LakeResource) -> list[int]:
    return sorted(lake.table("bronze", "t").to_pyarrow_table()["id"].to_pylist())


def append_batches(lake: LakeResource, first: int, last: int) -> None:
    """Small commits of 10 ids each, as a stream makes them (written by delta-rs: quicker)."""
    for batch in range(first, last):
        ids = pa.table({"id": list(range(batch * 10, batch * 10 + 10))})
        write_deltalake(lake.table_uri("bronze", "t"), ids, mode="append")


def test_optimize_while_appends_commit_keeps_every_row_once(tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path))
    append_batches(lake, 0, 20)
    writer = threading.Thread(target=append_batches, args=(lake, 20, 60))
    writer.start()
    results = []
    while writer.is_alive():  # compact again and again while the writer commits
        results.append(optimize(lake, "bronze", "t"))
    writer.join()
    assert ids(lake) == list(range(600))  # 60 batches of 10 ids, none lost, none doubled

    # The first compaction ran beside the writer and dropped the 20+ files to fewer.
    assert results and results[0]["after"]["files"] < 20 <= results[0]["before"]["files"]
    assert optimize(lake, "bronze", "t")["after"]["files"] == 1


def test_z_order_and_vacuum(tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path))
    append_batches(lake, 0, 5)
    optimize(lake, "bronze", "t", z_order=["id"])
    with pytest.raises(ValueError, match="safe minimum"):
        vacuum(lake, "bronze", "t", retention_hours=SAFE_RETENTION_HOURS - 1)
    assert vacuum(lake, "bronze", "t", retention_hours=SAFE_RETENTION_HOURS)["files_removed"] == 0
    assert vacuum(lake, "bronze", "t", retention_hours=0, force=True)["files_removed"] == 5
    assert ids(lake) == list(range(50))
