"""What a Delta table's log tells without Spark, read by delta-rs: whether the table exists, its
schema and row count (from the files' statistics), the markers it holds, and the rows a write's
commit took. Sensors, checks and metadata ask here; every write goes through Spark
(``resources.delta``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

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
    changes are not data commits."""
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


# The operation metrics counting the rows a commit changed, as its change data feed shows them.
CHANGED_ROWS = {
    "WRITE": ("numOutputRows",),
    "STREAMING UPDATE": ("numOutputRows",),
    "MERGE": ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted"),
    "DELETE": ("numDeletedRows",),
    "UPDATE": ("numUpdatedRows",),
}


def rows_changed(delta: DeltaTable, after_version: int | None) -> int:
    """About how many rows a read of the change feed after ``after_version`` reads: the rows
    the later commits changed, by their operation metrics (the snapshot's rows when None), from
    the log. Commits without metrics count none."""
    if after_version is None:
        return row_count(delta)
    newest = delta.version()
    if newest <= after_version:
        return 0
    changed = 0
    for commit in delta.history(newest - after_version):
        if commit.get("version", newest) <= after_version:
            continue
        metrics = commit.get("operationMetrics") or {}
        for name in CHANGED_ROWS.get(str(commit.get("operation")), ()):
            changed += int(metrics.get(name, 0))
    return changed


MARKERS_APP = "lakehouse.markers"
"""The app id of the commits that record several markers. Delta takes one marker per commit
(``txnAppId``), so such a commit carries this one, a count of those commits, and every marker
it records in its ``userMetadata`` (``MARKERS_KEY``); ``held`` reads them there."""
MARKERS_KEY = "lakehouse_markers"
RECENT_COMMITS = 10  # read first when looking for the newest commit that recorded markers


def recorded_markers(delta: DeltaTable) -> dict[str, int]:
    """The markers in the metadata of the newest commit that recorded several (none when no
    commit did). Only the step that writes the table records them, and maintenance commits
    (OPTIMIZE, VACUUM) come between its commits, so the newest commits are read first; the
    whole history only when they hold none."""
    if delta.transaction_version(MARKERS_APP) is None:
        return {}
    for limit in (RECENT_COMMITS, None):
        for commit in delta.history(limit):  # newest first
            text = commit.get("userMetadata")
            if not text:
                continue
            try:
                markers = json.loads(text).get(MARKERS_KEY)
            except (ValueError, AttributeError):
                continue  # a user's own metadata
            if isinstance(markers, dict):
                return {str(app): int(version) for app, version in markers.items()}
    return {}  # its commit left the log (log retention): the older markers hold


def held(delta: DeltaTable | None, app_ids: Iterable[str]) -> dict[str, int | None]:
    """The version of each marker the table holds (None: it holds none of that app), from
    Delta's markers and the markers recorded by commits of several (``recorded_markers``)."""
    if delta is None:
        return dict.fromkeys(app_ids)
    recorded = recorded_markers(delta)
    versions: dict[str, int | None] = {}
    for app_id in app_ids:
        found = {delta.transaction_version(app_id), recorded.get(app_id)} - {None}
        versions[app_id] = max(found) if found else None  # type: ignore[type-var]
    return versions


def missing(markers: Markers, versions: Mapping[str, int | None]) -> dict[str, int]:
    """The ``markers`` not held at their version or later (``versions``: those held)."""
    return {
        app_id: version
        for app_id, version in markers.items()
        if (held_version := versions[app_id]) is None or held_version < version
    }


def recording(uri: str, markers: Markers | None) -> dict[str, str] | None:
    """The writer options that record ``markers`` in a write's commit, None when the table at
    ``uri`` holds every one (the write was done), {} for no markers.

    One marker is Delta's own (``txnAppId``), so Delta skips a write whose marker the table
    holds. Several are recorded in the commit's ``userMetadata``, all of them, with Delta's
    marker ``MARKERS_APP`` at one more than the table holds."""
    if not markers:
        return {}
    delta = find(uri)
    if not missing(markers, held(delta, markers.keys())):
        return None
    if len(markers) == 1:
        ((app_id, version),) = markers.items()
        return {"txnAppId": app_id, "txnVersion": str(version)}
    count = delta.transaction_version(MARKERS_APP) if delta else None
    return {
        "txnAppId": MARKERS_APP,
        "txnVersion": str(0 if count is None else count + 1),
        "userMetadata": json.dumps({MARKERS_KEY: dict(markers)}, sort_keys=True),
    }
