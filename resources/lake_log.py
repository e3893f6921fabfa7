"""What a table's Delta log says, read by delta-rs with no Spark (``resources.delta_log``):
whether the table exists, its version, the transaction markers it holds, its history, and the
row counts its file statistics give."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg
from deltalake import DeltaTable

from resources import delta_log
from resources.delta import Markers
from resources.lake_location import LakeLocation


class LakeLog(LakeLocation):
    """A table's snapshot, version and transaction markers."""

    def find(self, layer: str, table: str) -> DeltaTable | None:
        """The table's latest snapshot, or None before the table exists (one log read)."""
        return delta_log.find(self.table_uri(layer, table), self.storage_options)

    def table(self, layer: str, table: str) -> DeltaTable:
        """The table's latest snapshot.

        Raises:
            FileNotFoundError: the table does not exist yet.
        """
        snapshot = self.find(layer, table)
        if snapshot is None:
            raise FileNotFoundError(
                f"Delta table {layer}.{table} does not exist at {self.table_uri(layer, table)}"
            )
        return snapshot

    def exists(self, layer: str, table: str) -> bool:
        """Whether the table has been created."""
        return self.find(layer, table) is not None

    def version(self, layer: str, table: str) -> int | None:
        """The table's current version, or None before it exists."""
        snapshot = self.find(layer, table)
        return snapshot.version() if snapshot else None

    def committed_version(self, layer: str, table: str, app_id: str) -> int | None:
        """The last version ``app_id`` committed to the table with a transaction marker."""
        return self.committed_versions(layer, table, [app_id])[app_id]

    def committed_versions(
        self, layer: str, table: str, app_ids: Sequence[str]
    ) -> dict[str, int | None]:
        """The last version each of ``app_ids`` committed to the table with a marker (one log
        read for all)."""
        return delta_log.held(self.find(layer, table), app_ids)

    def holds(self, layer: str, table: str, markers: Markers) -> bool:
        """Whether the table holds every ``{app id: version}`` marker (or a later version)."""
        versions = delta_log.held(self.find(layer, table), markers.keys())
        return not delta_log.missing(markers, versions)

    def history(self, layer: str, table: str, limit: int | None = None) -> list[dict[str, Any]]:
        """The table's commits, newest first."""
        snapshot = self.find(layer, table)
        return snapshot.history(limit) if snapshot else []


class LakeStatistics(LakeLog):
    """A table's row counts and materialization metadata, from its log's file statistics."""

    def rows_written(self, layer: str, table: str, after_version: int | None) -> int | None:
        """The rows the first data commit after ``after_version`` took (a merge's source rows, an
        append's rows), from the log; None when none follows (``delta_log.rows_written``)."""
        snapshot = self.find(layer, table)
        return delta_log.rows_written(snapshot, after_version) if snapshot else None

    def row_count(self, layer: str, table: str) -> int:
        """Rows in the table's current snapshot, from the file statistics (no data read)."""
        snapshot = self.find(layer, table)
        return delta_log.row_count(snapshot) if snapshot else 0

    def partition_row_counts(self, layer: str, table: str, column: str) -> dict[str, int]:
        """Rows per value of the partition column ``column`` (ISO text for a date), from the file
        statistics (no data read); empty before the table exists."""
        snapshot = self.find(layer, table)
        return delta_log.partition_row_counts(snapshot, column) if snapshot else {}

    def rows_changed(self, layer: str, table: str, after_version: int | None) -> int:
        """About how many rows the table's change feed holds after ``after_version`` (all its
        rows when None), from the log (``delta_log.rows_changed``); 0 before it exists."""
        snapshot = self.find(layer, table)
        return delta_log.rows_changed(snapshot, after_version) if snapshot else 0

    def table_metadata(
        self, layer: str, table: str, snapshot: DeltaTable | None = None
    ) -> dict[str, Any]:
        """Dagster metadata for a materialization: row count, name, location, version (of
        ``snapshot`` when given, else of the table's current snapshot)."""
        snapshot = snapshot or self.find(layer, table)
        return {
            "dagster/row_count": delta_log.row_count(snapshot) if snapshot else 0,
            "dagster/table_name": self.table_name(layer, table),
            "dagster/storage_kind": "delta",
            "table_uri": dg.MetadataValue.path(self.table_uri(layer, table)),
            # An identifier, not a measure: text, so the UI does not chart it.
            "delta_version": dg.MetadataValue.text(str(snapshot.version()) if snapshot else "none"),
        }
