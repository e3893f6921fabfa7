"""The one Definitions object of the lakehouse: the fitness pipeline and the declared sources."""

import functools
import logging
from collections.abc import Sequence

import dagster as dg

from lakehouse_assets.bronze.assets import bronze_kafka_assets, bronze_landing_assets
from lakehouse_assets.checks.freshness import kafka_freshness_check, landing_freshness_check
from lakehouse_assets.constants import (
    BRONZE,
    BRONZE_TABLES,
    GOLD,
    KAFKA_TOPICS,
    LANDING_COLUMNS,
    SILVER,
    SILVER_TABLES,
)
from lakehouse_assets.executor import threaded_executor
from lakehouse_assets.gold.assets import gold_assets
from lakehouse_assets.schedules.maintenance import LAYER_TABLES, maintenance_definitions
from lakehouse_assets.schedules.profiles import profile_job, profile_schedule
from lakehouse_assets.sensors.streams import SETTINGS, stream_sensors
from lakehouse_assets.silver.assets import silver_assets
from lakehouse_assets.sources.assets import (
    source_assets,
    source_freshness_checks,
    source_sensors,
    source_tables,
)
from lakehouse_assets.sources.declarations import (
    ROUTE,
    SourceDeclaration,
    load_declarations,
)
from lakehouse_assets.sources.route_assets import routed_tables
from resources import build_resources
from resources.settings import sources_dir

log = logging.getLogger(__name__)
fitness_assets = [*bronze_kafka_assets, *bronze_landing_assets, *silver_assets, *gold_assets]
fitness_freshness_checks = [
    *[kafka_freshness_check(topic) for topic in KAFKA_TOPICS],
    *[landing_freshness_check(source) for source in LANDING_COLUMNS],
]


def lakehouse_definitions(sources: Sequence[SourceDeclaration] = ()) -> dg.Definitions:
    """The lakehouse's definitions, with the assets, sensors and maintenance of ``sources``."""
    extra_tables: dict[str, list[str]] = {}
    for source in sources:
        for layer, tables in source_tables(source).items():
            extra_tables.setdefault(layer, []).extend(tables)
    routed = [source.name for source in sources if source.mode == ROUTE]
    listers = [functools.partial(routed_tables, source=name) for name in routed]
    maintenance_jobs, maintenance_schedules = maintenance_definitions(extra_tables, listers)
    profiles = profile_job(
        {layer: [*tables, *extra_tables.get(layer, ())] for layer, tables in LAYER_TABLES.items()}
    )
    # Bronze and silver are not partitioned: one run brings them up to date.
    refresh_job = dg.define_asset_job(
        "refresh_bronze_and_silver", dg.AssetSelection.groups(BRONZE, SILVER)
    )
    # Gold is partitioned by day (the job takes its assets' partitions): one run per day, or one
    # run for a range (single-run backfill).
    gold_job = dg.define_asset_job("gold_reports", dg.AssetSelection.groups(GOLD))
    # Silver and gold follow bronze through their automation conditions; this sensor evaluates
    # them.
    automation_sensor = dg.AutomationConditionSensorDefinition(
        "lakehouse_automation",
        target=dg.AssetSelection.all(),
        default_status=dg.DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=SETTINGS.interval_s,
    )
    declared = [asset for source in sources for asset in source_assets(source)]
    # Every silver table rebuilt from all of its upstream (the run config of each silver asset).
    # (A route-by-type source's routed tables are merged by id, not rebuilt.)
    routers = {f"silver_{name}" for name in routed}
    silver = [
        asset
        for asset in [*silver_assets, *declared]
        if isinstance(asset, dg.AssetsDefinition)
        and SILVER in asset.group_names_by_key.values()
        and asset.node_def.name not in routers
    ]
    rebuild_job = dg.define_asset_job(
        "silver_full_refresh",
        dg.AssetSelection.assets(*silver),
        config={"ops": {asset.op.name: {"config": {"full_refresh": True}} for asset in silver}},
        description="Rebuild every silver table from all of its upstream, each replaced in one "
        "commit (readers see the old table until then); gold follows by its automation.",
    )
    return dg.Definitions(
        assets=[*fitness_assets, *declared],
        asset_checks=[
            *fitness_freshness_checks,
            *[check for source in sources for check in source_freshness_checks(source)],
        ],
        jobs=[refresh_job, gold_job, rebuild_job, *maintenance_jobs.values(), profiles],
        schedules=[*maintenance_schedules, profile_schedule(profiles)],
        sensors=[
            *stream_sensors,
            *[sensor for source in sources for sensor in source_sensors(source, SETTINGS)],
            automation_sensor,
        ],
        resources=build_resources(as_env_vars=True),
        # Every step of a run in a thread of the run's own process, independent ones at once.
        executor=threaded_executor,
    )


declarations, declaration_errors = load_declarations(
    sources_dir(), reserved=[*BRONZE_TABLES, *SILVER_TABLES]
)
for error in declaration_errors:  # the other sources still load
    log.error("Declared source not loaded: %s", error)
defs = lakehouse_definitions(declarations)
all_assets = [asset for asset in defs.assets or () if isinstance(asset, dg.AssetsDefinition)]
