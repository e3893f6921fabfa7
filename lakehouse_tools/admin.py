"""The ``lakehouse`` commands that look after the lake's tables and the source declarations:
``migrate`` (tables of earlier layouts, every table registered in the catalog), ``sources`` (list
and check the declarations), ``replay`` (a source's quarantine), ``profile`` (print a table's
column profile), ``sql`` (a query on the catalog), and ``produce-sample`` (the sample sources for
the documented `make dev` path)."""

from __future__ import annotations

import os
import sys
import warnings
from typing import TYPE_CHECKING, Any

from resources import ENV_AS_OF_DATE, ENV_KAFKA_BOOTSTRAP_SERVERS, ENV_LAKEHOUSE_ROOT, object_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse_assets.refinement.parsed_table import ParsedTable
    from resources import LakeResource


def migrate(verbose: bool = False) -> None:
    """Take over a lake written by earlier versions (see ``lakehouse_assets.migrations``), on the
    configured lake and Spark: check every table with Delta Lake for Spark, upgrade the tables of
    earlier layouts, carry the streams' markers over, rebuild the tables whose rule changed.
    ``verbose``: a local Spark prints its log."""
    from lakehouse_assets import lake_migrations, migrations
    from lakehouse_assets.fitness.upgrades import UPGRADES
    from resources import build_resources

    resources = build_resources(quiet=not verbose)
    lake = resources["lake"]
    object_store.check_root(lake.root_uri)
    spark = resources["spark"].get_session()
    try:
        protocols = lake_migrations.table_protocols(spark, lake)
        print(f"Delta Lake for Spark reads the {len(protocols)} tables of {lake.root_uri}:")
        print("\n".join(f"  {line}" for line in protocols))
        for upgrade in migrations.pending(lake, UPGRADES):
            version = migrations.migrate(spark, lake, upgrade)
            rows = lake.row_count(upgrade.layer, upgrade.table)
            print(f"{upgrade.layer}.{upgrade.table}: {upgrade.change} ({rows} rows, "
                  f"version {version})")  # fmt: skip
    except migrations.MigrationError as error:
        sys.exit(str(error))
    for schema, old, new in lake_migrations.relocate_schemas(resources["spark"].metastore, lake):
        print(f"{schema}: kept in {new} in the catalog, no longer in {old}")
    for name in lake_migrations.register_tables(spark, lake):
        print(f"{name}: registered in the catalog")
    for table, batch in lake_migrations.carry_stream_markers(spark, lake).items():
        print(f"bronze.{table}: its stream's batch {batch} recorded for Delta's streaming sink")
    for table in _rebuild_incomplete(resources):
        print(f"silver.{table}: rebuilt from bronze (it lacked rows this version keeps)")
    print("The lake is up to date with this version.")


def sql(query: str, max_rows: int, verbose: bool = False) -> None:
    """Run ``query`` on the configured Spark (the Connect server of ``SPARK_REMOTE``, else a
    local one on ``LAKEHOUSE_METASTORE``) and print its first ``max_rows`` rows as a table.
    ``verbose``: a local Spark prints its log."""
    from pyspark.errors import PySparkException

    from resources import build_resources

    spark = build_resources(quiet=not verbose)["spark"].get_session()
    try:
        spark.sql(query).show(max_rows, truncate=False)
    except PySparkException as error:
        sys.exit(str(error).split("\n\nJVM stacktrace:")[0])


