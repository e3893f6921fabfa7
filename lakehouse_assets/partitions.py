"""Partitions: gold tables are partitioned by UTC day, so backfills run from the asset graph."""

from datetime import timedelta

import dagster as dg

# The first day a gold partition exists for; earlier data is not reported.
GOLD_START_DATE = "2025-01-01"

# end_offset=1: today is a partition too, updated as its data arrives.
daily_partitions = dg.DailyPartitionsDefinition(
    start_date=GOLD_START_DATE, timezone="UTC", end_offset=1
)

# Late data changes recent days: gold follows silver for the last week of partitions by itself;
# older days are refreshed by a backfill from the asset graph.
GOLD_AUTOMATION_LOOKBACK = timedelta(days=7)
gold_automation = dg.AutomationCondition.eager().replace(
    "in_latest_time_window",
    dg.AutomationCondition.in_latest_time_window(lookback_delta=GOLD_AUTOMATION_LOOKBACK),
)
# Silver follows bronze as soon as bronze has new data.
silver_automation = dg.AutomationCondition.eager()
