"""What every JVM the project starts gets (a Connect server, a local session): the pinned jars,
Delta's extension and the static settings; and the helpers that start and stop a local driver."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pyspark
from pyspark import SparkContext
from pyspark.sql import SparkSession

from resources import object_store
from resources.settings import ENV_LAKEHOUSE_ROOT, ENV_SPARK_REMOTE

# The driver's class archive sits in the virtual environment: it belongs to its PySpark and JDK.
DEFAULT_ARCHIVE = Path(sys.prefix) / "share" / "lakehouse" / "spark-driver.jsa"
# The pinned JVM packages (Delta Lake, Spark's Kafka source), resolved there by `lakehouse jars`.
JARS_DIR = Path(sys.prefix) / "share" / "lakehouse" / "jars"
# The Delta log store of s3a:// tables and the streaming checkpoint's file manager, compiled
# beside them by `lakehouse jars`: each creates its files (a table version, a batch's offsets)
# with S3's put-if-absent, so that writers in any number of applications never replace each
# other's (resources/java/lakehouse).
S3_LOG_STORE = "lakehouse.delta.ConditionalPutLogStore"
S3_CHECKPOINT_FILE_MANAGER = "lakehouse.streaming.ConditionalPutCheckpointFileManager"
S3_COMMITS_JAR = JARS_DIR / "lakehouse-s3-commits.jar"
# The Java agent of every driver the project starts: a Delta snapshot answers its set
# transactions, file count and size from its checksum file instead of a Spark job over its log
# (resources/java/lakehouse/delta/ChecksumStateAgent.java; docs/jars.md). Off for
# a session with STATE_FROM_CHECKSUM false; absent (no javac), Delta's own path.
DELTA_AGENT_DIR = JARS_DIR.with_name("delta-agent")
DELTA_AGENT_JAR = DELTA_AGENT_DIR / "lakehouse-delta-agent.jar"
STATE_FROM_CHECKSUM = "spark.lakehouse.delta.stateFromChecksum.enabled"
# Delta Lake's SQL (MERGE, OPTIMIZE, VACUUM) and its catalog in every session.
DELTA_SETTINGS: dict[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Every table records its changes, so downstream layers read them incrementally.
    "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "true",
    # A table's state is rebuilt from its log in one task, not Delta's default 50: the lake's
    # logs are small, and scheduling 50 tasks per snapshot costs more than reading one.
    # A cluster with tables of many thousand files may raise it in LAKEHOUSE_SPARK_CONF.
    "spark.databricks.delta.snapshotPartitions": "1",
    # The catalog keeps a copy of a registered table's columns (JDBC clients read it), which
    # Delta writes when it registers the table and when a write by name changes it.
    "spark.databricks.delta.catalog.update.enabled": "true",
    # VACUUM lists a table's folders in this many tasks; Spark's default, 10,000, schedules
    # thousands of tasks with nothing to list for a table of a few files.
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "8",
    # Read from Spark's own settings when the application starts, not from a session's.
    "spark.delta.logStore.s3a.impl": S3_LOG_STORE,
    # Delta checks every commit's checksum against the table's files with a full rebuild of its
    # state when a time zone (the session's, the JVM's default: the host's) is not UTC: a debug
    # check, which a checkpoint makes anyway, that took a small append from 1 Spark job to 3.
    "spark.databricks.delta.allFilesInCrc.verificationMode.forceOnNonUTC.enabled": "false",
    # A new table writes a checkpoint (its whole state rebuilt and written, 2.3 s on a warm
    # server) every 50 commits, not Delta's 10: small streaming batches 0.90x the wall and 0.81x
    # the server's CPU; a cold reader replays up to 49 JSON commits (a new session's first count
    # 1.20x). benchmarks/checkpoint_interval.py; an existing table keeps its own (docs/jars.md).
    "spark.databricks.delta.properties.defaults.checkpointInterval": "50",
}
# Settings fixed when an application starts (Spark's static SQL settings).
STATIC_SETTINGS: dict[str, str] = {
    # Compiled query code kept for reuse: a graph run compiles more distinct classes than Spark's
    # default of 100 keeps, and would compile them again (benchmarks/spark_settings.py compares).
    "spark.sql.codegen.cache.maxEntries": "5000",
}
CHECKPOINT_MANAGER_SETTING = "spark.sql.streaming.checkpointFileManagerClass"
DIST_CLASSPATH = "SPARK_DIST_CLASSPATH"  # appended by Spark's launcher to the driver's class path
CONNECT_MODE_MARK = "SPARK_CONNECT_MODE_ENABLED"  # set by PySpark in a process using Connect


class SparkJarsMissing(RuntimeError):
    """The pinned JVM packages were never resolved into this environment."""


def jvm_settings(
    jars_dir: Path = JARS_DIR, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Settings of every Spark application the project starts (a Connect server, a local
    session): the pinned jars, which its executors fetch from the driver, Delta's extension, the
    static settings, and the object store's endpoint named in ``environ`` (the process's
    variables when None; see ``resources.object_store``).

    Raises:
        SparkJarsMissing: ``jars_dir`` holds no jar, or the lake root of ``environ`` is on S3 and
            the log store that commits there safely was not compiled (a JRE has no ``javac``).
    """
    jars = pinned_jars(jars_dir)
    if not jars:
        raise SparkJarsMissing(
            f"No JVM packages in {jars_dir}: run `lakehouse jars` (`make install` does) to "
            "resolve Delta Lake and Spark's Kafka source once."
        )
    env = os.environ if environ is None else environ
    root = env.get(ENV_LAKEHOUSE_ROOT, "")
    s3_commits = jars_dir / S3_COMMITS_JAR.name in jars
    if root.startswith(("s3a://", "s3://")) and not s3_commits:
        # Spark's defaults for s3a:// let two applications overwrite each other's commits.
        raise SparkJarsMissing(
            f"The lake root {root} is on S3, but the Delta log store that commits there with "
            f"S3's put-if-absent ({S3_LOG_STORE}) is not in {jars_dir}. It is compiled by "
            "`lakehouse jars` (`make install` runs it) with a JDK's javac; install a JDK 17 "
            "(this Java has no compiler, or the jars were resolved before it) and run it again."
        )
    jars_setting = ",".join(str(jar) for jar in jars)
    # The class writes other schemes as Spark's own manager does; without its jar (a JRE, a local
    # lake) Spark's own is kept.
    checkpoints = {CHECKPOINT_MANAGER_SETTING: S3_CHECKPOINT_FILE_MANAGER} if s3_commits else {}
    return {
        "spark.jars": jars_setting,
        **DELTA_SETTINGS,
        **STATIC_SETTINGS,
        **checkpoints,
        **object_store.spark_settings(environ),
    }


