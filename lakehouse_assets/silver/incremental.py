"""What every silver asset shares: its run's options, its asset settings, and reading only the
upstream changes since its last run, exactly once.

A silver table records, in the same Delta commit as its data, the upstream version it consumed
(a transaction marker ``{"silver.<table><-<layer>.<upstream>": version}``). The next run reads
the upstream change data feed after that version; a re-run after a crash reads the same changes
again and the markers keep every table from taking them twice.
"""

from typing import Any

import dagster as dg
from pydantic import Field
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.automation import silver_automation
from lakehouse_assets.constants import (
    FITNESS,
    FITNESS_OWNERS,
    SILVER,
    asset_tags,
    consumer_app_id,
)
from resources import LakeResource
from resources.lake import Markers

SILVER_KINDS = {"spark", "delta"}
SILVER_ASSET: dict[str, Any] = {
    "group_name": SILVER,
    "kinds": SILVER_KINDS,
    "automation_condition": silver_automation,
    "owners": FITNESS_OWNERS,
    "tags": asset_tags(SILVER, FITNESS),
}


class SilverConfig(dg.Config):
    """Options of one run of a silver asset."""

    full_refresh: bool = Field(
        default=False,
        description="Rebuild the table from all of its upstream, replacing it in one commit "
        "(readers see the old table until then).",
    )


def read_changes(
    lake: LakeResource,
    spark: SparkSession,
    table: str,
    upstream: tuple[str, str],
    everything: bool = False,
) -> tuple[DataFrame, Markers, bool]:
    """The changes of ``upstream`` that ``silver.<table>`` has not consumed yet (all its rows
    when ``everything``), the marker to commit with them, and whether there are any (False: the
    table is up to date)."""
    app_id = consumer_app_id(table, upstream)
    consumed = lake.committed_version(SILVER, table, app_id)
    changes, version = lake.changes_since(spark, *upstream, None if everything else consumed)
    return changes, {app_id: version}, version != consumed or everything
