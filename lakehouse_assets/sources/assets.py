"""The Dagster side of a declared source: its bronze and silver assets, its lag sensor and the
tables maintenance keeps, all from the declaration."""

import functools
from collections.abc import Iterator
from typing import Any

import dagster as dg
from pydantic import Field
from pyspark.sql import functions as F

from lakehouse_assets.automation import silver_automation
from lakehouse_assets.bronze.assets import kafka_bronze_asset, landing_bronze_asset
from lakehouse_assets.checks.expectation_results import (
    expectation_results,
    expectation_specs,
    fail_broken,
)
from lakehouse_assets.checks.freshness import kafka_freshness_check, landing_freshness_check
from lakehouse_assets.checks.results import check_results, check_specs, written_rows
from lakehouse_assets.constants import (
    BRONZE,
    SILVER,
    asset_key,
    asset_tags,
    writer_pool,
)
from lakehouse_assets.pipeline import Pipeline
from lakehouse_assets.profiling.store import profile_after_write
from lakehouse_assets.refinement.changes import SILVER_KINDS, Changes, read_changes
from lakehouse_assets.refinement.parsed import parsed_table_asset
from lakehouse_assets.refinement.replay import ReplayConfig, start_replay
from lakehouse_assets.refinement.replay_log import replay_metadata
from lakehouse_assets.refinement.step import (
    Refinement,
    quarantine_table,
    refined_check_specs,
    refined_results,
    refined_specs,
)
from lakehouse_assets.sensors.streams import kafka_lag_sensor, landing_sensor
from lakehouse_assets.sources.declaration.model import CDC_MODES, LANDING, ROUTE, SourceDeclaration
from lakehouse_assets.sources.decoding.reading import reinfer_schema, schema_path
from lakehouse_assets.sources.routing import assets as route_assets
from lakehouse_assets.sources.writing.columns import ADDED, field_description
from lakehouse_assets.sources.writing.fields import fields_table
from lakehouse_assets.sources.writing.refine import Refined, refine
from lakehouse_assets.sources.writing.rules import source_rules
from lakehouse_assets.sources.writing.transforms import CHANGE_TYPE
from lakehouse_assets.sources.writing.writes import deletes_table
from lakehouse_assets.table_metadata import code_references, table_metadata
from lakehouse_assets.validation import QUARANTINE_AND_REPLAYS
from resources import LakeResource, SensorSettings, SparkResource

MODE_DESCRIPTIONS = {
    "append": "Every valid record, typed",
    "latest-per-key": "The latest valid record of each Kafka key (the highest offset wins; a "
    "tombstone deletes the key's row)",
    "cdc-scd1": "The current row of each key, from the Debezium changes applied in their order "
    "(`_sequence`: the declared `order_by`, ties by offset; a delete removes the row, and a late "
    "older change never brings it back)",
    "cdc-scd2": "Every version of each key, from the Debezium changes in their order: valid from "
    "`valid_from` until `valid_to` (the next change's `order_by` value; null and `is_current` for "
    "the current version; a delete closes the last one)",
}


class DeclaredSilverConfig(dg.Config):
    """Options of one run of a declared source's silver asset."""

    full_refresh: bool = Field(
        default=False,
        description="Rebuild the silver tables from all of bronze, each replaced in one commit "
        "(readers see the old table until then).",
    )
    reinfer_schema: bool = Field(
        default=False,
        description="Infer the schema anew from the latest value per key in bronze, replacing "
        "the schema file, before reading the new records.",
    )
    replay: ReplayConfig | None = Field(
        default=None,
        description="Replay the source's quarantine instead of reading new records: its open "
        "records (those chosen here) read again from bronze with today's declaration; those that "
        "pass reach the table and are logged replayed, the others stay with their new reason.",
    )


def bronze_asset(source: SourceDeclaration) -> dg.AssetsDefinition:
    """``bronze/<name>``: the source's Kafka records as delivered (a csv source: the lines of
    the files dropped in ``landing/<name>/``)."""
    if source.format == LANDING:
        columns = [field.name for field in source.fields]
        return landing_bronze_asset(source.name, columns, owners=source.owners)
    return kafka_bronze_asset(
        source.name,
        [source.topic] if source.topic else [],
        pattern=source.topic_pattern,
        description=source.description,
        owners=source.owners,
    )


