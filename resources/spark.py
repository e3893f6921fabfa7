"""The Spark resource: one PySpark session for a Dagster run."""

from __future__ import annotations

import os
import sys
from typing import Any

import dagster as dg
from pydantic import Field
from pyspark.sql import SparkSession

from resources.kafka_source import KafkaDataSource

# Spark settings that suit a laptop; any of them can be overridden through ``conf``.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
    "spark.driver.memory": "2g",
    "spark.ui.showConsoleProgress": "false",
}


class SparkResource(dg.ConfigurableResource):
    """A PySpark session, created on first use and shared by every step of a run.

    Spark's Python workers run this interpreter (``PYSPARK_PYTHON``), so they import the
    project's packages, and the Kafka streaming source is registered on the session.
    """

    master: str = Field(
        default="local[*]",
        description="Spark master URL: local[*], spark://host:7077, yarn, k8s://...",
    )
    app_name: str = Field(default="lakehouse", description="Spark application name.")
    ui_enabled: bool = Field(default=False, description="Serve the Spark web UI.")
    log_level: str = Field(default="WARN", description="Spark's log level.")
    conf: dict[str, str] = Field(
        default_factory=dict,
        description="Extra Spark settings, applied over the local defaults.",
    )

    def get_session(self) -> SparkSession:
        """The run's Spark session (created on the first call)."""
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder: Any = SparkSession.builder.master(self.master).appName(self.app_name)
        settings = {**LOCAL_DEFAULTS, "spark.ui.enabled": str(self.ui_enabled).lower()}
        for key, value in {**settings, **self.conf}.items():
            builder = builder.config(key, value)
        existing = SparkSession.getActiveSession()
        session = builder.getOrCreate()
        if session is not existing:  # a new session: configure it once
            session.sparkContext.setLogLevel(self.log_level)
            session.dataSource.register(KafkaDataSource)
        return session
