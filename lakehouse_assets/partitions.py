"""Partitions: gold tables are partitioned by UTC day, so backfills run from the asset graph."""

import os
from datetime import date, timedelta

import dagster as dg

from resources import ENV_GOLD_START_DATE

DEFAULT_GOLD_START_DATE = "2025-01-01"


def gold_start_date(environ: dict[str, str] | None = None) -> str:
    """The first day a gold partition exists for (``LAKEHOUSE_GOLD_START_DATE``, ISO date);
    data of earlier days is not reported."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_GOLD_START_DATE) or DEFAULT_GOLD_START_DATE
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError as error:
        raise ValueError(
            f"{ENV_GOLD_START_DATE} must be an ISO date like 2023-03-01, got {value!r}"
        ) from error


# end_offset=1: today is a partition too, updated as its data arrives.
daily_partitions = dg.DailyPartitionsDefinition(
    start_date=gold_start_date(), timezone="UTC", end_offset=1
)

# Dagster's eager condition forgets an upstream update once the asset's own materialization lands
# after it, even one from a run that had already read its upstream: bronze committing while a
# silver run reads would leave its rows unread until bronze commits again. Here only a request of
# the asset clears an update it has seen, so an update seen while the asset runs gets a run of its
# own afterwards (which finds nothing new if the running one read it after all).
handled_by_request = (
    dg.AutomationCondition.newly_requested() | dg.AutomationCondition.initial_evaluation()
).with_label("handled by a request")
# A stream sensor's run selects the tables that follow its bronze table (sensors/chain.py), and
# Dagster's any_deps_updated leaves out an upstream write made by a run that selected the asset,
# though the run may have ended before the asset's step (cancelled, its worker killed past its
# retries): the asset's failure in such a run is then a reason of its own to run. Only a stream
# run's: a run automation launched and that failed is not retried by automation again.
STREAM_TAG = "lakehouse/stream"
failed_in_a_stream_run = (
    dg.AutomationCondition.execution_failed().newly_true()
    & dg.AutomationCondition.executed_with_tags(tag_keys={STREAM_TAG})
).with_label("failed in a stream's run")
eager = (
    dg.AutomationCondition.eager()
    .replace("handled", handled_by_request)
    .replace("any_deps_updated", dg.AutomationCondition.any_deps_updated() | failed_in_a_stream_run)
    .with_label("eager, until requested")
)

# Late data changes recent days: gold follows silver for the last week of partitions by itself;
# older days are refreshed by a backfill from the asset graph.
GOLD_AUTOMATION_LOOKBACK = timedelta(days=7)
# Neither follows an upstream table whose blocking checks failed.
checks_passed = dg.AutomationCondition.all_deps_blocking_checks_passed()
gold_automation = (
    eager.replace(
        "in_latest_time_window",
        dg.AutomationCondition.in_latest_time_window(lookback_delta=GOLD_AUTOMATION_LOOKBACK),
    )
    & checks_passed
)
# Silver follows bronze as soon as bronze has new data.
silver_automation = eager & checks_passed
