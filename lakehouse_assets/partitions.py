"""Partitions: gold tables are partitioned by UTC day, so backfills run from the asset graph."""

import dagster as dg

from resources.settings import gold_start_date

# end_offset=1: today is a partition too, updated as its data arrives.
daily_partitions = dg.DailyPartitionsDefinition(
    start_date=gold_start_date(), timezone="UTC", end_offset=1
)
