"""The Definitions object loads and names every table the way the design says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from lakehouse_assets.definitions import defs, lakehouse_definitions
from lakehouse_assets.pipeline import tables_by_layer
from lakehouse_assets.sources.assets import source_pipeline
from lakehouse_assets.sources.declaration.files import load_declarations
from resources import ENV_SPARK_CONF, SparkResource, build_resources
from resources.settings import ENV_SOURCES_DIR


def test_the_definitions_load_as_a_code_location_does() -> None:
    # Building the repository checks what importing the module does not (unique op and job
    # names, resources for every asset and check, schedules' jobs): `dagster dev` fails on it.
    dg.Definitions.validate_loadable(defs)


def test_bronze_assets_have_layer_keys_groups_and_kinds() -> None:
    specs = {spec.key: spec for spec in defs.resolve_all_asset_specs()}
    for topic in ("user_info", "workout", "bpm"):
        spec = specs[dg.AssetKey(["bronze", topic])]
        assert spec.group_name == "bronze"
        assert {"spark", "delta", "kafka"} <= set(spec.kinds)


def test_resources_come_from_the_environment() -> None:
    from resources import build_resources

    built = build_resources(
        {
            "LAKEHOUSE_ROOT": "/data/lake",
            "KAFKA_BOOTSTRAP_SERVERS": "k1:9092,k2:9092",
            "SPARK_MASTER": "spark://m:7077",
            "LAKEHOUSE_SPARK_CONF": '{"spark.executor.memory": "4g"}',
            "SPARK_REMOTE": "sc://spark:15002",
        }
    )
    assert built["lake"].root == "/data/lake"
    assert built["kafka"].bootstrap_servers == "k1:9092,k2:9092"
    assert built["spark"].master == "spark://m:7077"
    assert built["spark"].user_settings == {"spark.executor.memory": "4g"}
    assert built["spark"].remote == "sc://spark:15002"
    assert build_resources({})["spark"].remote is None  # a local Spark application


def test_a_run_reads_the_spark_settings_from_their_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(ENV_SPARK_CONF, '{"spark.hadoop.fs.s3a.secret.key": "k", "n": 4}')
    spark = build_resources(as_env_vars=True)["spark"]
    assert isinstance(spark.extra_settings, dg.EnvVar)  # the Definitions hold the name only
    seen = {}

    @dg.asset
    def settings(spark: SparkResource) -> None:
        seen.update(spark.user_settings)

    assert dg.materialize([settings], resources={"spark": spark}).success
    assert seen == {"spark.hadoop.fs.s3a.secret.key": "k", "n": "4"}


EXAMPLES = Path(__file__).parents[1] / "docs" / "sources"


def test_each_declared_source_becomes_assets_a_lag_sensor_and_maintained_tables() -> None:
    sources, errors = load_declarations(EXAMPLES)
    assert errors == []
    built = lakehouse_definitions(sources)
    specs = {spec.key: spec for spec in built.resolve_all_asset_specs()}
    customers = specs[dg.AssetKey(["silver", "customers"])]
    assert customers.group_name == "silver"
    assert set(customers.kinds) == {"spark", "delta"}
    assert customers.owners == ["team:data-platform"]
    assert customers.tags["lakehouse/mode"] == "cdc-scd2"
    assert "Every version of each key" in (customers.description or "")
    assert "web shop" in (customers.description or "")
    for key in (["bronze", "customers"], ["silver", "customers_quarantine"],
                ["silver", "customers_deletes"], ["bronze", "clicks"], ["silver", "clicks"],
                ["bronze", "prices"], ["silver", "prices"]):  # fmt: skip
        assert dg.AssetKey(key) in specs
    assert dg.AssetKey(["silver", "clicks_deletes"]) not in specs  # not a CDC source
    bronze = specs[dg.AssetKey(["bronze", "prices"])]
    assert {"spark", "delta", "kafka"} <= set(bronze.kinds)
    assert "prices\\.(eu|us)" in (bronze.description or "")
    sensors = {sensor.name for sensor in built.sensors or ()}
    assert {"clicks_kafka_lag", "customers_kafka_lag", "prices_kafka_lag"} <= sensors
    by_name = {source.name: source for source in sources}
    assert tables_by_layer([source_pipeline(by_name["customers"])]) == {
        "bronze": ["customers"],
        "silver": ["customers", "customers_quarantine", "customers_deletes"],
    }
    # The documented selection of one source's tables (docs/sources.md), whole: the silver
    # tables of a source are written by one step and cannot be materialized apart.
    selected = dg.AssetSelection.from_string("tag:lakehouse/source=customers")
    assert {key.to_user_string() for key in selected.resolve(built.resolve_asset_graph())} == {
        "bronze/customers", "silver/customers", "silver/customers_quarantine",
        "silver/customers_deletes",
    }  # fmt: skip


def test_a_source_with_declared_fields_has_its_rules_as_checks() -> None:
    sources, _ = load_declarations(EXAMPLES)
    built = lakehouse_definitions(sources)
    specs = {spec.key: spec for spec in built.resolve_all_asset_specs()}
    readings = specs[dg.AssetKey(["silver", "readings"])]
    assert (readings.group_name, set(readings.kinds)) == ("silver", {"spark", "delta"})
    assert readings.tags["lakehouse/mode"] == "append"
    assert readings.tags["lakehouse/source"] == "readings"
    assert "declared fields typed" in (readings.description or "")
    assert "smart meters" in (readings.description or "")
    assert dg.AssetKey(["bronze", "readings"]) in specs
    checks = {
        (key.asset_key.path[-1], key.name)
        for asset in built.assets or ()
        if isinstance(asset, dg.AssetsDefinition)
        for key in asset.check_keys
        if key.asset_key.path[-1].startswith("readings")
    }
    assert checks == {
        ("readings", "primary_key_unique"), ("readings", "primary_key_not_null"),
        ("readings", "accepted_status"), ("readings", "reconciled_with_bronze"),
        ("readings", "not_empty"), ("readings_quarantine", "quarantine_rate"),
    }  # fmt: skip
    by_name = {source.name: source for source in sources}
    assert tables_by_layer([source_pipeline(by_name["readings"])]) == {
        "bronze": ["readings"],
        "silver": ["readings", "readings_quarantine"],
    }
    refresh = built.resolve_job_def("silver_full_refresh")
    assert "silver_readings" in refresh.graph.node_names()


def test_a_csv_source_reads_its_landing_folder() -> None:
    sources, _ = load_declarations(EXAMPLES)
    built = lakehouse_definitions(sources)
    specs = {spec.key: spec for spec in built.resolve_all_asset_specs()}
    bronze = specs[dg.AssetKey(["bronze", "badges"])]
    assert set(bronze.kinds) == {"spark", "delta", "csv"}
    assert "landing/badges/" in (bronze.description or "")
    badges = specs[dg.AssetKey(["silver", "badges"])]
    assert badges.tags["lakehouse/mode"] == "latest-per-key"
    assert "CSV files" in (badges.description or "")
    assert "building's nightly export" in (badges.description or "")
    sensors = {sensor.name for sensor in built.sensors or ()}
    assert "badges_landing_files" in sensors and "badges_kafka_lag" not in sensors


def test_every_table_has_one_writer_at_a_time() -> None:
    """Each step is in the pool ``lakehouse-<layer>-<table>`` of the table it writes (a router,
    of the source whose ``<source>_...`` tables it writes); dagster.yaml limits a pool to one
    step at a time. The fitness pipeline's and the declared sources' alike."""
    sources, _ = load_declarations(EXAMPLES)
    built = lakehouse_definitions(sources)
    pools: dict[str, str] = {}
    for asset in built.assets or ():
        if not isinstance(asset, dg.AssetsDefinition):  # a spec: a view Dagster does not run
            continue
        layer, _, table = (asset.op.pool or "").removeprefix("lakehouse-").partition("-")
        tables = {key.path[-1] for key in asset.keys}
        assert {key.path[0] for key in asset.keys} == {layer}, asset.op.pool
        assert table in tables or all(t.startswith(f"{table}_") for t in tables), asset.op.pool
        assert pools.setdefault(asset.op.pool, asset.op.name) == asset.op.name  # one step each
    assert "lakehouse-silver-workout_bpm" in pools and "lakehouse-gold-gym_summary" in pools


def test_a_route_by_type_source_has_a_partition_per_routed_table_and_streams_for_locations() -> (
    None
):
    sources, _ = load_declarations(EXAMPLES)
    built = lakehouse_definitions(sources)
    specs = {spec.key: spec for spec in built.resolve_all_asset_specs()}
    routed = specs[dg.AssetKey(["silver", "commcare"])]
    assert isinstance(routed.partitions_def, dg.DynamicPartitionsDefinition)
    assert routed.partitions_def.name == "commcare_types"
    for key in (["bronze", "commcare"], ["bronze", "commcare_locations"],
                ["silver", "commcare_documents"], ["silver", "commcare_locations"],
                ["silver", "commcare_quarantine"]):  # fmt: skip
        assert dg.AssetKey(key) in specs
    sensors = {sensor.name for sensor in built.sensors or ()}
    assert {"commcare_kafka_lag", "commcare_locations_kafka_lag"} <= sensors
    assert {job.name for job in built.jobs or ()} >= {"silver_full_refresh", "maintain_silver"}


def test_a_malformed_declaration_is_reported_and_the_others_still_load(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text("topic: good\n")
    (tmp_path / "bad.yaml").write_text("topic: bad\nmode: upsert\n")
    (tmp_path / "bpm.yaml").write_text("topic: another_bpm\n")  # a table the pipeline has
    script = (
        "import dagster as dg\n"
        "from lakehouse_assets.definitions import defs\n"
        "keys = {s.key for s in defs.resolve_all_asset_specs()}\n"
        "print(dg.AssetKey(['silver', 'good']) in keys, dg.AssetKey(['silver', 'bad']) in keys)\n"
    )
    env = {**os.environ, ENV_SOURCES_DIR: str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["True", "False"]
    assert f"{tmp_path / 'bad.yaml'}:2 (field 'mode')" in done.stderr
    assert f"{tmp_path / 'bpm.yaml'}:1 (field 'name'): the name 'bpm' is taken" in done.stderr


def test_loading_the_code_warns_of_nothing() -> None:
    # Each process of `dagster dev` loads the code: a warning at load is repeated in the console
    # by every one of them (issue 15 counted 24 of the backfill policy's beta warning).
    script = "import lakehouse_assets.definitions"
    done = subprocess.run(
        [sys.executable, "-W", "error", "-c", script], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_table_asset_names_its_table_in_the_catalog(monkeypatch: pytest.MonkeyPatch) -> None:
    """The asset page shows the name the SQL endpoint answers to (``dagster/table_name``)."""
    monkeypatch.setenv("LAKEHOUSE_SCHEMA_PREFIX", "")
    graph = lakehouse_definitions().resolve_asset_graph()
    named = {
        key.to_user_string(): graph.get(key).metadata.get("dagster/table_name")
        for key in graph.get_all_asset_keys()
    }
    assert named["gold/workout_bpm_summary"] == "gold.workout_bpm_summary"
    assert named["silver/bpm_quarantine"] == "silver.bpm_quarantine"
    assert named["bronze/registered_users"] == "bronze.registered_users"
    assert all(name == key.replace("/", ".") for key, name in named.items()), named
    monkeypatch.setenv("LAKEHOUSE_SCHEMA_PREFIX", "acme")
    graph = lakehouse_definitions().resolve_asset_graph()
    key = dg.AssetKey(["gold", "gym_summary"])
    assert graph.get(key).metadata["dagster/table_name"] == "acme_gold.gym_summary"
