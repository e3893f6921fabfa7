"""The fitness reference pipeline as the definitions take every pipeline (``pipeline``): the
bronze streams of its three topics and two landing folders, its silver (``silver/``) and gold
(``gold/``) assets, the sensors starting its streams, the freshness checks of its bronze tables,
and its tables per layer."""

import dagster as dg

from lakehouse_assets.bronze.assets import kafka_bronze_asset, landing_bronze_asset
from lakehouse_assets.checks.freshness import kafka_freshness_check, landing_freshness_check
from lakehouse_assets.constants import BRONZE, GOLD, SILVER
from lakehouse_assets.fitness.gold.assets import gold_assets
from lakehouse_assets.fitness.names import (
    BRONZE_TABLES,
    FITNESS_OWNERS,
    GOLD_TABLES,
    KAFKA_TOPICS,
    LANDING_COLUMNS,
    SILVER_TABLES,
    Z_ORDER,
)
from lakehouse_assets.fitness.silver.assets import silver_assets
from lakehouse_assets.fitness.upgrades import upgrade_of
from lakehouse_assets.pipeline import Pipeline
from lakehouse_assets.sensors.streams import kafka_lag_sensor, landing_sensor
from resources import SensorSettings

bronze_kafka_assets = [
    kafka_bronze_asset(topic, [topic], owners=FITNESS_OWNERS, upgrade=upgrade_of(BRONZE, topic))
    for topic in KAFKA_TOPICS
]
bronze_landing_assets = [
    landing_bronze_asset(source, columns, owners=FITNESS_OWNERS, upgrade=upgrade_of(BRONZE, source))
    for source, columns in LANDING_COLUMNS.items()
]
fitness_assets = [*bronze_kafka_assets, *bronze_landing_assets, *silver_assets, *gold_assets]


def fitness_sensors(settings: SensorSettings) -> list[dg.SensorDefinition]:
    """The sensors starting the pipeline's streams: Kafka lag per topic, new files per folder."""
    return [
        *[kafka_lag_sensor(topic, settings) for topic in KAFKA_TOPICS],
        *[landing_sensor(source, settings) for source in LANDING_COLUMNS],
    ]


def fitness_pipeline(settings: SensorSettings) -> Pipeline:
    """The fitness pipeline, its sensors polling as ``settings`` say."""
    return Pipeline(
        assets=fitness_assets,
        sensors=fitness_sensors(settings),
        freshness_checks=[
            *[kafka_freshness_check(topic) for topic in KAFKA_TOPICS],
            *[landing_freshness_check(source) for source in LANDING_COLUMNS],
        ],
        tables={BRONZE: BRONZE_TABLES, SILVER: SILVER_TABLES, GOLD: GOLD_TABLES},
        z_order=Z_ORDER,
    )
