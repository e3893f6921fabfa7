"""Data files of Delta tables: Spark's executors write them, the driver turns them into log actions.

Spark writes a frame's Parquet files into a staging folder inside the table folder (hive-style
partition folders, file names unique to the write job). The driver then moves each file to its
partition folder, so every table keeps one layout that Spark and delta-rs both read, and makes an
``AddAction`` of it with the statistics of its Parquet footer (row count, per-column min, max
and null count), which row counts and data skipping rely on. Files a crash leaves behind were
never committed: VACUUM removes them like any unreferenced file.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

import pyarrow.parquet as pq
from deltalake.transaction import AddAction
from pyarrow import fs
from pyspark.sql import DataFrame

STAGING_PREFIX = "staging-"  # not "_" or ".": VACUUM must be able to remove what a crash left
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"  # Spark's folder name for a null partition value


@dataclass(frozen=True)
class Location:
    """A folder on a file system pyarrow knows (local, s3://, gs://, abfss://)."""

    filesystem: fs.FileSystem
    path: str  # within ``filesystem``

    @classmethod
    def of(cls, uri: str, storage_options: dict[str, str] | None = None) -> Location:
        """The location of ``uri`` (a local path or an object-store URI)."""
        if "://" not in uri:
            return cls(fs.LocalFileSystem(), uri)
        filesystem, path = fs.FileSystem.from_uri(uri.replace("s3a://", "s3://", 1))
        return cls(filesystem, path)


def hadoop_uri(uri: str) -> str:
    """A URI as Spark (Hadoop) names it: ``s3://`` is ``s3a://``."""
    return "s3a://" + uri[len("s3://") :] if uri.startswith("s3://") else uri


def write_files(
    frame: DataFrame, table_uri: str, partition_by: Sequence[str], data_change: bool = True
) -> list[AddAction]:
    """Write ``frame`` as Parquet files of the table at ``table_uri`` (by its executors) and return
    the actions that add them. Nothing is committed: until then the files are not in the table.
    ``data_change=False`` marks files that hold rows the table already had (a rewrite).
    """
    stage = f"{STAGING_PREFIX}{uuid.uuid4().hex}"
    writer = frame.write.mode("error")
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    writer.parquet(hadoop_uri(f"{table_uri}/{stage}"))
    table = Location.of(table_uri)
    actions = [
        _add_action(table, stage, relative, data_change) for relative in _data_files(table, stage)
    ]
    table.filesystem.delete_dir(f"{table.path}/{stage}")  # only Spark's markers are left
    return actions


def _data_files(table: Location, stage: str) -> Iterator[str]:
    """The paths of the Parquet files Spark wrote into ``stage``, relative to the stage."""
    root = f"{table.path}/{stage}"
    selector = fs.FileSelector(root, recursive=True)
    for info in table.filesystem.get_file_info(selector):
        relative = info.path[len(root) + 1 :]
        hidden = any(part.startswith(("_", ".")) for part in relative.split("/"))
        if info.type == fs.FileType.File and relative.endswith(".parquet") and not hidden:
            yield relative


def _add_action(table: Location, stage: str, relative: str, data_change: bool) -> AddAction:
    """Move one staged file to its partition folder; the action that adds it."""
    target = f"{table.path}/{relative}"
    table.filesystem.create_dir(target.rsplit("/", 1)[0], recursive=True)
    table.filesystem.move(f"{table.path}/{stage}/{relative}", target)
    size = table.filesystem.get_file_info(target).size or 0
    with table.filesystem.open_input_file(target) as handle:
        footer = pq.read_metadata(handle)
    return AddAction(
        path=quote(relative, safe="/="),  # the log holds URI-encoded paths
        size=size,
        partition_values=partition_values(relative),
        modification_time=int(time.time() * 1000),
        data_change=data_change,
        stats=json.dumps(file_statistics(footer)),
    )


def partition_values(relative: str) -> dict[str, str | None]:
    """``{column: value}`` of a hive-style path such as ``date=2025-01-01/part-0.parquet``."""
    values: dict[str, str | None] = {}
    for folder in relative.split("/")[:-1]:
        column, _, value = folder.partition("=")
        values[unquote(column)] = None if value == HIVE_NULL else unquote(value)
    return values


def file_statistics(footer: pq.FileMetaData) -> dict[str, Any]:
    """Delta file statistics from a Parquet footer: ``numRecords`` and, per top-level column of a
    primitive type, ``minValues``, ``maxValues`` (when every row group has them) and ``nullCount``.
    """
    minimum: dict[str, Any] = {}
    maximum: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for index in range(footer.num_columns):
        column = footer.schema.column(index)
        if "." in column.path:  # nested (struct, list, map): no statistics
            continue
        chunks = [
            footer.row_group(g).column(index).statistics for g in range(footer.num_row_groups)
        ]
        if any(chunk is None for chunk in chunks):
            continue
        nulls[column.path] = sum(chunk.null_count for chunk in chunks)
        comparable = column.physical_type != "BYTE_ARRAY" or column.logical_type.type == "STRING"
        if chunks and comparable and all(chunk.has_min_max for chunk in chunks):
            minimum[column.path] = _json_value(min(chunk.min for chunk in chunks))
            maximum[column.path] = _json_value(max(chunk.max for chunk in chunks))
    return {
        "numRecords": footer.num_rows,
        "minValues": minimum,
        "maxValues": maximum,
        "nullCount": nulls,
    }


def _json_value(value: Any) -> Any:
    """A statistic as Delta's JSON writes it."""
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value