def _rebuild_incomplete(resources: dict[str, Any]) -> list[str]:
    """Rebuild (a full refresh, recorded in the Dagster instance of ``DAGSTER_HOME`` when set)
    each parsed silver table that lacks rows all of bronze gives it; returns their names."""
    import dagster as dg

    from lakehouse_assets.constants import SILVER, asset_key
    from lakehouse_assets.fitness.silver.assets import silver_assets
    from lakehouse_assets.fitness.silver.parsed import PARSED_TABLES

    lake, spark = resources["lake"], resources["spark"].get_session()
    incomplete = [spec for spec in PARSED_TABLES if keys_missing(lake, spark, spec)]
    if not incomplete:
        return []
    home = os.environ.get("DAGSTER_HOME")
    with dg.DagsterInstance.get() if home else dg.DagsterInstance.ephemeral() as instance:
        for spec in incomplete:
            asset = next(a for a in silver_assets if asset_key(SILVER, spec.table) in a.keys)
            refresh = {"ops": {asset.op.name: {"config": {"full_refresh": True}}}}
            dg.materialize([asset], resources=resources, instance=instance, run_config=refresh)
    return [spec.table for spec in incomplete]


def keys_missing(lake: LakeResource, spark: SparkSession, spec: ParsedTable) -> int:
    """How many keys the parsed silver table of ``spec`` lacks that all of bronze gives it (one
    query): more than 0 when an earlier version's rule kept fewer rows (``migrate`` rebuilds it
    then); 0 without the silver table or its bronze table (nothing to rebuild from)."""
    from lakehouse_assets.constants import BRONZE, SILVER
    from lakehouse_assets.refinement.parsed_table import all_rows

    if not lake.exists(SILVER, spec.table) or not lake.exists(BRONZE, spec.source):
        return 0
    expected = all_rows(spec, spec.parse(lake.read(spark, BRONZE, spec.source)))
    held = lake.read(spark, SILVER, spec.table).select(*spec.keys)
    return expected.select(*spec.keys).join(held, list(spec.keys), "left_anti").count()


def sources() -> None:
    """List the declared sources: the defs tree's (``components.Source``) and those of the
    ``LAKEHOUSE_SOURCES`` folder; exit 1 naming every invalid one."""
    import dagster as dg

    from lakehouse_assets.components.project import declared_sources, project_tree
    from lakehouse_assets.components.source import Source
    from lakehouse_assets.sources.declaration.errors import InvalidDeclaration
    from resources.settings import sources_dir

    folder, tree = sources_dir(), project_tree()
    try:
        with warnings.catch_warnings():  # Dagster's loader warns of its own preview functions
            warnings.simplefilter("ignore", dg.PreviewWarning)
            declared, errors = declared_sources(folder, tree)
            components = [c.declaration for c in tree.get_all_components(of_type=Source)]
    except Exception as error:  # Dagster wraps a component's own error in its own
        invalid = error
        while invalid is not None and not isinstance(invalid, InvalidDeclaration):
            invalid = invalid.__cause__
        if invalid is None:
            raise
        sys.exit(str(invalid))
    for source in [*components, *declared]:
        origin = source.topic or f"/{source.topic_pattern}/"
        origin = f"landing/{source.name}/" if source.format == "csv" else origin
        print(f"{source.name}: {origin} ({source.format}, {source.mode})")
    print(
        f"{len(components)} sources declared in {tree.defs_module_path}, {len(declared)} in "
        f"{folder}, {len(errors)} files not loaded"
    )
    if errors:
        sys.exit("\n".join(str(error) for error in errors))


def profile(layer: str, table: str, verbose: bool = False) -> None:
    """Print the column profile of ``<layer>.<table>`` (and keep it in its profiles table).
    ``verbose``: a local Spark prints its log."""
    from lakehouse_assets.profiling.report import format_profile
    from lakehouse_assets.profiling.store import take_profile
    from resources import build_resources

    resources = build_resources(quiet=not verbose)
    lake = resources["lake"]
    object_store.check_root(lake.root_uri)
    if not lake.exists(layer, table):
        sys.exit(f"No Delta table at {lake.table_uri(layer, table)} (LAKEHOUSE_ROOT={lake.root})")
    spark = resources["spark"].get_session()
    print(
        f"{layer}.{table} at {lake.table_uri(layer, table)}, version {lake.version(layer, table)}"
    )
    print(format_profile(take_profile(lake, spark, layer, table)))


