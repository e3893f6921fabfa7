"""What every silver step shares (``step_asset``): its two tables' specs and checks, the
quarantine's write (carrying the changes' markers, so that a re-run after a crash takes no record
twice), what a run did (``Refinement``) and how both tables report it (``refined_results``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.checks.results import (
    not_empty_result,
    not_empty_spec,
    quarantine_rate_result,
    quarantine_rate_spec,
)
from lakehouse_assets.constants import BRONZE, QUARANTINE_SUFFIX, SILVER, asset_key
from lakehouse_assets.migrations import Upgrade, require_current
from lakehouse_assets.profiling.store import profile_after_write
from lakehouse_assets.refinement.replay import open_quarantine, replays_table
from lakehouse_assets.refinement.replay_log import clear_replays
from lakehouse_assets.validation import REASON
from resources import LakeResource
from resources.lake import Markers


def quarantine_table(source: str) -> str:
    """The quarantine table of bronze table ``source``: ``<source>_quarantine``."""
    return f"{source}{QUARANTINE_SUFFIX}"


def write_quarantine(
    lake: LakeResource,
    source: str,
    rejects: DataFrame,
    markers: Markers,
    rebuild: bool = False,
    count: int | None = None,
    upgrade: Upgrade | None = None,
) -> int:
    """Append ``rejects`` (quarantine rows: ``validation``) to the quarantine of ``source`` with
    ``markers``; with ``rebuild``, replace the table with them. Returns how many it took: none
    when a commit with ``markers`` already holds them (a re-run). ``count``: how many rows
    ``rejects`` has, when the caller knows (else they are counted); ``upgrade``: the table's, if an
    earlier version wrote it in another layout (``migrations``). The first batch creates the
    table, empty if need be, so that its readers find it."""
    table = quarantine_table(source)
    if not rebuild:
        if lake.holds(SILVER, table, markers):
            return 0
        require_current(lake, upgrade)
    if count is None:  # computed once, for the count and the write
        rejects = rejects.localCheckpoint(eager=True)
        count = rejects.count()
    if rebuild:
        # The replay log first: a rebuild stopped between the two leaves open records that a
        # replay already brought in (a replay takes them once again), never hides a record it
        # quarantined behind an earlier replay's row.
        clear_replays(lake, rejects.sparkSession, source)
        lake.replace(SILVER, table, rejects, markers)
    elif count or not lake.exists(SILVER, table):
        lake.append(SILVER, table, rejects, markers=markers)
    return count


def refined_specs(
    table: str, source: str, description: str | None, **common: Any
) -> list[dg.AssetSpec]:
    """The assets of a step: ``silver.<table>`` (``description``) and the source's quarantine,
    both from ``bronze.<source>``; ``common``: what else both specs have."""
    deps = {"deps": [asset_key(BRONZE, source)], **common}
    return [
        dg.AssetSpec(asset_key(SILVER, table), description=description, **deps),
        dg.AssetSpec(
            asset_key(SILVER, quarantine_table(source)),
            description=f"Rejected `{source}` records: original bytes (`raw`) and their "
            "readable text (`raw_text`), reason, coordinates.",
            **deps,
        ),
    ]


def refined_check_specs(
    table: str, source: str, rules: Sequence[dg.AssetCheckSpec] = ()
) -> list[dg.AssetCheckSpec]:
    """The checks of a step: the table's ``rules``, that it is not empty while bronze is not,
    and the quarantine's rate."""
    return [
        *rules,
        not_empty_spec(asset_key(SILVER, table)),
        quarantine_rate_spec(asset_key(SILVER, quarantine_table(source))),
    ]


@dataclass
class Refinement:
    """What a run of a step did, as its assets show it: the records it ``read`` and those it
    ``rejected``, and, for the table and the quarantine, their metadata and check results."""

    read: int = 0
    rejected: int = 0
    metadata: Mapping[str, Any] = field(default_factory=dict)
    checks: Sequence[dg.AssetCheckResult] = ()
    quarantine_metadata: Mapping[str, Any] = field(default_factory=dict)
    # How the quarantine's open records changed per reason from its version
    # ``quarantine_before`` (and, for a ``replay``, its replay log's ``replays_before``): the
    # rejects the run appended, or the records the replay brought in (negative) and those it
    # rejected again under their new reason; None when it wrote it otherwise (a rebuild) or
    # the caller did not count them.
    open_change: Mapping[str, int] | None = None
    quarantine_before: int | None = None
    replay: bool = False
    replays_before: int | None = None


