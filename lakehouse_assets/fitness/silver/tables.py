"""What a fitness silver table shows beside its rows, for its asset: its metadata (the columns
described, their lineage: ``columns.py``), its blocking checks (its rules: ``rules.py``) and, for
a table derived from other silver tables, the asset's settings."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.automation import silver_automation
from lakehouse_assets.checks.results import check_results, check_specs, not_empty_spec
from lakehouse_assets.constants import SILVER, asset_key, asset_tags, writer_pool
from lakehouse_assets.fitness.names import FITNESS, FITNESS_OWNERS
from lakehouse_assets.fitness.silver.columns import DESCRIPTIONS, LINEAGE
from lakehouse_assets.fitness.silver.rules import RULES
from lakehouse_assets.refinement.changes import SILVER_KINDS
from lakehouse_assets.table_metadata import code_references, table_metadata
from resources import LakeResource
from resources.delta import PartitionFilters


def silver_metadata(lake: LakeResource, table: str) -> dict[str, Any]:
    """``silver.<table>``'s materialization metadata."""
    return table_metadata(lake, SILVER, table, DESCRIPTIONS[table], lineage=LINEAGE.get(table))


def silver_check_specs(table: str) -> list[dg.AssetCheckSpec]:
    """The checks ``silver.<table>``'s rules make."""
    return check_specs(asset_key(SILVER, table), RULES[table])


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
        "check_specs": [*silver_check_specs(table), *checks, not_empty_spec(key)],
        "metadata": code_references(transform=transform),
        "group_name": SILVER,
        "kinds": SILVER_KINDS,
        "automation_condition": silver_automation,
        "owners": FITNESS_OWNERS,
        "tags": asset_tags(SILVER, FITNESS),
    }


def silver_check_results(
    lake: LakeResource,
    spark: SparkSession,
    table: str,
    written: PartitionFilters | None = None,
    batch: DataFrame | None = None,
) -> list[dg.AssetCheckResult]:
    """``silver.<table>``'s checks after a write (``checks.results.check_results``)."""
    return check_results(lake, spark, SILVER, table, RULES[table], written=written, batch=batch)
