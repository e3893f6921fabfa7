"""The one Definitions object of the lakehouse."""

import dagster as dg

from lakehouse_assets.bronze.assets import bronze_kafka_assets, bronze_landing_assets
from resources import build_resources

defs = dg.Definitions(
    assets=[*bronze_kafka_assets, *bronze_landing_assets],
    resources=build_resources(),
    # One Spark session per run: every step of a run executes in the run's own process.
    executor=dg.in_process_executor,
)
