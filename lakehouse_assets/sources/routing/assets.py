"""The Dagster side of a ``route-by-type`` source: bronze streams of its notices (and locations),
one silver run routing each batch, and ``silver/<name>``, an asset with one dynamic partition per
``<domain>/<topic>/<type>`` whose materializations show each routed table and its row count."""

import functools
from collections.abc import Iterator
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.bronze.assets import kafka_bronze_asset
from lakehouse_assets.checks.freshness import kafka_freshness_check
from lakehouse_assets.checks.results import quarantine_rate_result, quarantine_rate_spec
from lakehouse_assets.constants import BRONZE, SILVER, asset_key, asset_tags, writer_pool
from lakehouse_assets.pipeline import Pipeline
from lakehouse_assets.refinement.changes import SILVER_ASSET, read_changes
from lakehouse_assets.refinement.step import quarantine_table
from lakehouse_assets.refinement.step_asset import StepConfig, StepRun
from lakehouse_assets.sensors.streams import kafka_lag_sensor
from lakehouse_assets.sources.declaration.model import SourceDeclaration
from lakehouse_assets.sources.declaration.routing import table_name
from lakehouse_assets.sources.routing.route import (
    Routed,
    index_table,
    locations_table,
    route,
    routing_of,
    update_locations,
)
from lakehouse_assets.table_metadata import code_references, table_metadata
from lakehouse_assets.validation import QUARANTINE
from resources import DocumentStoreResource, LakeResource, SensorSettings, SparkResource

KINDS = {"spark", "delta", "postgres"}


def types_partitions(source: str) -> dg.DynamicPartitionsDefinition:
    """One partition per routed table, ``<domain>/<topic>/<type>``, added when first seen."""
    return dg.DynamicPartitionsDefinition(name=f"{source}_types")


def routed_tables(instance: dg.DagsterInstance, source: str) -> list[tuple[str, dg.AssetKey, str]]:
    """``(table, asset key, partition)`` of each table the source ``source`` routed to so far."""
    partitions = instance.get_dynamic_partitions(types_partitions(source).name or "")
    key = asset_key(SILVER, source)
    return [(table_name(*partition.split("/", 2)), key, partition) for partition in partitions]


def routed_tables_spec(source: SourceDeclaration) -> dg.AssetSpec:
    """``silver/<name>``: the routed tables, one partition each (materialized by the router)."""
    return dg.AssetSpec(
        asset_key(SILVER, source.name),
        description=f"The documents of `{source.name}`, one Delta table per domain, topic and "
        "type (`silver/<domain>_<topic>_<type>`; this asset's partition "
        "`<domain>/<topic>/<type>`), merged by `_id`, nested fields flattened with `__`, with "
        "`month` and the user's location ids. Written by `silver_" + source.name + "`.",
        deps=[asset_key(SILVER, index_table(source))],
        group_name=SILVER,
        kinds={"delta"},
        partitions_def=types_partitions(source.name),
        owners=list(source.owners) or None,
        tags=asset_tags(SILVER, source.name),
    )


