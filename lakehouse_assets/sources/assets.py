"""The Dagster side of a declared source: its bronze and silver assets, its lag sensor and the
tables maintenance keeps, all from the declaration."""

from collections.abc import Iterator
from typing import Any

import dagster as dg
from pydantic import Field

from lakehouse_assets.bronze.assets import kafka_bronze_asset, landing_bronze_asset
from lakehouse_assets.checks.expectation_results import expectation_results, expectation_specs
from lakehouse_assets.checks.freshness import kafka_freshness_check, landing_freshness_check
from lakehouse_assets.checks.results import check_results, check_specs, written_rows
from lakehouse_assets.constants import BRONZE, SILVER, asset_key, asset_tags
from lakehouse_assets.pipeline import Pipeline
from lakehouse_assets.profiling.store import profile_after_write
from lakehouse_assets.refinement.changes import SILVER_ASSET
from lakehouse_assets.refinement.parsed import parsed_table_asset
from lakehouse_assets.refinement.replay_log import replay_metadata
from lakehouse_assets.refinement.step import (
    Refinement,
    quarantine_table,
    refined_check_specs,
    refined_specs,
)
from lakehouse_assets.refinement.step_asset import (
    SilverStep,
    StepConfig,
    StepRun,
    silver_step_asset,
)
from lakehouse_assets.sensors.streams import kafka_lag_sensor, landing_sensor
from lakehouse_assets.sources.declaration.model import CDC_MODES, LANDING, ROUTE, SourceDeclaration
from lakehouse_assets.sources.decoding.reading import read_growing, reinfer_schema, schema_path
from lakehouse_assets.sources.routing import assets as route_assets
from lakehouse_assets.sources.writing.columns import ADDED, field_description
from lakehouse_assets.sources.writing.fields import fields_table
from lakehouse_assets.sources.writing.refine import Refined, refine
from lakehouse_assets.sources.writing.rules import source_rules
from lakehouse_assets.sources.writing.writes import deletes_table
from lakehouse_assets.table_metadata import code_references, table_metadata
from lakehouse_assets.validation import QUARANTINE_AND_REPLAYS
from resources import SensorSettings

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


class DeclaredSilverConfig(StepConfig):
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


def _stream(
    source: SourceDeclaration, settings: SensorSettings
) -> tuple[dg.AssetsDefinition, dg.SensorDefinition, dg.AssetChecksDefinition]:
    """The source's bronze stream: ``bronze/<name>``, the sensor launching its runs and its
    freshness check. A Kafka source's are its topics' records as delivered, its lag and its
    topics; a csv source's, the lines of the files dropped in ``landing/<name>/``."""
    if source.format == LANDING:
        columns = [field.name for field in source.fields]
        return (
            landing_bronze_asset(source.name, columns, owners=source.owners),
            landing_sensor(source.name, settings),
            landing_freshness_check(source.name),
        )
    topics, pattern = [source.topic] if source.topic else [], source.topic_pattern
    return (
        kafka_bronze_asset(
            source.name, topics, pattern=pattern, description=source.description,
            owners=source.owners,
        ),
        kafka_lag_sensor(source.name, settings, topics, pattern=pattern),
        kafka_freshness_check(source.name, topics, pattern=pattern),
    )  # fmt: skip


