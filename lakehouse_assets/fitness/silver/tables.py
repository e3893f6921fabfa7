"""What a fitness silver table shows beside its rows, for its asset: its metadata (the columns
described, their lineage: ``columns.py``) and its blocking checks (its rules: ``rules.py``)."""

from __future__ import annotations

from typing import Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.checks.results import check_results, check_specs
from lakehouse_assets.constants import SILVER, asset_key
from lakehouse_assets.fitness.silver.columns import DESCRIPTIONS, LINEAGE
from lakehouse_assets.fitness.silver.rules import RULES
from lakehouse_assets.table_metadata import table_metadata
from resources import LakeResource
from resources.delta import PartitionFilters


def silver_metadata(lake: LakeResource, table: str) -> dict[str, Any]:
    """``silver.<table>``'s materialization metadata."""
    return table_metadata(lake, SILVER, table, DESCRIPTIONS[table], lineage=LINEAGE.get(table))


def silver_check_specs(table: str) -> list[dg.AssetCheckSpec]:
    """The checks ``silver.<table>``'s rules make."""
    return check_specs(asset_key(SILVER, table), RULES[table])


def silver_check_results(
    lake: LakeResource,
    spark: SparkSession,
    table: str,
    written: PartitionFilters | None = None,
    batch: DataFrame | None = None,
) -> list[dg.AssetCheckResult]:
    """``silver.<table>``'s checks after a write (``checks.results.check_results``)."""
    return check_results(lake, spark, SILVER, table, RULES[table], written=written, batch=batch)
