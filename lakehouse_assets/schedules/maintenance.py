"""Nightly maintenance of every table: OPTIMIZE (compaction, Z-order where configured), then
VACUUM. Each table's files and bytes before and after are recorded as an observation of its
asset, so the UI shows them beside the table's materializations; a quarantine's replay log
(``refinement.replay``) is maintained with it, observed on the quarantine's asset."""

from collections.abc import Callable, Mapping, Sequence

import dagster as dg
from pydantic import Field

from lakehouse_assets.constants import (
    BRONZE,
    GOLD,
    QUARANTINE_SUFFIX,
    REPLAYS_SUFFIX,
    SILVER,
    asset_key,
)
from resources import LakeResource, SparkResource
from resources.maintenance import SAFE_RETENTION_HOURS, optimize, vacuum

# What lists, when maintenance runs, the tables a pipeline adds as it runs (e.g. a route-by-type
# source's, one per type it met): each as ``(table, asset key, partition)``.
TableLister = Callable[[dg.DagsterInstance], list[tuple[str, dg.AssetKey, str]]]
LAYERS = (BRONZE, SILVER, GOLD)


class MaintenanceConfig(dg.Config):
    """How a maintenance run treats the tables of its layer."""

    target_file_size_mb: int = Field(default=128, description="OPTIMIZE's target file size.")
    retention_hours: int = Field(
        default=SAFE_RETENTION_HOURS, description="VACUUM keeps files younger than this."
    )
    force: bool = Field(
        default=False, description="Allow a retention below the safe minimum of 7 days."
    )


def maintenance_job(
    layer: str,
    tables: Sequence[str],
    listers: Sequence[TableLister] = (),
    z_order: Mapping[str, Sequence[str]] | None = None,
) -> dg.JobDefinition:
    """The job optimizing and vacuuming every existing table of ``tables`` in ``layer``, and the
    tables ``listers`` list when it runs (each a partition of its asset); a table named in
    ``z_order`` is Z-ordered by its columns there, the others bin-packed."""
    z_order = z_order or {}

    @dg.op(name=f"maintain_{layer}_tables")
    def maintain(
        context: dg.OpExecutionContext,
        config: MaintenanceConfig,
        spark: SparkResource,
        lake: LakeResource,
    ) -> None:
        targets = [(table, asset_key(layer, table), None) for table in tables]
        for lister in listers:
            targets += lister(context.instance)
        targets += [
            (f"{table}{REPLAYS_SUFFIX}", key, partition)
            for table, key, partition in targets
            if table.endswith(QUARANTINE_SUFFIX)
        ]
        for table, key, partition in targets:
            if not lake.exists(layer, table):
                continue
            session = spark.get_session()
            size = config.target_file_size_mb * 1024 * 1024
            columns = z_order.get(table, ())
            compacted = optimize(session, lake, layer, table, size, columns)
            vacuumed = vacuum(session, lake, layer, table, config.retention_hours, config.force)
            context.log_event(
                dg.AssetObservation(
                    asset_key=key,
                    partition=partition,
                    metadata={
                        "table": f"{layer}.{table}",
                        "files_before": compacted["before"]["files"],
                        "files_after": compacted["after"]["files"],
                        "bytes_before": compacted["before"]["bytes"],
                        "bytes_after": compacted["after"]["bytes"],
                        "z_order": ", ".join(columns) or "-",
                        "files_vacuumed": vacuumed["files_removed"],
                    },
                )
            )

    @dg.job(name=f"maintain_{layer}", tags={"lakehouse/maintenance": layer})
    def _job() -> None:
        maintain()

    return _job


def maintenance_definitions(
    tables: Mapping[str, Sequence[str]],
    silver_listers: Sequence[TableLister] = (),
    z_order: Mapping[str, Sequence[str]] | None = None,
) -> tuple[dict[str, dg.JobDefinition], list[dg.ScheduleDefinition]]:
    """The maintenance job of each layer (its ``tables``; silver's also the tables
    ``silver_listers`` list, e.g. a route-by-type source's; Z-ordered by ``z_order``), and their
    nightly schedules, running from the start."""
    jobs = {
        layer: maintenance_job(
            layer, tables.get(layer, ()), silver_listers if layer == SILVER else (), z_order
        )
        for layer in LAYERS
    }
    # Every night, bronze first (the layer the streams write most often), then silver, then gold;
    # on by default, as the sensors are: a table the user never toggled still gets compacted.
    schedules = [
        dg.ScheduleDefinition(
            job=jobs[layer],
            cron_schedule=cron,
            execution_timezone="UTC",
            default_status=dg.DefaultScheduleStatus.RUNNING,
        )
        for layer, cron in ((BRONZE, "0 2 * * *"), (SILVER, "30 2 * * *"), (GOLD, "0 3 * * *"))
    ]
    return jobs, schedules
