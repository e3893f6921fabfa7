"""The one Definitions object of the lakehouse."""

import dagster as dg

from lakehouse_assets.bronze.assets import bronze_kafka_assets, bronze_landing_assets
from lakehouse_assets.constants import BRONZE, GOLD, SILVER
from lakehouse_assets.gold.assets import gold_assets
from lakehouse_assets.partitions import daily_partitions
from lakehouse_assets.schedules.maintenance import maintenance_jobs, maintenance_schedules
from lakehouse_assets.sensors.streams import SETTINGS, stream_sensors
from lakehouse_assets.silver.assets import silver_assets
from resources import build_resources

# Bronze and silver are not partitioned: one run brings them up to date.
refresh_job = dg.define_asset_job(
    "refresh_bronze_and_silver", dg.AssetSelection.groups(BRONZE, SILVER)
)
# Gold is partitioned by day: one run per day, or one run for a range (single-run backfill).
gold_job = dg.define_asset_job(
    "gold_reports", dg.AssetSelection.groups(GOLD), partitions_def=daily_partitions
)

all_assets = [*bronze_kafka_assets, *bronze_landing_assets, *silver_assets, *gold_assets]

# Silver and gold follow bronze through their automation conditions; this sensor evaluates them.
automation_sensor = dg.AutomationConditionSensorDefinition(
    "lakehouse_automation",
    target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=SETTINGS.interval_s,
)

defs = dg.Definitions(
    assets=all_assets,
    jobs=[refresh_job, gold_job, *maintenance_jobs.values()],
    schedules=maintenance_schedules,
    sensors=[*stream_sensors, automation_sensor],
    resources=build_resources(),
    # One Spark session per run: every step of a run executes in the run's own process.
    executor=dg.in_process_executor,
)
