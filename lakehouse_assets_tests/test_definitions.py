"""The Definitions object loads and names every table the way the design says."""

from __future__ import annotations

import dagster as dg

from lakehouse_assets.definitions import defs


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
    assert built["spark"].spark_config == {"spark.executor.memory": "4g"}
    assert built["spark"].remote == "sc://spark:15002"
    assert build_resources({})["spark"].remote is None  # a local Spark application
