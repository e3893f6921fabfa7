"""Schemas of its own for each lake a benchmark makes (``LAKEHOUSE_SCHEMA_PREFIX``): a benchmark
registers its tables in a metastore of its own (``LAKEHOUSE_METASTORE``, set at the top of each
benchmark), and two lakes of one benchmark must not claim one name (docs/catalog.md)."""

from __future__ import annotations

import uuid

from resources.settings import ENV_SCHEMA_PREFIX


def lake_schemas() -> dict[str, str]:
    """The variable that gives a new lake schemas of its own."""
    return {ENV_SCHEMA_PREFIX: f"bench_{uuid.uuid4().hex[:8]}"}
