"""What a Delta table's log tells without Spark, read by delta-rs: whether the table exists, its
schema and row count (from the files' statistics), the markers it holds, and the rows a write's
commit took. Sensors, checks and metadata ask here; every write goes through Spark
(``resources.delta``).
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from resources.object_store import delta_rs_options

Markers = Mapping[str, int]  # transaction markers {app id: version}
Options = Mapping[str, str]  # object-store options of delta-rs
# The operation metric counting the rows a data commit took, by Delta's name of its operation.
WRITTEN_ROWS = {"MERGE": "numSourceRows", "WRITE": "numOutputRows"}


def find(uri: str, options: Options | None = None) -> DeltaTable | None:
    """The table's latest snapshot (its log, read by delta-rs), or None before it exists.
    ``options`` add to the storage options that ``object_store`` derives from the variables."""
    try:
        return DeltaTable(uri, storage_options={**delta_rs_options(), **(options or {})})
    except TableNotFoundError:
        return None


def spark_schema(delta: DeltaTable) -> StructType:
    """The table's schema as Spark's, from its log."""
    return from_arrow_schema(pa.schema(delta.schema()))


def row_count(delta: DeltaTable) -> int:
    """Rows in the snapshot, from the files' statistics (no data read)."""
    actions = pa.table(delta.get_add_actions(flatten=True))
    return sum(count or 0 for count in actions["num_records"].to_pylist())


def partition_row_counts(delta: DeltaTable, column: str) -> dict[str, int]:
    """Rows in the snapshot per value of its partition column ``column`` (the value as the log
    writes it: a date as ISO text), from the files' statistics (no data read)."""
    actions = pa.table(delta.get_add_actions(flatten=True))
    counts: dict[str, int] = {}
    values = actions[f"partition.{column}"].to_pylist()
    for value, count in zip(values, actions["num_records"].to_pylist(), strict=True):
        key = str(value)
        counts[key] = counts.get(key, 0) + (count or 0)
    return counts


def rows_written(delta: DeltaTable, after_version: int | None) -> int | None:
    """The rows the first data commit after ``after_version`` (every version when None) took, by
    the operation metrics Delta recorded in it: a merge's source rows, a write's rows. None when
    no such commit follows (the write was skipped). Maintenance (OPTIMIZE, VACUUM) and schema
    changes are not data commits; the marker commits that follow a write come after it."""
    newest = delta.version()
    first = -1 if after_version is None else after_version
    if newest <= first:
        return None
    for commit in reversed(delta.history(newest - first)):  # oldest first
        if commit.get("version", first + 1) <= first:
            continue
        metric = WRITTEN_ROWS.get(str(commit.get("operation")))
        if metric is not None:
            return int((commit.get("operationMetrics") or {}).get(metric, 0))
    return None


def unheld(uri: str, markers: Markers | None) -> dict[str, int]:
    """The ``markers`` the table at ``uri`` does not hold yet (all before it exists)."""
    snapshot = find(uri)
    missing = {}
    for app_id, version in (markers or {}).items():
        held = snapshot.transaction_version(app_id) if snapshot else None
        if held is None or held < version:
            missing[app_id] = version
    return missing
