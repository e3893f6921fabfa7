"""The Spark resource: workers run this interpreter, the UI is off, the Kafka source is known."""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

from resources import SparkResource
from resources.kafka_source import KAFKA_SOURCE_FORMAT


def test_python_workers_run_the_drivers_interpreter(spark: SparkSession) -> None:
    worker_python = spark.sparkContext.parallelize([0], 1).map(lambda _: sys.executable).first()
    assert worker_python == sys.executable


def test_ui_is_off_and_session_is_shared(spark: SparkSession) -> None:
    assert spark.conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert SparkResource().get_session() is spark


def test_kafka_source_is_registered(spark: SparkSession) -> None:
    reader = spark.readStream.format(KAFKA_SOURCE_FORMAT)
    frame = reader.option("kafka.bootstrap.servers", "h:1").option("subscribe", "t").load()
    assert frame.columns == ["topic", "partition", "offset", "key", "value", "timestamp"]
