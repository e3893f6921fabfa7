"""Column statistics from the Delta log: combined from each file's, shown without reading a row."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pyarrow as pa
from pyspark.sql import SparkSession

from lakehouse_assets.profiling.file_stats import ColumnBounds, column_bounds, exact
from lakehouse_assets.table_metadata import table_metadata
from resources import LakeResource


def actions(**columns: list[object]) -> pa.Table:
    """Add actions as delta-rs flattens them: ``null_count__x`` stands for ``null_count.x``."""
    return pa.table({name.replace("__", "."): values for name, values in columns.items()})


def test_each_columns_nulls_are_summed_and_bounds_combined_over_the_files() -> None:
    files = actions(
        num_records=[3, 2, 4],
        null_count__n=[1, 2, 0],  # the second file's n is all null: it has no bounds
        min__n=[5, None, -2],
        max__n=[9, None, 7],
        null_count__s=[0, 0, 0],
        min__s=["b", "a", "c"],
        max__s=["d", "b", "z"],
        partition__day=["2025-01-02", None, "2025-01-01"],
    )
    assert column_bounds(files) == [
        ColumnBounds("n", nulls=3, least=-2, greatest=9),
        ColumnBounds("s", nulls=0, least="a", greatest="z"),
        ColumnBounds("day", nulls=2, least="2025-01-01", greatest="2025-01-02"),
    ]
    assert exact(files)


def test_what_the_log_does_not_tell_is_shown_as_unknown() -> None:
    files = actions(
        num_records=[2, 2],
        null_count__n=[0, None],  # a file without statistics for n
        min__n=[1, None],
        max__n=[2, None],
        null_count__b=[0, 1],  # a type Delta keeps no bounds of (binary)
        **{"deletionVector__storageType": [None, "u"]},
    )
    assert column_bounds(files) == [
        ColumnBounds("n", nulls=None, least=None, greatest=None),
        ColumnBounds("b", nulls=1, least=None, greatest=None),
    ]
    assert not exact(files)  # a deletion vector: the file's statistics count deleted rows
    assert column_bounds(actions(num_records=[])) == []


def test_a_writes_metadata_shows_its_tables_statistics(spark: SparkSession, tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path))
    schema = "id long, name string, day date"
    first = [(1, "ann", date(2025, 1, 1)), (2, None, date(2025, 1, 1)), (3, "", None)]
    second = [(None, "zoe", date(2025, 1, 3)), (7, "bob", date(2025, 1, 3))]
    for rows in (first, second):
        lake.append("silver", "people", spark.createDataFrame(rows, schema), ["day"])
    shown = table_metadata(lake, "silver", "people", {})
    records = [record.data for record in shown["column_statistics"].records]
    assert records == [
        {"column": "id", "nulls": 1, "min": "1", "max": "7"},
        {"column": "name", "nulls": 1, "min": "", "max": "zoe"},
        {"column": "day", "nulls": 1, "min": "2025-01-01", "max": "2025-01-03"},
    ]
    assert shown["column_statistics_exact"].value is True
    assert shown["dagster/row_count"] == 5
