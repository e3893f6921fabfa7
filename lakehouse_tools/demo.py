"""`lakehouse demo`: sample data through the whole asset graph on the embedded defaults (its own
broker and Spark Connect server unless the environment names them), then the row counts and
both gold reports. ``materialize_graph`` runs the graph for tests and benchmarks too."""

from __future__ import annotations

import functools
import os
import time
from datetime import date
from typing import TYPE_CHECKING, Any

from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.service import local_service
from lakehouse_tools.spark_server import SparkConnectServer
from resources import (
    ENV_KAFKA_BOOTSTRAP_SERVERS,
    ENV_LAKEHOUSE_ROOT,
    ENV_SPARK_REMOTE,
    catalog,
    files,
    object_store,
)
from resources.catalog import DEMO_MARKER, disposable
from resources.settings import ENV_SCHEMA_PREFIX

if TYPE_CHECKING:
    import dagster as dg
    from pyspark.sql import SparkSession

NAME_WIDTH = 40  # of the table column in the printed row counts
# The demo's lake when LAKEHOUSE_ROOT is unset: its own, apart from `lake`, which `make dev` and
# `produce-sample` fill from `make broker`'s broker (another cluster than the demo's).
DEMO_LAKE = "demo-lake"
DEMO_PREFIX = "demo"  # its schemas' prefix when another lake holds the plain names


def prepare_demo_lake(root: str, embedded: bool) -> None:
    """Reset a lake (a folder or an object store's URI) left by an earlier demo on the embedded
    broker; never touch any other lake.

    Each demo starts a new embedded broker (in a temporary folder), so the checkpoints of an
    earlier embedded demo point at offsets the new broker does not have.
    """
    if not embedded:
        return
    marker = f"{root}/{DEMO_MARKER}"
    if not files.is_empty(root):
        if files.read_text(marker) is None:
            raise SystemExit(
                f"The lake at {root} was not made by an embedded-broker demo, and its stream "
                "checkpoints would not match the demo's new broker. Set LAKEHOUSE_ROOT to an "
                "empty folder, or KAFKA_BOOTSTRAP_SERVERS to the Kafka this lake was filled from."
            )
        print(f"Resetting the demo lake at {root} (the demo's broker starts empty)")
        files.delete_folder(root)
    files.write_text(marker, "made by `lakehouse demo` on the embedded broker\n")


def demo(users: int, days: int) -> None:
    """Sample data through the whole asset graph; prints row counts and both gold reports."""
    from lakehouse_tools import sample_data
    from resources import build_resources

    root = object_store.absolute(os.environ.setdefault(ENV_LAKEHOUSE_ROOT, DEMO_LAKE))
    object_store.check_root(root)
    prepare_demo_lake(root, embedded=ENV_KAFKA_BOOTSTRAP_SERVERS not in os.environ)
    with (
        local_service(ENV_KAFKA_BOOTSTRAP_SERVERS, EmbeddedBroker) as bootstrap_servers,
        local_service(ENV_SPARK_REMOTE, SparkConnectServer),
    ):
        sample = sample_data.generate(users, days)
        sample_data.write_landing(root, sample.files)
        counts = sample_data.produce(bootstrap_servers, sample.messages)
        print(f"Sample data: {counts} Kafka records, {len(sample.files)} landing files")
        started = time.monotonic()
        resources = build_resources()  # after the embedded broker set KAFKA_BOOTSTRAP_SERVERS
        if demo_needs_prefix(resources["spark"].get_session(), root):
            resources = build_resources()
        results = materialize_graph(resources)
        print(f"Materialized the asset graph in {time.monotonic() - started:.1f} s")
        for result in results:
            print_row_counts(result)
        if not all(result.success for result in results):
            raise SystemExit("A run failed; see the log above.")
        print_gold_reports(resources)
        resources["spark"].get_session().stop()  # releases the session while the server runs


def demo_needs_prefix(spark: SparkSession, root: str) -> bool:
    """When another lake's tables hold the plain names (``gold.<table>``) in the catalog and no
    prefix is set, give the demo's schemas the prefix ``demo`` (``LAKEHOUSE_SCHEMA_PREFIX``)
    and say so; returns whether it did."""
    from lakehouse_assets.table_metadata import LAYERS

    if os.environ.get(ENV_SCHEMA_PREFIX):
        return False
    for layer in LAYERS:
        for name, found in catalog.schema_tables(spark, layer).items():
            location = catalog.plain_location(found.location)
            if not location.startswith(catalog.plain_location(root) + "/") and not disposable(
                location
            ):
                os.environ[ENV_SCHEMA_PREFIX] = DEMO_PREFIX
                print(f"{layer}.{name} names a table of another lake ({location}): the demo's "
                      f"tables are {DEMO_PREFIX}_bronze.<table>, {DEMO_PREFIX}_silver.<table> "
                      f"and {DEMO_PREFIX}_gold.<table>")  # fmt: skip
                return True
    return False


