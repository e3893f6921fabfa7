"""Delta statistics from Parquet footers, and partition values from hive-style paths."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from resources.delta_files import file_statistics, partition_values


def test_partition_values_are_read_from_the_folders() -> None:
    assert partition_values("date=2025-01-01/part-0.parquet") == {"date": "2025-01-01"}
    assert partition_values("a=x%3Ay/b=__HIVE_DEFAULT_PARTITION__/f.parquet") == {
        "a": "x:y",
        "b": None,
    }
    assert partition_values("part-0.parquet") == {}


def test_statistics_span_every_row_group(tmp_path: Path) -> None:
    at = dt.datetime(2025, 1, 1, 12, 0, 0, 123456, tzinfo=dt.UTC)
    table = pa.table(
        {
            "n": pa.array([3, 1, None, 7, 5], pa.int64()),
            "s": ["b", "a", "c", None, "d"],
            "ts": pa.array([at, at, at, at + dt.timedelta(days=1), at], pa.timestamp("us", "UTC")),
            "day": pa.array([dt.date(2025, 1, 2)] * 5, pa.date32()),
            "raw": pa.array([b"\xff", b"", None, b"x", b"y"], pa.binary()),
            "nested": pa.array([{"x": 1}] * 5),
        }
    )
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, row_group_size=3)  # row groups [0, 3) and [3, 5)
    stats = file_statistics(pq.read_metadata(path))
    assert stats["numRecords"] == 5
    assert stats["minValues"] == {
        "n": 1,
        "s": "a",
        "ts": "2025-01-01T12:00:00.123456Z",
        "day": "2025-01-02",
    }
    assert stats["maxValues"] == {
        "n": 7,
        "s": "d",
        "ts": "2025-01-02T12:00:00.123456Z",
        "day": "2025-01-02",
    }
    # Binary has no comparable bounds in Delta; nested columns have no statistics at all.
    assert stats["nullCount"] == {"n": 1, "s": 1, "ts": 0, "day": 0, "raw": 1}


def test_an_empty_file_has_a_row_count_and_no_bounds(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"n": pa.array([], pa.int64())}), path)  # what Spark writes for 0 rows
    stats = file_statistics(pq.read_metadata(path))
    assert (stats["numRecords"], stats["minValues"], stats["maxValues"]) == (0, {}, {})