def spark_home() -> Path:
    """The installed pyspark package: Spark's jars and scripts."""
    return Path(pyspark.__file__).parent


def pinned_jars(jars_dir: Path = JARS_DIR) -> list[Path]:
    """The pinned jars resolved into ``jars_dir`` (``spark.jars`` of every application)."""
    return sorted(jars_dir.glob("*.jar"))


def driver_class_path(jars: Sequence[Path], environ: Mapping[str, str]) -> dict[str, str]:
    """The variable that puts ``jars`` on the class path of a Spark driver launched from
    ``environ``, after what it already holds (empty when it holds them all).

    Some of a driver's threads load classes from the JVM's own class path, not from
    ``spark.jars``: java.sql.DriverManager (a metastore's JDBC driver), and the Thrift server's
    threads that open a JDBC session and resolve its catalog (Delta's). Spark's launcher
    appends ``SPARK_DIST_CLASSPATH`` after Spark's own jars, so the class path still begins
    with the one the driver's class archive was written for (``spark.driver.extraClassPath``
    would come first, and the JVM would refuse the archive).
    """
    present = [entry for entry in environ.get(DIST_CLASSPATH, "").split(os.pathsep) if entry]
    missing = [str(jar) for jar in jars if str(jar) not in present]
    if not missing:
        return {}
    return {DIST_CLASSPATH: os.pathsep.join([*present, *missing])}


def without_connect(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` for a process that must start a local Spark application, not a Connect client:
    without ``SPARK_REMOTE`` and the mark PySpark sets once a process has a Connect session."""
    return {k: v for k, v in environ.items() if k not in (ENV_SPARK_REMOTE, CONNECT_MODE_MARK)}


def quick_start_options(archive: Path, quick_jit: bool = True) -> str:
    """Driver JVM options for a quick start: the class archive when there is one, and, with
    ``quick_jit``, the JIT's quick tier (C1) only. C1 alone spends less CPU on a short run; a
    driver that works for minutes runs faster with the full JIT (see ``SparkConnectServer``)."""
    options = ["-XX:TieredStopAtLevel=1"] if quick_jit else []
    if archive.is_file():
        options.append(f"-XX:SharedArchiveFile={archive}")
    return " ".join(options)


def delta_agent_option(agent: Path = DELTA_AGENT_JAR) -> str:
    """The driver JVM option that loads the Delta agent, when it was compiled."""
    return f"-javaagent:{agent}" if agent.is_file() else ""


@contextlib.contextmanager
def output_discarded() -> Iterator[None]:
    """The process's standard output and error point nowhere for the block: a JVM started in it
    inherits them so and keeps them, while this process has its own back after the block."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(os.devnull, "wb") as nowhere:
        os.dup2(nowhere.fileno(), 1)
        os.dup2(nowhere.fileno(), 2)
    try:
        yield
    finally:
        for fd, original in zip((1, 2), saved, strict=True):
            os.dup2(original, fd)
            os.close(original)


def stop_spark(timeout_s: float = 60) -> bool:
    """Stop this process's local Spark session and its driver JVM, and wait until it has exited.

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


def java() -> str:
    """The java executable Spark would use: ``$JAVA_HOME/bin/java``, else ``java`` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def write_properties(path: Path, settings: Mapping[str, str]) -> None:
    """``settings`` as a Java properties file that only this user may read (they may hold a
    credential)."""
    path.touch(mode=0o600)
    path.write_text("".join(f"{key}={_escaped(value)}\n" for key, value in settings.items()))


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