def router_asset(source: SourceDeclaration) -> dg.AssetsDefinition:
    """``silver/<name>_documents`` (the index), the quarantine and the location hierarchy, and
    the routed tables, from the source's bronze notices and locations."""
    routing = routing_of(source)
    deps = [asset_key(BRONZE, source.name)]
    common: dict[str, Any] = {
        **SILVER_ASSET, "kinds": KINDS,
        "owners": list(source.owners) or None, "tags": asset_tags(SILVER, source.name),
        "metadata": code_references(route=route),
    }  # fmt: skip
    specs = [
        dg.AssetSpec(
            asset_key(SILVER, index_table(source)),
            description=f"Where each `{source.name}` document is (`_table`), as of which notice "
            "(`_sequence`), and whether it was deleted: finds the table of a hard delete, and "
            "keeps an older notice arriving late from undoing a newer one.",
            deps=deps, **common,
        ),
        dg.AssetSpec(
            asset_key(SILVER, quarantine_table(source.name)),
            description=f"Rejected `{source.name}` notices and documents: bytes, readable text, "
            "reason, Kafka coordinates.",
            deps=deps, **common,
        ),
    ]  # fmt: skip
    if routing.locations is not None:
        deps.append(asset_key(BRONZE, locations_table(source)))
        specs.append(
            dg.AssetSpec(
                asset_key(SILVER, locations_table(source)),
                description=f"The location hierarchy of `{source.name}` (the newest record per "
                "`location_id`): enriches each document with its user's location ids.",
                deps=[asset_key(BRONZE, locations_table(source))],
                **common,
            )
        )

    quarantine_key = asset_key(SILVER, quarantine_table(source.name))

    @dg.multi_asset(
        name=f"silver_{source.name}",
        pool=writer_pool(SILVER, source.name),
        specs=specs,
        check_specs=[quarantine_rate_spec(quarantine_key)],
    )
    def _asset(
        context: dg.AssetExecutionContext,
        spark: SparkResource,
        lake: LakeResource,
        documents: DocumentStoreResource,
    ) -> Iterator[dg.MaterializeResult]:
        session = spark.get_session()
        url = documents.checked_url(sorted({d.table for d in routing.documents.values()}))
        if routing.locations is not None:
            rejected = _refresh_locations(lake, session, source)
            if rejected:
                context.log.warning(
                    f"{rejected} location records quarantined in "
                    f"silver.{quarantine_table(source.name)}: see their reasons there"
                )
            yield dg.MaterializeResult(
                asset_key=asset_key(SILVER, locations_table(source)),
                metadata={
                    **table_metadata(lake, SILVER, locations_table(source), {}),
                    "records_rejected": rejected,
                },
            )
        done = Routed()
        if lake.exists(BRONZE, source.name):
            changes = read_changes(lake, session, index_table(source), (BRONZE, source.name))
            if changes.fresh:
                partitions = types_partitions(source.name).name or ""
                run = StepRun(context, lake, session, StepConfig(), changes)
                done = route(
                    run, source, url,
                    lambda keys: context.instance.add_dynamic_partitions(partitions, keys),
                )  # fmt: skip
                context.log.info(f"silver.{source.name}: {done.metadata()}")
        for materialization in _routed_materializations(lake, source, done):
            context.log_event(materialization)
        yield dg.MaterializeResult(
            asset_key=asset_key(SILVER, index_table(source)),
            metadata={**table_metadata(lake, SILVER, index_table(source), {}), **done.metadata()},
        )
        yield dg.MaterializeResult(
            asset_key=quarantine_key,
            metadata=table_metadata(lake, SILVER, quarantine_table(source.name), QUARANTINE),
            check_results=[quarantine_rate_result(quarantine_key, done.rejected, done.read)],
        )

    return _asset


def _refresh_locations(lake: LakeResource, spark: SparkSession, source: SourceDeclaration) -> int:
    """Bring the location hierarchy up to date with its bronze stream; returns the location
    records quarantined."""
    upstream = (BRONZE, locations_table(source))
    if lake.exists(*upstream):
        changes = read_changes(lake, spark, locations_table(source), upstream)
        if changes.fresh:
            return update_locations(lake, source, changes.rows, changes.markers)
    return 0


def _routed_materializations(
    lake: LakeResource, source: SourceDeclaration, done: Routed
) -> Iterator[dg.AssetMaterialization]:
    """A materialization of ``silver/<name>``'s partition for each routed table written."""
    for written in done.tables:
        if written.partition:
            yield dg.AssetMaterialization(
                asset_key=asset_key(SILVER, source.name),
                partition=written.partition,
                metadata={
                    **table_metadata(lake, SILVER, written.table, {}),
                    "rows_upserted": written.rows,
                    "rows_deleted": written.deleted,
                    "columns_added": ", ".join(written.added) or "-",
                },
            )


def route_pipeline(source: SourceDeclaration, settings: SensorSettings) -> Pipeline:
    """A route-by-type source as the definitions take every pipeline: the bronze streams of its
    notices (and locations), each with its lag sensor and freshness check, its router, and its
    tables (those it routes to, one per type met, are listed when maintenance runs)."""
    routing = routing_of(source)
    streams = [(source.name, [source.topic] if source.topic else [], source.topic_pattern)]
    if routing.locations is not None:
        streams.append((locations_table(source), [routing.locations.topic], None))
    bronze = [
        kafka_bronze_asset(
            source.name, streams[0][1], pattern=source.topic_pattern,
            description=source.description, owners=source.owners,
        ),
        *[kafka_bronze_asset(table, topics) for table, topics, _ in streams[1:]],
    ]  # fmt: skip
    silver = [index_table(source), quarantine_table(source.name)]
    if routing.locations is not None:
        silver.append(locations_table(source))
    return Pipeline(
        assets=[*bronze, router_asset(source), routed_tables_spec(source)],
        sensors=[kafka_lag_sensor(t, settings, topics, pattern) for t, topics, pattern in streams],
        freshness_checks=[kafka_freshness_check(*stream) for stream in streams],
        tables={BRONZE: [table for table, _, _ in streams], SILVER: silver},
        listers=[functools.partial(routed_tables, source=source.name)],
    )
