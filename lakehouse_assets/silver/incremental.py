"""What every fitness silver asset shares: its run's options and its asset settings. Each reads
only the upstream changes since its last run, exactly once (``refinement.read_changes``)."""

from typing import Any

import dagster as dg
from pydantic import Field

from lakehouse_assets.automation import silver_automation
from lakehouse_assets.constants import (
    FITNESS,
    FITNESS_OWNERS,
    SILVER,
    asset_tags,
)

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
