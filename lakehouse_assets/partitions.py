"""Partitions: gold tables are partitioned by UTC day, so backfills run from the asset graph."""

import os
from datetime import date

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
