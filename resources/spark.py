"""The Spark resource: one PySpark session for a Dagster run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field
from pyspark import SparkContext
from pyspark.sql import SparkSession

from resources.jvm_archive import DEFAULT_ARCHIVE
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
    quick_start: bool = Field(
        default=True,
        description="Start the driver JVM quickly: its classes from the archive that "
        "`lakehouse spark-archive` writes, and the JIT's quick tier only "
        "(-XX:TieredStopAtLevel=1). Suits short runs; turn it off for long CPU-bound local "
        "jobs. An explicit spark.driver.extraJavaOptions in `conf` replaces these options.",
    )

    def get_session(self) -> SparkSession:
        """The run's Spark session (created on the first call)."""
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder: Any = SparkSession.builder.master(self.master).appName(self.app_name)
        settings = {**LOCAL_DEFAULTS, "spark.ui.enabled": str(self.ui_enabled).lower()}
        if self.quick_start:
            settings["spark.driver.extraJavaOptions"] = quick_start_options(DEFAULT_ARCHIVE)
        for key, value in {**settings, **self.conf}.items():
            builder = builder.config(key, value)
        existing = SparkSession.getActiveSession()
        session = builder.getOrCreate()
        if session is not existing:  # a new session: configure it once
            session.sparkContext.setLogLevel(self.log_level)
            session.dataSource.register(KafkaDataSource)
        return session


def quick_start_options(archive: Path) -> str:
    """Driver JVM options for a quick start: the class archive when there is one, and C1 only."""
    options = ["-XX:TieredStopAtLevel=1"]
    if archive.is_file():
        options.append(f"-XX:SharedArchiveFile={archive}")
    return " ".join(options)


def stop_spark(timeout_s: float = 60) -> bool:
    """Stop this process's Spark session and its driver JVM, and wait until the JVM has exited.

    Returns False when the JVM had to be killed after ``timeout_s``.
    """
    session = SparkSession.getActiveSession()
    if session is not None:
        session.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if gateway is not None:
        gateway.shutdown()
    if process is not None:
        process.stdin.close()  # the JVM exits at the end of its standard input
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            return False
    return True
