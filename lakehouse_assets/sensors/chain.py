"""What a stream's run materializes besides its bronze table: the tables that would follow it by
automation, in the same run. A record then reaches gold in one run, not in one run per layer
each waiting in the queue; declarative automation still runs everything else (backfills, tables
whose upstream changed by other means).

Dagster's automation does not run a table again for an upstream update made by a run that also
selected the table (``AutomationCondition.any_deps_updated`` leaves those out). Two runs may
both select a table (two streams' chains meet at ``silver/workout_bpm``); its pool, named for the
table, lets one of them write it at a time.
"""

import functools
from collections.abc import Callable
from datetime import timedelta

import dagster as dg
from dagster._core.definitions.assets.graph.base_asset_graph import BaseAssetGraph

from lakehouse_assets.automation import GOLD_AUTOMATION_LOOKBACK
from lakehouse_assets.checks.results import failed_upstream_checks
from lakehouse_assets.partitions import daily_partitions

RANGE_START = "dagster/asset_partition_range_start"
RANGE_END = "dagster/asset_partition_range_end"


def following(
    graph: BaseAssetGraph, root: dg.AssetKey, ready: Callable[[dg.AssetKey], bool]
) -> list[dg.AssetKey]:
    """``root`` and the assets after it that its run materializes, in the graph's order: those
    with an automation condition, unpartitioned or partitioned by day (as gold), each of whose
    upstream assets is in the run or ``ready`` (materialized, its blocking checks passed). An
    asset with an upstream that is not waits for automation, which waits for that upstream; so
    does one whose step writes other assets the run would not take whole (a router that also
    reads another stream)."""
    left_out: set[dg.AssetKey] = set()
    while True:
        chain = [root]
        for key in graph.toposorted_asset_keys:
            node = graph.get(key)
            if (
                key != root
                and key not in left_out
                and node.automation_condition is not None
                and node.partitions_def in (None, daily_partitions)
                and any(parent in chain for parent in node.parent_keys)
                and all(parent in chain or ready(parent) for parent in node.parent_keys)
            ):
                chain.append(key)
        partial = {
            key
            for key in chain[1:]
            if not {
                k
                for k in graph.get_execution_set_asset_and_check_keys(key)
                if isinstance(k, dg.AssetKey)
            }
            <= set(chain)
        }
        if not partial:
            return chain
        left_out |= partial


def automation_window(lookback: timedelta = GOLD_AUTOMATION_LOOKBACK) -> tuple[str, str] | None:
    """The first and last day automation keeps gold up to date (``in_latest_time_window`` with
    gold's lookback: the days ending within ``lookback`` of the end of the latest day)."""
    latest = daily_partitions.get_last_partition_window()
    if latest is None:
        return None
    start = max(latest.end - lookback, daily_partitions.start)
    keys = daily_partitions.get_partition_keys_in_time_window(dg.TimeWindow(start, latest.end))
    return (keys[0], keys[-1]) if keys else None


def chain_request(
    context: dg.SensorEvaluationContext, key: dg.AssetKey, tags: dict[str, str]
) -> dg.RunRequest:
    """The run of ``key``'s stream and what follows it (``following``); the stream alone when
    the sensor runs outside a code location (no asset graph to follow)."""
    repository = context.repository_def
    if repository is None:
        return dg.RunRequest(asset_selection=[key], tags=tags)
    graph, instance = repository.asset_graph, context.instance

    @functools.cache
    def ready(upstream: dg.AssetKey) -> bool:
        materialized = instance.get_latest_materialization_event(upstream) is not None
        return materialized and not failed_upstream_checks(instance, [upstream])

    chain = following(graph, key, ready)
    if any(graph.get(k).partitions_def is not None for k in chain):
        window = automation_window()
        if window is None:
            chain = [k for k in chain if graph.get(k).partitions_def is None]
        else:
            tags = {**tags, RANGE_START: window[0], RANGE_END: window[1]}
    return dg.RunRequest(asset_selection=chain, tags=tags)
