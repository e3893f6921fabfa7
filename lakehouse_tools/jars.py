"""The pinned JVM artifacts (``jars.toml``), resolved once into the virtual environment.

``lakehouse jars`` (run by ``make install``) resolves them with Spark's own resolver (Ivy, as
``spark-submit --packages`` does) and keeps the resolved files in ``resources.spark_jvm.JARS_DIR``;
every Spark the project starts loads them from there (``resources.spark_jvm.jvm_settings``). The
repository is Maven Central, or Spark's own ``DEFAULT_ARTIFACT_REPOSITORY`` (an internal mirror).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from resources.spark_jvm import DELTA_AGENT_DIR, JARS_DIR, spark_home, without_connect

PINS = Path(__file__).with_name("jars.toml")
# The embedded Kafka broker's jars, and Kafka Connect's with Debezium's PostgreSQL connector:
# folders of their own, off Spark's class path.
KAFKA_JARS_DIR = JARS_DIR.with_name("kafka")
DEBEZIUM_JARS_DIR = JARS_DIR.with_name("debezium")
S3PROXY_JARS_DIR = JARS_DIR.with_name("s3proxy")  # the tests' S3 server
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
MIRROR_VARIABLE = "DEFAULT_ARTIFACT_REPOSITORY"  # Spark's own: the root of every repository
# Ivy's downloads, shared by the user's checkouts (as pip's cache is): a new clone's install
# resolves from it instead of downloading again. One folder per pin section.
IVY_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lakehouse" / "ivy"


def wheel_scala_jars() -> list[Path]:
    """The Scala library of the pyspark wheel, which Spark's resolver leaves out of any package."""
    jars = spark_home() / "jars"
    return sorted([*jars.glob("scala-library-*.jar"), *jars.glob("scala-reflect-*.jar")])


class JarResolutionError(RuntimeError):
    """The pinned jars could not be resolved."""


def resolve(target: Path, section: str) -> list[Path]:
    """Resolve the packages of the pin file's ``section`` (group:artifact:version) with their
    dependencies, less its ``excludes`` (group:artifact), into ``target``, replacing
    what it held only once every jar resolved; returns the jars. Ivy's cache is kept in
    ``IVY_CACHE`` (a folder per target, locked while in use), so resolving again needs the network
    only for what changed.

    Raises:
        JarResolutionError: a package or a dependency could not be resolved.
    """
    pins = tomllib.loads(PINS.read_text())[section]
    packages, excludes = pins["packages"], pins.get("excludes", [])
    ivy = IVY_CACHE / target.name
    ivy.mkdir(parents=True, exist_ok=True)
    with (ivy / ".lock").open("w") as lock, tempfile.TemporaryDirectory() as work:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another checkout's install may be resolving
        shutil.rmtree(ivy / "jars", ignore_errors=True)  # Ivy copies the resolved jars there
        nothing = Path(work) / "resolved.py"
        nothing.touch()
        command = [
            str(spark_home() / "bin" / "spark-submit"),
            "--packages",
            ",".join(packages),
        ]
        if excludes:
            command += ["--exclude-packages", ",".join(excludes)]
        command += ["--conf", f"spark.jars.ivy={ivy}", str(nothing)]
        env = {
            MIRROR_VARIABLE: MAVEN_CENTRAL,
            **without_connect(os.environ),
            "SPARK_HOME": str(spark_home()),
            "PYSPARK_PYTHON": sys.executable,
        }
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        jars = sorted((ivy / "jars").glob("*.jar"))
        if done.returncode != 0 or not jars:
            repository = env[MIRROR_VARIABLE]
            raise JarResolutionError(
                f"Could not resolve the JVM packages {', '.join(packages)} from "
                f"{repository} (set {MIRROR_VARIABLE} to use a mirror). spark-submit said:\n"
                f"{done.stderr[-3000:]}"
            )
        staged = target.with_name(f"{target.name}.new")
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        for jar in jars:
            shutil.copyfile(jar, staged / jar.name)
    shutil.rmtree(target, ignore_errors=True)
    staged.rename(target)
    return sorted(target.glob("*.jar"))


def resolve_all() -> dict[str, list[Path]]:
    """Resolve every section of the pin file into its folder: Spark's packages, Kafka's broker,
    Kafka Connect with Debezium's connector, the tests' S3 server, the Delta agent's Byte Buddy.

    The resolutions run at once (each a JVM of its own, with an Ivy cache of its own).
    """
    folders = {
        "Spark": (JARS_DIR, "spark"),
        "the embedded Kafka broker": (KAFKA_JARS_DIR, "kafka"),
        "Kafka Connect with Debezium": (DEBEZIUM_JARS_DIR, "debezium"),
        "the S3 server of the tests": (S3PROXY_JARS_DIR, "s3proxy"),
        "the Delta agent": (DELTA_AGENT_DIR, "delta-agent"),
    }
    with ThreadPoolExecutor(max_workers=len(folders)) as pool:
        futures = {
            name: pool.submit(resolve, target, section)
            for name, (target, section) in folders.items()
        }
        return {name: future.result() for name, future in futures.items()}