def produce_sample(users: int, days: int) -> None:
    """The sample sources for the documented `make dev` path: the events into the configured
    Kafka and the landing files into the lake, over the ``days`` up to the as-of date (the days
    gold's automation keeps up to date by itself)."""
    from datetime import timedelta

    from lakehouse_assets.constants import LANDING_DIR
    from lakehouse_tools import sample_data
    from resources import CalendarResource
    from resources.settings import DEFAULT_KAFKA_BOOTSTRAP_SERVERS, DEFAULT_LAKEHOUSE_ROOT

    last = CalendarResource(as_of_date=os.environ.get(ENV_AS_OF_DATE) or None).today()
    sample = sample_data.generate(users, days, first_day=last - timedelta(days=days - 1))
    root = object_store.absolute(os.environ.get(ENV_LAKEHOUSE_ROOT, DEFAULT_LAKEHOUSE_ROOT))
    object_store.check_root(root)
    sample_data.write_landing(root, sample.files)
    servers = os.environ.get(ENV_KAFKA_BOOTSTRAP_SERVERS, DEFAULT_KAFKA_BOOTSTRAP_SERVERS)
    counts = sample_data.produce(servers, sample.messages)
    print(f"Produced into {servers}: {counts}")
    print(f"Wrote {len(sample.files)} landing files under {root}/{LANDING_DIR}")


def replay(
    source: str, reason: str | None, since: str | None, until: str | None, verbose: bool = False
) -> None:
    """Replay the quarantine of ``source`` (its bronze table's name): a run of the
    ``replay_quarantine`` job on the source's silver step alone, recorded in the Dagster instance
    of ``DAGSTER_HOME`` when set (and waiting there for the step's pool, so that it never writes
    beside the stream's own run). Prints what it did; exits 1 when the run fails. ``verbose``:
    a local Spark prints its log."""
    import dagster as dg

    from lakehouse_assets.definitions import REPLAY_JOB, quarantine_of, replayable_steps
    from lakehouse_assets.refinement.replay_log import REPLAY_COUNTS
    from resources import build_resources

    steps = replayable_steps()
    step = next((s for s in steps if quarantine_of(s) == f"{source}_quarantine"), None)
    if step is None:
        names = ", ".join(sorted(str(quarantine_of(s)).removesuffix("_quarantine") for s in steps))
        sys.exit(f"No source {source!r} has a quarantine to replay; those that do: {names}")
    chosen = {"reason": reason, "since": since, "until": until}
    config = {"replay": {name: value for name, value in chosen.items() if value}}
    # The step on the settings of now (the definitions' resources are of their import).
    job = dg.define_asset_job(REPLAY_JOB, [step])
    resources = build_resources(quiet=not verbose)
    defined = dg.Definitions(assets=[step], jobs=[job], resources=resources)
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        print("DAGSTER_HOME is not set: the replay is recorded nowhere and waits for no pool; "
              "a run of the same step must not write meanwhile", file=sys.stderr)  # fmt: skip
    with dg.DagsterInstance.get() if home else dg.DagsterInstance.ephemeral() as instance:
        result = defined.resolve_job_def(REPLAY_JOB).execute_in_process(
            run_config={"ops": {step.op.name: {"config": config}}},
            instance=instance,
            raise_on_error=False,
        )
    if not result.success:
        failures = result.get_step_failure_events()
        why = failures[0].step_failure_data.error if failures else None
        message = why.message.strip() if why else "see the run's log"
        sys.exit(f"The replay of {source} failed (run {result.run_id}): {message}")
    quarantine = next(
        m for m in result.asset_materializations_for_node(step.op.name)
        if m.asset_key.path[-1] == f"{source}_quarantine"
    )  # fmt: skip
    counts = {name: quarantine.metadata.get(name) for name in REPLAY_COUNTS}
    replayed, still = [count.value if count else 0 for count in counts.values()]
    print(f"{source}: {replayed} quarantined records replayed into the table, {still} rejected "
          f"again (left open, with their new reason); run {result.run_id}")  # fmt: skip
