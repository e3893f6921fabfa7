"""The pinned JVM packages: resolved without a second copy of a wheel jar, loaded by every Spark
the project starts, and Delta Lake's SQL working on the session's Spark (Connect or local)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyspark
import pytest
from pyspark.sql import SparkSession

from resources.spark_jvm import DELTA_SETTINGS, JARS_DIR, SparkJarsMissing, jvm_settings

WHEEL_JARS = Path(pyspark.__file__).parent / "jars"
SPARK_STUB = "org/apache/spark/unused/UnusedStubClass.class"  # an empty class in every Spark jar


def classes(jar: Path) -> set[str]:
    """The classes a jar holds (not its metadata, nor a multi-release jar's variants)."""
    with zipfile.ZipFile(jar) as archive:
        names = archive.namelist()
    return {
        name
        for name in names
        if name.endswith(".class") and not name.startswith("META-INF/") and name != SPARK_STUB
    }


def test_no_resolved_jar_holds_a_class_the_wheel_ships() -> None:
    """Two copies of a class on Spark's class path, of different versions, break Spark
    (delta-io/delta#7415): the pins exclude what the pyspark wheel already has."""
    resolved = sorted(JARS_DIR.glob("*.jar"))
    packages = {jar.name.split("_", 1)[0] for jar in resolved}
    assert {"io.delta", "org.apache.spark", "org.apache.kafka"} <= packages
    shipped = set().union(*(classes(jar) for jar in WHEEL_JARS.glob("*.jar")))
    twice = {jar.name: len(classes(jar) & shipped) for jar in resolved}
    assert {name: count for name, count in twice.items() if count} == {}


def test_settings_name_every_resolved_jar_and_delta(tmp_path: Path) -> None:
    (tmp_path / "b.jar").touch()
    (tmp_path / "a.jar").touch()
    (tmp_path / "notes.txt").touch()
    settings = jvm_settings(tmp_path)
    assert settings["spark.jars"] == f"{tmp_path / 'a.jar'},{tmp_path / 'b.jar'}"
    assert settings["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"


def test_settings_without_resolved_jars_say_how_to_resolve_them(tmp_path: Path) -> None:
    with pytest.raises(SparkJarsMissing, match="lakehouse jars"):
        jvm_settings(tmp_path)


def test_a_lake_on_s3_is_refused_without_the_log_store_that_commits_there(tmp_path: Path) -> None:
    (tmp_path / "io.delta_delta-spark.jar").touch()  # resolved on a JRE: nothing compiled
    for root in ("s3a://bucket/lake", "s3://bucket/lake"):
        with pytest.raises(SparkJarsMissing, match="JDK 17") as refused:
            jvm_settings(tmp_path, {"LAKEHOUSE_ROOT": root})
        assert root in str(refused.value) and "lakehouse jars" in str(refused.value)
    assert jvm_settings(tmp_path, {"LAKEHOUSE_ROOT": str(tmp_path / "lake")})  # a folder needs none
    assert "spark.sql.streaming.checkpointFileManagerClass" not in jvm_settings(tmp_path, {})
    (tmp_path / "lakehouse-s3-commits.jar").touch()
    settings = jvm_settings(tmp_path, {"LAKEHOUSE_ROOT": "s3a://bucket/lake"})
    assert settings["spark.delta.logStore.s3a.impl"] == "lakehouse.delta.ConditionalPutLogStore"
    assert (
        settings["spark.sql.streaming.checkpointFileManagerClass"]
        == "lakehouse.streaming.ConditionalPutCheckpointFileManager"
    )


@pytest.mark.local_spark
def test_delta_sql_runs_on_the_sessions_spark(spark: SparkSession, tmp_path: Path) -> None:
    table = f"delta.`{tmp_path / 'people'}`"
    spark.sql(
        f"CREATE TABLE {table} (id BIGINT, name STRING) USING delta "
        "TBLPROPERTIES (delta.enableChangeDataFeed = true)"
    )
    spark.sql(f"INSERT INTO {table} VALUES (1, 'ann'), (2, 'bob')")
    spark.sql(
        f"MERGE INTO {table} AS t USING (SELECT 2 AS id, 'bo' AS name UNION ALL "
        "SELECT 3, 'cy') AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    rows = spark.sql(f"SELECT id, name FROM {table} ORDER BY id").collect()
    assert [tuple(row) for row in rows] == [(1, "ann"), (2, "bo"), (3, "cy")]
    feed = spark.read.format("delta").option("readChangeFeed", "true")
    changes = feed.option("startingVersion", 2).load(str(tmp_path / "people"))
    rows = changes.select("id", "_change_type").orderBy("id", "_change_type").collect()
    assert [tuple(row) for row in rows] == [
        (2, "update_postimage"),
        (2, "update_preimage"),
        (3, "insert"),
    ]
    history = spark.sql(f"DESCRIBE HISTORY {table}").orderBy("version").collect()
    assert [row["operation"] for row in history] == ["CREATE TABLE", "WRITE", "MERGE"]
    assert spark.conf.get("spark.sql.extensions") == DELTA_SETTINGS["spark.sql.extensions"]
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == "5000"