def materialize_graph(
    resources: dict[str, Any],
    days: tuple[date, date] | None = None,
    instance: dg.DagsterInstance | None = None,
) -> list[dg.ExecuteInProcessResult]:
    """Bronze and silver in one run, then gold for ``days`` (first, last; by default every day
    silver holds) in one run."""
    import dagster as dg

    from lakehouse_assets.constants import BRONZE, GOLD, SILVER
    from lakehouse_assets.definitions import all_assets
    from lakehouse_assets.executor import materialize

    instance = instance or dg.DagsterInstance.ephemeral()
    logging = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
    run = functools.partial(
        materialize, all_assets, instance=instance, resources=resources, run_config=logging
    )
    results = [run(selection=dg.AssetSelection.groups(BRONZE, SILVER))]
    days = days or silver_days(resources)
    if days:
        tags = {
            "dagster/asset_partition_range_start": days[0].isoformat(),
            "dagster/asset_partition_range_end": days[1].isoformat(),
        }
        results.append(run(selection=dg.AssetSelection.groups(GOLD), tags=tags))
    return results


def silver_days(resources: dict[str, Any]) -> tuple[date, date] | None:
    """The first and last day of the workouts and gym visits silver holds."""
    from pyspark.sql import functions as F

    from lakehouse_assets.constants import SILVER
    from lakehouse_assets.fitness.names import COMPLETED_WORKOUTS, GYM_LOGS

    spark, lake = resources["spark"].get_session(), resources["lake"]
    days = (
        lake.read(spark, SILVER, COMPLETED_WORKOUTS)
        .select(F.to_date("start_time").alias("day"))
        .unionByName(lake.read(spark, SILVER, GYM_LOGS).select(F.to_date("login").alias("day")))
        .agg(F.min("day"), F.max("day"))
        .first()
    )
    return (days[0], days[1]) if days and days[0] else None


def print_gold_reports(resources: dict[str, Any]) -> None:
    """Print both gold tables."""
    from lakehouse_assets.constants import GOLD
    from lakehouse_assets.fitness.names import GYM_SUMMARY, WORKOUT_BPM_SUMMARY

    spark, lake = resources["spark"].get_session(), resources["lake"]
    for table, order in ((WORKOUT_BPM_SUMMARY, ["date", "user_id", "workout_id", "session_id"]),
                         (GYM_SUMMARY, ["date", "gym", "mac_address"])):  # fmt: skip
        report = lake.read(spark, GOLD, table).orderBy(*order)
        print(f"\n{GOLD}.{table} ({report.count()} rows)")
        report.show(report.count(), truncate=False)


def print_row_counts(result: dg.ExecuteInProcessResult) -> None:
    """Print ``layer.table  rows  seconds`` for each table a run materialized: its latest row
    count and the wall time of the step that wrote it."""
    seconds = step_seconds(result)
    latest = {e.asset_key: e for e in _materializations(result) if e.asset_key}
    print(f"{'table':<{NAME_WIDTH}}{'rows':>12}{'seconds':>10}")
    for key in sorted(latest, key=lambda k: k.to_user_string()):
        event = latest[key]
        rows = event.materialization.metadata.get("dagster/row_count")
        took = seconds.get(event.step_key or "")
        print(
            f"{'.'.join(key.path):<{NAME_WIDTH}}{rows.value if rows else '-':>12}"
            f"{'-' if took is None else f'{took:.1f}':>10}"
        )


def step_seconds(result: dg.ExecuteInProcessResult) -> dict[str, float]:
    """The wall time of each step of a run that succeeded, by step key."""
    return {
        event.step_key: event.step_success_data.duration_ms / 1000
        for event in result.get_step_success_events()
        if event.step_key
    }


def _materializations(result: dg.ExecuteInProcessResult) -> list[dg.DagsterEvent]:
    return [e for e in result.get_asset_materialization_events() if e.materialization]
