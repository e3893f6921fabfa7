"""Table maintenance through delta-rs: OPTIMIZE (bin-packing or Z-order) and VACUUM.

Both run beside the writers. Compaction commits with ``dataChange = false`` and only removes the
files it rewrote, so a stream appending meanwhile does not conflict with it; when a commit does
conflict (a merge rewrote one of the same files), the whole compaction is retried on the new
snapshot. Nothing a reader of a retained version needs is vacuumed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

from resources.delta import commit_properties
from resources.lake import LakeResource

# The smallest VACUUM retention without ``force``: Delta's default deleted-file retention.
SAFE_RETENTION_HOURS = 7 * 24
OPTIMIZE_ATTEMPTS = 5


def file_stats(delta: DeltaTable) -> dict[str, int]:
    """Number of files and bytes in the table's current snapshot."""
    actions = pa.table(delta.get_add_actions(flatten=True))
    return {"files": actions.num_rows, "bytes": sum(actions["size_bytes"].to_pylist())}


def optimize(
    lake: LakeResource,
    layer: str,
    table: str,
    target_size: int | None = None,
    z_order: Sequence[str] = (),
) -> dict[str, Any]:
    """Compact the table's small files (Z-ordered by ``z_order`` if given); returns the
    files and bytes before and after, and the optimizer's own metrics."""
    for attempt in range(1, OPTIMIZE_ATTEMPTS + 1):
        delta = lake.table(layer, table)
        before = file_stats(delta)
        try:
            if z_order:
                metrics = delta.optimize.z_order(
                    list(z_order), target_size=target_size, commit_properties=commit_properties()
                )
            else:
                metrics = delta.optimize.compact(
                    target_size=target_size, commit_properties=commit_properties()
                )
        except CommitFailedError:
            if attempt == OPTIMIZE_ATTEMPTS:
                raise
            time.sleep(0.5 * attempt)  # a writer rewrote files we compacted: start over
            continue
        after = file_stats(lake.table(layer, table))
        return {"before": before, "after": after, "attempts": attempt, "metrics": metrics}
    raise AssertionError("unreachable")


def vacuum(
    lake: LakeResource, layer: str, table: str, retention_hours: int, force: bool = False
) -> dict[str, Any]:
    """Delete files no snapshot within ``retention_hours`` references: files the log removed,
    and files written by a batch that never committed (older than the retention).

    Raises:
        ValueError: ``retention_hours`` is below the safe minimum and ``force`` is not set.
    """
    if retention_hours < SAFE_RETENTION_HOURS and not force:
        raise ValueError(
            f"VACUUM retention of {retention_hours} h is below the safe minimum of "
            f"{SAFE_RETENTION_HOURS} h: readers and streams of older versions could lose files. "
            "Set force to vacuum anyway."
        )
    delta = lake.table(layer, table)
    removed = delta.vacuum(
        retention_hours=retention_hours,
        dry_run=False,
        enforce_retention_duration=not force,
        full=True,  # also the files of writes that never committed, not only the log's removals
        commit_properties=commit_properties(),
    )
    return {"files_removed": len(removed)}
