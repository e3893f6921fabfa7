"""The Spark resource: workers run this interpreter, the UI is off, the Kafka source is known, and
the driver JVM starts from the class archive."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from resources import SparkResource
from resources.jvm_archive import DEFAULT_ARCHIVE
from resources.kafka_source import KAFKA_SOURCE_FORMAT
from resources.spark import quick_start_options


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


def test_quick_start_options_name_the_archive_only_when_it_exists(tmp_path: Path) -> None:
    archive = tmp_path / "driver.jsa"
    assert quick_start_options(archive) == "-XX:TieredStopAtLevel=1"
    archive.write_bytes(b"x")
    assert quick_start_options(archive) == (
        f"-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile={archive}"
    )


def test_the_drivers_jvm_starts_quickly_by_default(spark: SparkSession) -> None:
    options = spark.sparkContext.getConf().get("spark.driver.extraJavaOptions") or ""
    assert "-XX:TieredStopAtLevel=1" in options.split()


def start_spark_in_a_child(java_options: str) -> subprocess.CompletedProcess[str]:
    """Start a Spark application with these driver JVM options in a new process; count 3 rows."""
    code = (
        "import sys; from resources import SparkResource; "
        "conf = {'spark.driver.extraJavaOptions': sys.argv[1]}; "
        "print(SparkResource(conf=conf).get_session().range(3).count())"
    )
    command = [sys.executable, "-c", code, java_options]
    return subprocess.run(command, capture_output=True, text=True)


def test_the_installed_class_archive_fits_this_jdk_and_pyspark() -> None:
    assert DEFAULT_ARCHIVE.is_file(), "no class archive: `make install` writes it"
    # -Xshare:on makes an archive the JVM cannot use an error instead of a warning.
    child = start_spark_in_a_child(f"-Xshare:on {quick_start_options(DEFAULT_ARCHIVE)}")
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip().endswith("3")


def test_an_unusable_archive_costs_time_not_the_run(tmp_path: Path) -> None:
    stale = tmp_path / "stale.jsa"
    stale.write_bytes(b"not a class archive")
    child = start_spark_in_a_child(quick_start_options(stale))
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip().endswith("3")
