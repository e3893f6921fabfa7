"""The lake resource: where the Delta tables live (``<root>/<layer>/<table>``), and the calls that
need that configuration, in parts by what they touch (``lake_location``, ``lake_log``,
``lake_data``). Delta Lake for Spark reads and writes every table (``resources.delta``); delta-rs
reads their logs where no Spark is needed (``resources.delta_log``)."""

from __future__ import annotations

from resources.delta import Markers
from resources.lake_data import LakeData
from resources.lake_log import LakeStatistics

__all__ = ["LakeResource", "Markers"]


class LakeResource(LakeStatistics, LakeData):
    """Where the lake lives and how its Delta tables are read and written."""
