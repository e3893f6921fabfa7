"""A bronze stream's position has one owner (bronze/position.py): no other module reads or writes
its checkpoint's records but ``lake_migrations.py``, which carries the markers of earlier
versions' streams over."""

from __future__ import annotations

import ast
from pathlib import Path

REPO_ROOT = Path(__file__).parents[2]
# What resources/checkpoints.py reads or writes of a stream's checkpoint.
CHECKPOINT_RECORDS = {
    "committed_offsets", "files_read", "kafka_caught_up", "landing_caught_up",
    "recorded_cluster", "record_cluster", "set_aside", "query_id",
}  # fmt: skip
OWNERS = {"lakehouse_assets/bronze/position.py", "lakehouse_assets/lake_migrations.py"}


def checkpoint_readers(path: Path) -> set[str]:
    """The checkpoint records ``path`` names, from ``resources.checkpoints`` or through it."""
    named = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "resources.checkpoints":
            named |= {alias.name for alias in node.names} & CHECKPOINT_RECORDS
        elif isinstance(node, ast.Attribute) and node.attr in CHECKPOINT_RECORDS:
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            named |= {node.attr} if owner == "checkpoints" else set()
    return named


def test_only_the_owner_reads_a_streams_checkpoint() -> None:
    readers = {
        str(path.relative_to(REPO_ROOT)): names
        for package in ("lakehouse_assets", "lakehouse_tools")
        for path in (REPO_ROOT / package).rglob("*.py")
        if (names := checkpoint_readers(path))
    }
    assert set(readers) == OWNERS, readers