OPEN_RECORDS, OPEN_BY_REASON = "open_records", "open_by_reason"
# The version of the quarantine's replay log its open records were counted at.
REPLAYS_VERSION = "replays_version"


def open_records(
    context: dg.AssetExecutionContext, lake: LakeResource, spark: SparkSession, source: str,
    version: Any, done: Refinement,
) -> dict[str, Any]:  # fmt: skip
    """How many records the quarantine of ``source`` holds open (not replayed), in all and per
    reason, as metadata, with no query when its last materialization recorded them: as they
    were, when the quarantine and its replay log are still at the versions it recorded
    (``delta_version``, ``replays_version``); with the run's change (``done.open_change``: its
    rejects, or its replay's outcome) from those versions. Else they are counted (one query)."""
    table = quarantine_table(source)
    event = context.instance.get_latest_materialization_event(asset_key(SILVER, table))
    last = event.asset_materialization.metadata if event and event.asset_materialization else {}
    replays = _version_text(lake.version(SILVER, replays_table(source)))
    last_state = (last.get("delta_version"), last.get(REPLAYS_VERSION))
    before = (
        _version_text(done.quarantine_before),
        _version_text(done.replays_before) if done.replay else replays,
    )
    known = last.get(OPEN_BY_REASON)
    counts: dict[str, int] | None = None
    if isinstance(known, dg.JsonMetadataValue) and isinstance(known.data, dict):
        if last_state == (version, replays):
            counts = dict(known.data)
        elif done.open_change is not None and last_state == before:
            counts = dict(known.data)
            for reason, count in done.open_change.items():
                counts[reason] = counts.get(reason, 0) + count
            counts = {reason: count for reason, count in counts.items() if count}
    if counts is None and done.open_change is not None and done.quarantine_before is None:
        counts = dict(done.open_change)  # the run made the table
    if counts is None:
        rows = open_quarantine(lake, spark, source)
        grouped = rows.groupBy(REASON).count().collect() if rows is not None else []
        counts = {row[REASON]: row["count"] for row in grouped}
    ranked = dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    return {
        OPEN_RECORDS: sum(ranked.values()),
        OPEN_BY_REASON: dg.MetadataValue.json(ranked),
        **({REPLAYS_VERSION: replays} if replays is not None else {}),
    }


def _version_text(version: int | None) -> dg.TextMetadataValue | None:
    return dg.MetadataValue.text(str(version)) if version is not None else None


def refined_results(
    context: dg.AssetExecutionContext,
    lake: LakeResource,
    spark: SparkSession,
    table: str,
    source: str,
    done: Refinement,
) -> Iterator[dg.MaterializeResult]:
    """The materializations of a step's two tables after a run (``done``): each with its
    metadata and profile; the table with its checks and whether it has rows, the quarantine
    with the share of the records it took and the records it holds open."""
    key, quarantine = asset_key(SILVER, table), quarantine_table(source)
    quarantine_key = asset_key(SILVER, quarantine)
    yield dg.MaterializeResult(
        asset_key=key,
        metadata={**done.metadata, **profile_after_write(lake, spark, SILVER, table)},
        check_results=[
            *done.checks,
            not_empty_result(lake, key, [asset_key(BRONZE, source)]),
        ],
    )
    yield dg.MaterializeResult(
        asset_key=quarantine_key,
        metadata={
            **done.quarantine_metadata,
            **open_records(
                context, lake, spark, source, done.quarantine_metadata.get("delta_version"), done
            ),
            **profile_after_write(lake, spark, SILVER, quarantine),
        },
        check_results=[quarantine_rate_result(quarantine_key, done.rejected, done.read)],
    )