def silver_asset(source: SourceDeclaration) -> dg.AssetsDefinition:
    """``silver/<name>`` and ``silver/<name>_quarantine``, refined from ``bronze/<name>``."""
    shape = "flattened into <parent>_<child> columns" if source.flatten else "nested"
    common = {
        "group_name": SILVER,
        "kinds": SILVER_KINDS,
        "automation_condition": silver_automation,
        "owners": list(source.owners) or None,
        "tags": {**asset_tags(SILVER, source.name), "lakehouse/mode": source.mode},
        "metadata": code_references(refine=refine),
    }
    description = (
        f"{MODE_DESCRIPTIONS[source.mode]} of the declared source `{source.name}`, {shape}, "
        f"with the Kafka coordinates (`_kafka_*`). Schema: `{'/'.join(schema_path(source))}` "
        "under the lake root." + (f"\n\n{source.description}" if source.description else "")
    )
    specs = refined_specs(source.name, source.name, description, **common)
    if source.mode in CDC_MODES:
        specs.append(
            dg.AssetSpec(
                asset_key(SILVER, deletes_table(source)),
                description=f"The deletes applied to `silver.{source.name}`: keys, `_sequence` "
                "and Kafka coordinates, so that older changes arriving later are known as older.",
                deps=[asset_key(BRONZE, source.name)],
                **common,
            )
        )

    rules = source_rules(source)
    table_key = asset_key(SILVER, source.name)
    expectations = [declared.expectation() for declared in source.expectations]

    @dg.multi_asset(
        name=f"silver_{source.name}",
        pool=writer_pool(SILVER, source.name),
        specs=specs,
        check_specs=refined_check_specs(
            source.name,
            source.name,
            [*check_specs(table_key, rules), *expectation_specs(table_key, expectations)],
        ),
    )
    def _asset(
        context: dg.AssetExecutionContext,
        config: DeclaredSilverConfig,
        spark: SparkResource,
        lake: LakeResource,
    ) -> Iterator[dg.MaterializeResult]:
        session = spark.get_session()
        upstream, replayed = (BRONZE, source.name), None
        if config.replay is not None:
            replayed = start_replay(
                lake, session, source.name, config.replay, context.run_id, config.full_refresh,
                tombstones=source.mode == "latest-per-key",
            )  # fmt: skip
            records = replayed.records.withColumn(CHANGE_TYPE, F.lit("insert"))
            changes = Changes(records, {}, fresh=True)
        else:
            changes = read_changes(
                lake, session, source.name, upstream, config.full_refresh, with_change_type=True
            )
        metadata: dict[str, Any] = {"upstream_version": dg.MetadataValue.text(changes.reached)}
        done, created = Refined(), not lake.exists(SILVER, source.name)
        if config.reinfer_schema and lake.exists(BRONZE, source.name):
            reinfer_schema(lake, session, source)
        if changes.fresh or created:
            done = refine(
                lake, session, source, changes.rows, changes.markers, config.full_refresh, replayed
            )
            context.log.info(f"silver.{source.name}: {done.metadata()}")
            metadata.update(done.metadata())
        batch = written_rows(context, table_key, done.merged, created)
        descriptions = (ADDED, field_description(source))
        expected = expectation_results(
            lake, session, SILVER, source.name, expectations, done.expected
        )
        yield from refined_results(
            context,
            lake,
            session,
            source.name,
            source.name,
            Refinement(
                read=done.read,
                rejected=done.rejected,
                metadata={**table_metadata(lake, SILVER, source.name, *descriptions), **metadata},
                checks=[
                    *check_results(lake, session, SILVER, source.name, rules, batch=batch),
                    *expected,
                ],
                quarantine_metadata={
                    **table_metadata(
                        lake, SILVER, quarantine_table(source.name), QUARANTINE_AND_REPLAYS
                    ),
                    **replay_metadata(done.replayed, done.rejected),
                },
            ),
        )
        if source.mode in CDC_MODES:
            yield dg.MaterializeResult(
                asset_key=asset_key(SILVER, deletes_table(source)),
                metadata={
                    **table_metadata(lake, SILVER, deletes_table(source), *descriptions),
                    **profile_after_write(lake, session, SILVER, deletes_table(source)),
                },
            )
        fail_broken(expected, expectations)

    return _asset


def source_assets(source: SourceDeclaration) -> list[dg.AssetsDefinition | dg.AssetSpec]:
    """Every asset of a declared source."""
    if source.mode == ROUTE:
        return route_assets.route_assets(source)
    if source.fields:  # typed as declared, on the step of the tables parsed by fixed rules
        return [bronze_asset(source), parsed_table_asset(fields_table(source))]
    return [bronze_asset(source), silver_asset(source)]


def source_sensors(
    source: SourceDeclaration, settings: SensorSettings
) -> list[dg.SensorDefinition]:
    """The sensors launching the source's bronze streams: Kafka lag, or new landing files."""
    if source.mode == ROUTE:
        return route_assets.route_sensors(source, settings)
    if source.format == LANDING:
        return [landing_sensor(source.name, settings)]
    topics = [source.topic] if source.topic else []
    return [kafka_lag_sensor(source.name, settings, topics, pattern=source.topic_pattern)]


def source_freshness_checks(source: SourceDeclaration) -> list[dg.AssetChecksDefinition]:
    """The freshness of the source's bronze tables against their topics or landing folder
    (reported by the sensors)."""
    if source.mode == ROUTE:
        return route_assets.route_freshness_checks(source)
    if source.format == LANDING:
        return [landing_freshness_check(source.name)]
    topics = [source.topic] if source.topic else []
    return [kafka_freshness_check(source.name, topics, pattern=source.topic_pattern)]


def source_tables(source: SourceDeclaration) -> dict[str, list[str]]:
    """The source's tables per layer (for maintenance)."""
    if source.mode == ROUTE:
        return route_assets.route_tables(source)
    silver = [source.name, quarantine_table(source.name)]
    if source.mode in CDC_MODES:
        silver.append(deletes_table(source))
    return {BRONZE: [source.name], SILVER: silver}


def source_pipeline(source: SourceDeclaration, settings: SensorSettings) -> Pipeline:
    """The declared source as the definitions take every pipeline, its sensors polling as
    ``settings`` say."""
    listers = []
    if source.mode == ROUTE:  # its tables, one per type met, are listed when maintenance runs
        listers.append(functools.partial(route_assets.routed_tables, source=source.name))
    return Pipeline(
        assets=source_assets(source),
        sensors=source_sensors(source, settings),
        freshness_checks=source_freshness_checks(source),
        tables=source_tables(source),
        listers=listers,
    )
