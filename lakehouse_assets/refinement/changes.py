"""What a silver table has not consumed of its upstream, exactly once: every silver asset reads
its upstream's changes through ``read_changes`` and commits them with the marker it returns.

A silver table records, in the same Delta commit as its data, the upstream version it consumed
(a transaction marker ``{"silver.<table><-<layer>.<upstream>": version}``; a table that reads
several upstream tables records all of its markers in that one commit: ``resources.delta_log``).
The next run reads the upstream change data feed after that version; a re-run after a crash
reads the same changes again, and the markers keep every table from taking them twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import dagster as dg
from pydantic import Field
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.automation import silver_automation
from lakehouse_assets.constants import SILVER, consumer_app_id
from resources import LakeResource
from resources.codegen import fit_code_generation
from resources.lake import Markers

# What every silver asset declares of itself, whatever computes it.
SILVER_ASSET = {
    "group_name": SILVER,
    "kinds": {"spark", "delta"},
    "automation_condition": silver_automation,
}


class SilverConfig(dg.Config):
    """Options of one run of a silver asset."""

    full_refresh: bool = Field(
        default=False,
        description="Rebuild the table from all of its upstream, replacing it in one commit "
        "(readers see the old table until then).",
    )


@dataclass(frozen=True)
class Changes:
    """The upstream changes a run reads: ``rows``, the ``markers`` its writes commit with them,
    and whether there are any the table has not consumed (``fresh``; always with ``everything``)."""

    rows: DataFrame
    markers: Markers
    fresh: bool
    size: int = 0  # about how many rows ``rows`` reads, from the log (``fit_code_generation``)

    @property
    def upstream_version(self) -> int:
        """The upstream version the changes reach."""
        return next(iter(self.markers.values()))

    @property
    def reached(self) -> str:
        """The upstream version the changes reach, as the UI shows it (``-``: a replay's, which
        reads records already consumed)."""
        return str(self.upstream_version) if self.markers else "-"


def read_changes(
    lake: LakeResource,
    spark: SparkSession,
    table: str,
    upstream: tuple[str, str],
    everything: bool = False,
    with_change_type: bool = False,
    held: Mapping[str, int | None] | None = None,
) -> Changes:
    """The changes of ``upstream`` (layer, table) that ``silver.<table>`` has not consumed yet
    (all its rows when ``everything``), with the change feed's kind of change when
    ``with_change_type``. ``held``: the markers' versions the table holds, when the caller read
    them (``LakeResource.committed_versions``). The session's code generation fits their size
    (``resources.codegen.fit_code_generation``; a step reading several upstream tables fits it
    to their sum after)."""
    app_id = consumer_app_id(table, upstream)
    consumed = lake.committed_version(SILVER, table, app_id) if held is None else held[app_id]
    since = None if everything else consumed
    rows, version = lake.changes_since(spark, *upstream, since, with_change_type)
    fresh = version != consumed or everything
    size = lake.rows_changed(*upstream, since) if fresh else 0
    fit_code_generation(spark, size)
    return Changes(rows, {app_id: version}, fresh, size)
