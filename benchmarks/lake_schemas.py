"""A benchmark's catalog of its own: its tables are registered in a metastore of its own, never
the user's (``own_metastore``, called at the top of each benchmark, before it starts a Spark),
and each lake it makes has schemas of its own (``lake_schemas``): two lakes of one benchmark must
not claim one name (docs/catalog.md)."""

from __future__ import annotations

import os
import tempfile
import uuid

from resources.settings import ENV_METASTORE, ENV_SCHEMA_PREFIX


def own_metastore() -> None:
    """Point ``LAKEHOUSE_METASTORE`` at a new embedded metastore, for every Spark the benchmark
    starts."""
    os.environ[ENV_METASTORE] = tempfile.mkdtemp(prefix="lakehouse-bench-metastore-")


def lake_schemas() -> dict[str, str]:
    """The variable that gives a new lake schemas of its own."""
    return {ENV_SCHEMA_PREFIX: f"bench_{uuid.uuid4().hex[:8]}"}
