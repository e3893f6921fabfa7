"""Java classes the project keeps as source beside this module (``java/``), compiled by
``lakehouse jars`` (``make install``) with the JDK's ``javac`` into jars that Spark loads: the
Delta log store of ``s3a://`` lakes (``resources.object_store``) and the SQL endpoint's password
check (``devtools.sql_auth``)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from resources.spark_jvm import JARS_DIR, S3_LOG_STORE_JAR

SOURCES = Path(__file__).with_name("java")


def compile_jar(sources: Sequence[Path], classpath: Sequence[Path], target: Path) -> Path | None:
    """Compile ``sources`` (Java 17) against the jars of the folders ``classpath`` into the jar
    ``target``, written whole or not at all; returns it, or None when this Java has no compiler
    (a JRE).

    Raises:
        subprocess.CalledProcessError: javac refused the source.
    """
    javac = shutil.which("javac")
    if javac is None:
        return None
    with tempfile.TemporaryDirectory() as work:
        jars = ":".join(f"{folder}/*" for folder in classpath)
        command = [javac, "--release", "17", "-cp", jars, "-d", work, *map(str, sources)]
        subprocess.run(command, check=True, capture_output=True, text=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        with zipfile.ZipFile(partial, "w") as jar:
            for compiled in sorted(Path(work).rglob("*.class")):
                jar.write(compiled, compiled.relative_to(work).as_posix())
        partial.replace(target)
    return target


LOG_STORE_SOURCE = SOURCES / "lakehouse/delta/ConditionalPutLogStore.java"


def build_log_store(target: Path = S3_LOG_STORE_JAR) -> Path | None:
    """Compile the Delta log store of ``s3a://`` lakes into ``target``, among the jars every
    Spark application loads (``resources.spark_jvm``), against Spark's, Delta's and S3A's jars;
    None without a compiler.

    Raises:
        subprocess.CalledProcessError: javac refused the source.
    """
    from lakehouse_assets.devtools.spark_server import spark_home

    return compile_jar([LOG_STORE_SOURCE], [spark_home() / "jars", JARS_DIR], target)