class DeclaredStep(SilverStep):
    """The silver step of a declared source (``writing.refine``): ``silver/<name>``, its
    quarantine and, for a CDC mode, its deletes."""

    config_type = DeclaredSilverConfig
    change_type = True

    def __init__(self, source: SourceDeclaration) -> None:
        self.declaration = source
        self.table = self.source = source.name
        self.tombstones = source.mode == "latest-per-key"
        self.expectations = [declared.expectation() for declared in source.expectations]
        self.rules = source_rules(source)

    def specs(self) -> list[dg.AssetSpec]:
        source = self.declaration
        shape = "flattened into <parent>_<child> columns" if source.flatten else "nested"
        common = {
            **SILVER_ASSET,
            "owners": list(source.owners) or None,
            "tags": {**asset_tags(SILVER, source.name), "lakehouse/mode": source.mode},
            "metadata": code_references(refine=refine),
        }
        schema = "/".join(schema_path(source.name))
        description = (
            f"{MODE_DESCRIPTIONS[source.mode]} of the declared source `{source.name}`, {shape}, "
            f"with the Kafka coordinates (`_kafka_*`). Schema: `{schema}` "
            "under the lake root." + (f"\n\n{source.description}" if source.description else "")
        )
        specs = refined_specs(source.name, source.name, description, **common)
        if source.mode in CDC_MODES:
            specs.append(
                dg.AssetSpec(
                    asset_key(SILVER, deletes_table(source)),
                    description=f"The deletes applied to `silver.{source.name}`: keys, "
                    "`_sequence` and Kafka coordinates, so that older changes arriving later are "
                    "known as older.",
                    deps=[asset_key(BRONZE, source.name)],
                    **common,
                )
            )
        return specs

    def check_specs(self) -> list[dg.AssetCheckSpec]:
        table_key = asset_key(SILVER, self.table)
        return refined_check_specs(
            self.table,
            self.table,
            [*check_specs(table_key, self.rules), *expectation_specs(table_key, self.expectations)],
        )

    def refine(self, run: StepRun) -> Refinement:
        source, lake, spark = self.declaration, run.lake, run.spark
        table_key = asset_key(SILVER, source.name)
        metadata: dict[str, Any] = {"upstream_version": dg.MetadataValue.text(run.changes.reached)}
        done, created = Refined(), not lake.exists(SILVER, source.name)
        reinfer = isinstance(run.config, DeclaredSilverConfig) and run.config.reinfer_schema
        if reinfer and lake.exists(BRONZE, source.name):
            reinfer_schema(lake, spark, source.read_spec())
        if run.changes.fresh or created:
            done = refine(run, source, read_growing(lake, source.read_spec(), run.changes.rows))
            run.context.log.info(f"silver.{source.name}: {done.metadata()}")
            metadata.update(done.metadata())
        batch = written_rows(run.context, table_key, done.merged, created)
        descriptions = (ADDED, field_description(source))
        return Refinement(
            read=done.read,
            rejected=done.rejected,
            metadata={**table_metadata(lake, SILVER, source.name, *descriptions), **metadata},
            checks=[
                *check_results(lake, spark, SILVER, source.name, self.rules, batch=batch),
                *expectation_results(lake, spark, source.name, self.expectations, done.expected),
            ],
            quarantine_metadata={
                **table_metadata(
                    lake, SILVER, quarantine_table(source.name), QUARANTINE_AND_REPLAYS
                ),
                **replay_metadata(done.replayed, done.rejected),
            },
        )

    def more(self, run: StepRun) -> Iterator[dg.MaterializeResult]:
        source = self.declaration
        if source.mode in CDC_MODES:
            table = deletes_table(source)
            yield dg.MaterializeResult(
                asset_key=asset_key(SILVER, table),
                metadata={
                    **table_metadata(run.lake, SILVER, table, ADDED, field_description(source)),
                    **profile_after_write(run.lake, run.spark, SILVER, table),
                },
            )


def source_pipeline(source: SourceDeclaration, settings: SensorSettings | None = None) -> Pipeline:
    """The declared source as the definitions take every pipeline, its sensors polling as
    ``settings`` say: its bronze stream and its silver step; a route-by-type source's, its
    streams and its router (``routing.assets``)."""
    settings = settings or SensorSettings()
    if source.mode == ROUTE:
        return route_assets.route_pipeline(source, settings)
    bronze, sensor, freshness = _stream(source, settings)
    if source.fields:  # typed as declared, on the step of the tables parsed by fixed rules
        silver = parsed_table_asset(fields_table(source))
    else:
        silver = silver_step_asset(DeclaredStep(source))
    tables = [source.name, quarantine_table(source.name)]
    if source.mode in CDC_MODES:
        tables.append(deletes_table(source))
    return Pipeline(
        assets=[bronze, silver],
        sensors=[sensor],
        freshness_checks=[freshness],
        tables={BRONZE: [source.name], SILVER: tables},
    )


def source_assets(source: SourceDeclaration) -> list[dg.AssetsDefinition | dg.AssetSpec]:
    """Every asset of a declared source."""
    return list(source_pipeline(source).assets)
