"""The product's Java classes, kept as source beside the resources that name them
(``resources/java/``), compiled by ``lakehouse jars`` (``make install``) with the JDK's ``javac``
into jars that Spark loads: the classes that write to ``s3a://`` lakes with S3's conditional
writes and the Delta agent (``resources.spark_jvm``), and the SQL endpoint's password check
(``lakehouse_tools.sql_auth``)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import resources
from resources.spark_jvm import DELTA_AGENT_JAR, JARS_DIR, S3_COMMITS_JAR, spark_home

SOURCES = Path(resources.__file__).with_name("java")


def compile_jar(
    sources: Sequence[Path],
    classpath: Sequence[Path],
    target: Path,
    manifest: Mapping[str, str] | None = None,
) -> Path | None:
    """Compile ``sources`` (Java 17) against the jars of the folders ``classpath`` into the jar
    ``target``, with the ``manifest`` attributes if any, written whole or not at all; returns
    it, or None when this Java has no compiler (a JRE).

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
            if manifest:
                lines = ["Manifest-Version: 1.0", *(f"{k}: {v}" for k, v in manifest.items())]
                jar.writestr("META-INF/MANIFEST.MF", "\r\n".join([*lines, "", ""]))
            for compiled in sorted(Path(work).rglob("*.class")):
                jar.write(compiled, compiled.relative_to(work).as_posix())
        partial.replace(target)
    return target


# What makes writes to s3a:// safe from several applications at once: the Delta log store, the
# streaming checkpoint's file manager, and the conditional create both rely on.
S3_COMMITS_SOURCES = [
    SOURCES / "lakehouse/s3/ConditionalPut.java",
    SOURCES / "lakehouse/delta/ConditionalPutLogStore.java",
    SOURCES / "lakehouse/streaming/ConditionalPutCheckpointFileManager.java",
]


def build_s3_commits(target: Path = S3_COMMITS_JAR) -> Path | None:
    """Compile the classes that create files on ``s3a://`` only if absent (Delta's commits and
    the streaming checkpoint's files) into ``target``, among the jars every Spark application
    loads (``resources.spark_jvm``), against Spark's, Delta's and S3A's jars; None without a
    compiler.

    Raises:
        subprocess.CalledProcessError: javac refused the source.
    """
    return compile_jar(S3_COMMITS_SOURCES, [spark_home() / "jars", JARS_DIR], target)


DELTA_AGENT_SOURCE = SOURCES / "lakehouse/delta/ChecksumStateAgent.java"


def build_delta_agent(target: Path = DELTA_AGENT_JAR) -> Path | None:
    """Compile the Java agent that lets a Delta snapshot answer from its checksum
    (``resources.spark_jvm.DELTA_AGENT_JAR``) into ``target``, beside the Byte Buddy it runs on
    (named by its manifest), against Spark's and Delta's jars; None without a compiler.

    Raises:
        subprocess.CalledProcessError: javac refused the source.
    """
    (byte_buddy,) = sorted(target.parent.glob("net.bytebuddy_byte-buddy-*.jar"))
    agent = "lakehouse.delta.ChecksumStateAgent"
    manifest = {"Premain-Class": agent, "Class-Path": byte_buddy.name}
    classpath = [spark_home() / "jars", JARS_DIR, target.parent]
    return compile_jar([DELTA_AGENT_SOURCE], classpath, target, manifest)
