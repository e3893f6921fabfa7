"""Partitions: gold tables are partitioned by UTC day, so backfills run from the asset graph."""

import dagster as dg

# The first day a gold partition exists for; earlier data is not reported.
GOLD_START_DATE = "2025-01-01"

daily_partitions = dg.DailyPartitionsDefinition(start_date=GOLD_START_DATE, timezone="UTC")
