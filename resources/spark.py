"""The Spark resource: a Spark Connect session on a long-lived Spark application, or a local one.

Built on ``dagster_pyspark.LazyPySparkResource`` (the session is made on first use, so a run that
needs no Spark never pays for it). With ``remote`` set (``SPARK_REMOTE``, Spark's own variable,
e.g. ``sc://localhost:15002``) every run is a thin client of one Spark Connect server: no JVM starts
in the run's process, and the server's executors do the work. Without it, the run starts a local
Spark application of its own (tests, one-off scripts).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from dagster_pyspark import LazyPySparkResource
from pydantic import Field, PrivateAttr
from pyspark import SparkContext
from pyspark.sql import DataFrame, SparkSession

from resources import metastore as metastores
from resources.codegen import forget, restore_code_generation
from resources.settings import metastore as configured_metastore
from resources.settings import parse_spark_conf
from resources.spark_connect import check_reachable
from resources.spark_jvm import (
    DEFAULT_ARCHIVE,
    delta_agent_option,
    jvm_settings,
    output_discarded,
    quick_start_options,
)

# Session settings every run relies on, whatever the application: applied to each new session.
SESSION_DEFAULTS: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Parquet footers then carry timestamp min/max (INT96 has none): Delta's file statistics.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
}
# Application settings of a local Spark that suit a laptop; the user's settings override any.
LOCAL_DEFAULTS: dict[str, str] = {
    **SESSION_DEFAULTS,
    "spark.driver.memory": "2g",
    "spark.ui.showConsoleProgress": "false",
}
# How long a run waits for a Connect server that refuses connections: one restarting (killed, or
# moved) is back within it, and a run retried at once after the server died does not fail again.
CONNECT_WAIT_S = 120.0
LOG = logging.getLogger(__name__)
# The resources that have handed out sessions, by id (weakly: a resource is not kept for this).
_IN_USE: weakref.WeakValueDictionary[int, SparkResource] = weakref.WeakValueDictionary()


def release_thread_sessions() -> None:
    """Release the sessions the calling thread holds, of every Spark resource: a step thread
    (``lakehouse_assets.executor``) calls it when its step has ended."""
    for resource in list(_IN_USE.values()):
        resource.release_thread_session()


class SparkResource(LazyPySparkResource):
    """The run's Spark session, created on first use and shared by every step of the run.

    Every application has the pinned jars (Spark's Kafka source, Delta Lake) and Delta's session
    extension (``jvm_settings``). A local session's Python workers run this interpreter
    (``PYSPARK_PYTHON``), so they import the project's packages; a Connect server's workers run
    the interpreter the server was started with.
    """

    spark_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra Spark settings. Over Connect only session settings apply; the "
        "server's own settings are given when it starts.",
    )
    extra_settings: str | None = Field(
        default=None,
        description="More Spark settings, as the JSON object of LAKEHOUSE_SPARK_CONF (over "
        "`spark_config`). Text, so that the Definitions pass it as the variable: a setting may "
        "hold a credential (an object store's secret key), and the UI shows the variable's name.",
    )
    remote: str | None = Field(
        default=None,
        description="Spark Connect URL (SPARK_REMOTE), e.g. sc://localhost:15002. When unset, "
        "the run starts a local Spark application with `master`.",
    )
    master: str = Field(
        default="local[*]",
        description="Master of a local application: local[*], spark://host:7077, yarn, k8s://...",
    )
    connect_wait_s: float = Field(
        default=CONNECT_WAIT_S,
        description="How long a run waits for a Spark Connect server that does not accept "
        "connections (one restarting) before it fails, naming the URL.",
    )
    metastore: str = Field(
        default_factory=configured_metastore,
        description="The catalog of a local application (LAKEHOUSE_METASTORE): a folder holding "
        "an embedded Derby metastore (one application at a time) or a PostgreSQL URL (shared). "
        "A Connect server has its own.",
    )
    app_name: str = Field(default="lakehouse", description="Spark application name.")
    ui_enabled: bool = Field(default=False, description="Serve a local application's web UI.")
    log_level: str = Field(default="WARN", description="A local application's log level.")
    quiet: bool = Field(
        default=False,
        description="Discard what a local application's JVM prints (Spark's log, the JVM's "
        "warnings), as the `lakehouse` commands do unless given --verbose; errors still reach "
        "the caller as exceptions.",
    )
    quick_start: bool = Field(
        default=True,
        description="Start a local driver JVM quickly: its classes from the archive that "
        "`lakehouse spark-archive` writes, and the JIT's quick tier only "
        "(-XX:TieredStopAtLevel=1). Suits short runs; turn it off for long CPU-bound local "
        "jobs. An explicit spark.driver.extraJavaOptions replaces these options.",
    )

    _sessions: dict[threading.Thread, SparkSession] = PrivateAttr(default_factory=dict)
    _free: list[SparkSession] = PrivateAttr(default_factory=list)  # left by ended threads
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _init_session(self) -> None:
        if self._spark_session is None:
            session = self._connect() if self.remote else self._start_local()
            self._spark_session = session

    def get_session(self) -> SparkSession:
        """The calling thread's Spark session (made on its first call).

        Steps running at once (``lakehouse_assets.executor``) each run in a thread of their own,
        and each thread has a session of its own, so the settings a step sets for a while (a
        merge's transaction marker) are never another step's. A thread that has ended leaves its
        session to the next thread that asks, with one exception over Spark Connect: a session
        other than the first is released, not handed on, because PySpark Connect ties the
        DataFrame a ``localCheckpoint`` returns to the thread's active session (the session the
        thread made, else the process's default, which the first session is).
        """
        thread = threading.current_thread()
        with self._lock:
            if thread not in self._sessions:
                for ended in [other for other in self._sessions if not other.is_alive()]:
                    self._leave(self._sessions.pop(ended))
                session = self._free_session()
                restore_code_generation(session)  # a step's own choice, not the next one's
                self._sessions[thread] = session
                _IN_USE[id(self)] = self
            return self._sessions[thread]

    def release_thread_session(self) -> None:
        """The calling thread's step has ended: release its session over Spark Connect, unless
        it is the first (kept for the next thread); a local one waits for the next thread.

        A Connect session left to the process's exit is released then, and waits for a server
        that may have stopped by then (a test's, the demo's).
        """
        with self._lock:
            session = self._sessions.pop(threading.current_thread(), None)
            if session is not None:
                self._leave(session)

    def _leave(self, session: SparkSession) -> None:
        """Keep ``session``, whose thread has ended, for the next thread, or release it."""
        if self.remote and session is not self._spark_session:
            forget(session)
            session.stop()
        else:
            self._free.append(session)

    def _free_session(self) -> SparkSession:
        """The first session unless a live thread holds it, else one left free, else a new one."""
        first = self._spark_session
        if first is None:
            return self.spark_session
        if any(session is first for session in self._free):
            self._free = [session for session in self._free if session is not first]
            return first
        if self._free:
            return self._free.pop()
        return self._another_session()

    def _another_session(self) -> SparkSession:
        """A new session on the first one's application, with its own settings."""
        first = self.spark_session
        if not self.remote:
            session = first.newSession()  # the application's settings are its defaults
            for key, value in SESSION_DEFAULTS.items():
                session.conf.set(key, value)
            return session
        return self._configured(self._builder().create())

    def _connect(self) -> SparkSession:
        check_reachable(self._remote_url(), self.connect_wait_s)
        return self._configured(self._builder().getOrCreate())

    def _builder(self) -> Any:
        """A Connect session builder that sets ``SESSION_DEFAULTS`` in one call.

        (The builder sets its settings silently, skipping any it may not set: these are session
        settings every Spark accepts. The user's settings are set by ``_configured``, one
        call a setting, so a setting the server refuses fails the run, naming it.)
        """
        defaults: dict[str, Any] = dict(SESSION_DEFAULTS)
        return SparkSession.builder.remote(self._remote_url()).config(map=defaults)

    def _remote_url(self) -> str:
        assert self.remote is not None
        return self.remote

    @property
    def user_settings(self) -> dict[str, Any]:
        """The user's Spark settings: ``spark_config`` and, over it, ``extra_settings``."""
        return {**self.spark_config, **parse_spark_conf(self.extra_settings)}

    def _configured(self, session: SparkSession) -> SparkSession:
        for key, value in self.user_settings.items():
            session.conf.set(key, str(value))
        return session

    def _start_local(self) -> SparkSession:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if SparkContext._active_spark_context is None:  # else this process's driver holds it
            metastores.prepare(self.metastore)
        os.environ.update(metastores.launcher_environment(self.metastore, os.environ))
        settings = {
            **LOCAL_DEFAULTS,
            **jvm_settings(),
            **metastores.spark_settings(self.metastore),
            "spark.ui.enabled": str(self.ui_enabled).lower(),
        }
        quick = quick_start_options(DEFAULT_ARCHIVE) if self.quick_start else ""
        derby = metastores.java_options(self.metastore)
        options = " ".join(filter(None, [quick, derby, delta_agent_option()]))
        if options:
            settings["spark.driver.extraJavaOptions"] = options
        builder: Any = SparkSession.builder.master(self.master).appName(self.app_name)
        for key, value in {**settings, **self.user_settings}.items():
            builder = builder.config(key, str(value))
        existing = SparkSession.getActiveSession()
        with output_discarded() if self.quiet else contextlib.nullcontext():
            session = builder.getOrCreate()
        if session is not existing:
            session.sparkContext.setLogLevel(self.log_level)
        return session


@contextlib.contextmanager
def cached(frame: DataFrame) -> Iterator[DataFrame]:
    """``frame`` cached for the block (read more than once without computing it again), then
    released. A Spark application's cache is shared by all its sessions and outlives them: on a
    Connect server that stays up, a cached frame never released stays for good (its plan held,
    and compared with every later query's)."""
    frame = frame.cache()
    try:
        yield frame
    finally:
        frame.unpersist()
