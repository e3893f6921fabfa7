"""What the fitness pipeline's derived silver assets share: their asset settings. Each reads only
the upstream changes since its last run, exactly once (``refinement.changes``)."""

from typing import Any

from lakehouse_assets.automation import silver_automation
from lakehouse_assets.constants import SILVER, asset_tags
from lakehouse_assets.fitness.names import FITNESS, FITNESS_OWNERS
from lakehouse_assets.refinement.changes import SILVER_KINDS

SILVER_ASSET: dict[str, Any] = {
    "group_name": SILVER,
    "kinds": SILVER_KINDS,
    "automation_condition": silver_automation,
    "owners": FITNESS_OWNERS,
    "tags": asset_tags(SILVER, FITNESS),
}
