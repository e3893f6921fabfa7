"""What a fitness silver table shows beside its rows, for its asset: its metadata (the columns
described, their lineage: ``columns.py``), its blocking checks (its rules: ``rules.py``) and, for
a table derived from other silver tables, the asset's settings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.checks.results import (
    check_results,
    check_specs,
    not_empty_result,
    not_empty_spec,
)
from lakehouse_assets.constants import SILVER, asset_key, asset_tags, writer_pool
from lakehouse_assets.fitness.names import FITNESS, FITNESS_OWNERS
from lakehouse_assets.fitness.silver.columns import DESCRIPTIONS, LINEAGE
from lakehouse_assets.fitness.silver.rules import RULES
from lakehouse_assets.profiling.store import profile_after_write
from lakehouse_assets.refinement.changes import SILVER_ASSET
from lakehouse_assets.table_metadata import code_references, table_metadata
from resources import LakeResource
from resources.delta import PartitionFilters


def derived_asset(
    table: str, upstream: Sequence[str], transform: Callable[..., Any], *checks: dg.AssetCheckSpec
) -> dict[str, Any]:
    """The ``dg.asset`` arguments of ``silver.<table>``, computed by ``transform`` from the silver
    ``upstream`` tables' changes (``refinement.changes``): its rules' checks, ``checks``, and
    that it is not empty while its upstream is not."""
    key = asset_key(SILVER, table)
    return {
        "key": key,
        "pool": writer_pool(SILVER, table),
        "deps": [asset_key(SILVER, t) for t in upstream],
        "check_specs": [*check_specs(key, RULES[table]), *checks, not_empty_spec(key)],
        "metadata": code_references(transform=transform),
        **SILVER_ASSET,
        "owners": FITNESS_OWNERS,
        "tags": asset_tags(SILVER, FITNESS),
    }


def derived_result(
    lake: LakeResource,
    spark: SparkSession,
    table: str,
    upstream: Sequence[str],
    batch: DataFrame | None,
    written: PartitionFilters | None = None,
    checks: Sequence[dg.AssetCheckResult] = (),
    **metadata: Any,
) -> dg.MaterializeResult:
    """The materialization of ``silver.<table>`` after a run: its metadata (``metadata`` among
    it) and profile, its rules' checks (``checks.results.check_results`` of ``written`` and
    ``batch``), ``checks``, and whether it has rows while its ``upstream`` tables have."""
    key = asset_key(SILVER, table)
    return dg.MaterializeResult(
        metadata={
            **table_metadata(lake, SILVER, table, DESCRIPTIONS[table], lineage=LINEAGE.get(table)),
            **metadata,
            **profile_after_write(lake, spark, SILVER, table),
        },
        check_results=[
            *check_results(lake, spark, SILVER, table, RULES[table], written=written, batch=batch),
            *checks,
            not_empty_result(lake, key, [asset_key(SILVER, t) for t in upstream]),
        ],
    )
