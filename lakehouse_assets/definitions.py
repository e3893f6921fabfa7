"""The one Definitions object of the lakehouse: the fitness pipeline, the sources declared in the
defs tree (``lakehouse_assets/defs``, ``components.Source``) and in a ``LAKEHOUSE_SOURCES``
folder, and the jobs over them all."""

import logging
import warnings
from collections.abc import Sequence

import dagster as dg

from lakehouse_assets.components.project import declared_sources, project_tree
from lakehouse_assets.components.source import Source
from lakehouse_assets.constants import BRONZE, GOLD, QUARANTINE_SUFFIX, SILVER
from lakehouse_assets.executor import threaded_executor
from lakehouse_assets.fitness.pipeline import fitness_pipeline
from lakehouse_assets.pipeline import tables_by_layer
from lakehouse_assets.schedules.maintenance import maintenance_definitions
from lakehouse_assets.schedules.profiles import profile_job, profile_schedule
from lakehouse_assets.sources.declaration.model import ROUTE, SourceDeclaration
from lakehouse_assets.table_metadata import with_table_names
from resources import build_resources, sensor_settings
from resources.settings import schema_prefix, sources_dir

log = logging.getLogger(__name__)
REPLAY_JOB = "replay_quarantine"


def lakehouse_definitions(
    sources: Sequence[SourceDeclaration] = (), tree: dg.ComponentTree | None = None
) -> dg.Definitions:
    """The lakehouse's definitions: the fitness pipeline's, those of ``sources`` and those the
    defs ``tree`` builds (its ``Source`` components' among them), and the jobs over them all."""
    settings = sensor_settings()
    components = tree.get_all_components(of_type=Source) if tree else []
    declared = [*[Source.of(source) for source in sources], *components]
    pipelines = [fitness_pipeline(settings), *[source.pipeline for source in declared]]
    tables = tables_by_layer(pipelines)
    z_order = {t: c for pipeline in pipelines for t, c in pipeline.z_order.items()}
    listers = [lister for pipeline in pipelines for lister in pipeline.listers]
    maintenance_jobs, maintenance_schedules = maintenance_definitions(tables, listers, z_order)
    profiles = profile_job(tables)
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
        minimum_interval_seconds=settings.interval_s,
    )
    assets = [asset for pipeline in pipelines for asset in pipeline.assets]
    # Every silver table rebuilt from all of its upstream (the run config of each silver asset).
    silver = silver_steps(assets, [source.declaration for source in declared])
    rebuild_job = dg.define_asset_job(
        "silver_full_refresh",
        dg.AssetSelection.assets(*silver),
        config={"ops": {asset.op.name: {"config": {"full_refresh": True}} for asset in silver}},
        description="Rebuild every silver table from all of its upstream, each replaced in one "
        "commit (readers see the old table until then); gold follows by its automation.",
    )
    replayable = [asset for asset in silver if quarantine_of(asset)]
    replay_job = dg.define_asset_job(
        REPLAY_JOB,
        dg.AssetSelection.assets(*replayable),
        config={"ops": {asset.op.name: {"config": {"replay": {}}} for asset in replayable}},
        description="Replay quarantines: each step's open quarantined records parsed again "
        "from bronze by today's rules and declarations; those that pass reach the table (as if "
        "they had arrived in order) and are marked replayed, the others stay open with their new "
        "reason. Select one source's step to replay its quarantine alone, and choose records by "
        "`reason` (a SQL LIKE pattern), `since` and `until` (when bronze ingested them) in its "
        "`replay` config. `lakehouse replay <source>` runs it from a shell.",
    )
    fitness = pipelines[0]
    project = dg.Definitions(
        assets=with_table_names(fitness.assets, schema_prefix()),
        asset_checks=fitness.freshness_checks,
        jobs=[refresh_job, gold_job, rebuild_job, replay_job, *maintenance_jobs.values(), profiles],
        schedules=[*maintenance_schedules, profile_schedule(profiles)],
        sensors=[*fitness.sensors, automation_sensor],
        resources=build_resources(as_env_vars=True),
        # Every step of a run in a thread of the run's own process, independent ones at once.
        executor=threaded_executor,
    )
    # The tree's Source components build their own definitions; the folder's sources alike.
    built = [source.definitions() for source in declared if source not in components]
    return dg.Definitions.merge(project, *built, *([tree.build_defs()] if tree else []))


def silver_steps(
    assets: Sequence[dg.AssetsDefinition | dg.AssetSpec], sources: Sequence[SourceDeclaration]
) -> list[dg.AssetsDefinition]:
    """The silver steps that rebuild their tables and replay their quarantines on request; a
    route-by-type source's excepted (its routed tables are merged by id)."""
    routers = {f"silver_{source.name}" for source in sources if source.mode == ROUTE}
    return [
        asset
        for asset in assets
        if isinstance(asset, dg.AssetsDefinition)
        and SILVER in asset.group_names_by_key.values()
        and asset.node_def.name not in routers
    ]


def replayable_steps() -> list[dg.AssetsDefinition]:
    """The silver steps of the definitions that replay a quarantine."""
    sources = [*declarations, *(c.declaration for c in defs_tree.get_all_components(Source))]
    return [step for step in silver_steps(all_assets, sources) if quarantine_of(step)]


def quarantine_of(asset: dg.AssetsDefinition) -> str | None:
    """The quarantine table a silver step writes, if it writes one."""
    names = [key.path[-1] for key in asset.keys]
    return next((name for name in names if name.endswith(QUARANTINE_SUFFIX)), None)


defs_tree = project_tree()
with warnings.catch_warnings():  # Dagster's loader warns of its own preview functions
    warnings.simplefilter("ignore", dg.PreviewWarning)
    declarations, declaration_errors = declared_sources(sources_dir(), defs_tree)
    defs = lakehouse_definitions(declarations, defs_tree)
for error in declaration_errors:  # the other sources still load
    log.error("Declared source not loaded: %s", error)
all_assets = [asset for asset in defs.assets or () if isinstance(asset, dg.AssetsDefinition)]
