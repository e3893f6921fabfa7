"""The Spark resource: workers run this interpreter, the session settings hold, the Kafka source is
known, an unreachable Connect server is waited for as long as configured and then named, and a
local driver JVM starts from the class archive."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable
from pyspark import StorageLevel
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.executor import materialize
from lakehouse_assets_tests.conftest import new_metastore
from lakehouse_tools.broker import free_port
from lakehouse_tools.spark_server import SparkConnectServer
from resources import SparkResource, delta
from resources.codegen import INTERPRETED, SMALL_BATCH_ROWS, fit_code_generation
from resources.delta import session_settings
from resources.kafka import KAFKA_FORMAT
from resources.settings import ENV_METASTORE
from resources.spark import CONNECT_WAIT_S, cached
from resources.spark_connect import SparkConnectUnreachable, check_reachable
from resources.spark_jvm import (
    DEFAULT_ARCHIVE,
    DELTA_AGENT_JAR,
    delta_agent_option,
    quick_start_options,
    without_connect,
)
from resources.streaming import CHECKPOINT_NOT_EMPTY, run_available_now


def test_python_workers_run_the_project_interpreter(spark: SparkSession) -> None:
    executable = F.udf(lambda: sys.executable, "string")
    assert spark.range(1).select(executable()).first()[0] == sys.executable


def test_session_settings_hold_and_the_session_is_shared(
    spark: SparkSession, spark_remote: str | None
) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"
    assert SparkResource(remote=spark_remote).get_session() is spark


def test_each_thread_has_a_session_of_its_own_and_ended_threads_leave_theirs(
    spark: SparkSession, spark_remote: str | None
) -> None:
    # ``spark`` is the process's default session, which the fixture releases while the server
    # runs (a Connect client left open to the process's exit retries a server gone by then)
    resource = SparkResource(remote=spark_remote)
    first = resource.get_session()
    both_hold = threading.Barrier(3, timeout=60)
    seen: dict[str, tuple[SparkSession, str | None, int]] = {}

    def step(name: str) -> None:
        session = resource.get_session()
        session.conf.set("spark.sql.shuffle.partitions", name[-1])
        both_hold.wait()  # both threads hold their sessions at once
        # a checkpoint is tied to the thread's session (it broke on another thread's)
        rows = session.range(4).localCheckpoint().where("id > 0").count()
        seen[name] = (session, session.conf.get("spark.sql.shuffle.partitions"), rows)
        both_hold.wait()

    threads = [threading.Thread(target=step, args=(f"step{n}",)) for n in (3, 5)]
    for thread in threads:
        thread.start()
    both_hold.wait()
    both_hold.wait()
    for thread in threads:
        thread.join()
    assert resource.get_session() is first  # the main thread keeps its own
    (one, one_setting, one_rows), (other, other_setting, other_rows) = seen["step3"], seen["step5"]
    assert one is not other and first not in (one, other)
    assert (one_setting, other_setting) == ("3", "5")  # each its own settings
    assert one_rows == other_rows == 3

    later: list[tuple[SparkSession, int]] = []

    def next_step() -> None:
        session = resource.get_session()
        later.append((session, session.range(2).localCheckpoint().count()))

    thread = threading.Thread(target=next_step)
    thread.start()
    thread.join()
    session, rows = later[0]
    if spark_remote:  # over Connect, a session other than the first is never handed on
        assert session not in (first, one, other)
    else:  # a local session is: one of the two the ended threads left
        assert session in (one, other)
    assert rows == 2


def test_a_run_releases_the_sessions_its_steps_made_at_its_end(
    spark: SparkSession, spark_remote: str | None
) -> None:  # ``spark``: the default session, as above
    if not spark_remote:
        pytest.skip("a local application's sessions are not released: they are its own")
    both_hold = threading.Barrier(2, timeout=60)
    sessions: list[SparkSession] = []

    def step(name: str) -> dg.AssetsDefinition:
        @dg.asset(name=name)
        def _step(spark: SparkResource) -> None:
            sessions.append(spark.get_session())
            both_hold.wait()  # so the two run at once, each with a session

        return _step

    resources = {"spark": SparkResource(remote=spark_remote)}
    instance = dg.DagsterInstance.ephemeral()
    result = materialize([step("a"), step("b")], dg.AssetSelection.all(), resources, instance)
    assert result.success
    assert len({id(session) for session in sessions}) == 2
    # the one other than the process's default is released; the default stays
    assert sorted(session.is_stopped for session in sessions) == [False, True]


def test_a_small_batch_is_interpreted_and_the_next_step_gets_the_settings_back(
    spark_remote: str | None,
) -> None:
    resource = SparkResource(remote=spark_remote)
    generated = {
        "spark.sql.codegen.wholeStage": "true",
        "spark.sql.codegen.factoryMode": "FALLBACK",
    }
    seen: list[dict[str, str | None]] = []

    def settings(session: SparkSession) -> dict[str, str | None]:
        return {key: session.conf.get(key, None) for key in INTERPRETED}

    def step(rows: int) -> None:
        session = resource.get_session()
        seen.append(settings(session))  # as the step finds it
        fit_code_generation(session, rows)
        seen.append(settings(session))

    def run_step(rows: int) -> None:
        thread = threading.Thread(target=step, args=(rows,))
        thread.start()
        thread.join()

    first = resource.get_session()
    with session_settings(first, generated):  # what a server with Spark's defaults has
        resource.release_thread_session()  # the main thread's step ends: the first is free
        run_step(SMALL_BATCH_ROWS - 1)
        run_step(SMALL_BATCH_ROWS)  # gets the first session back, as a server made it
        assert seen == [generated, INTERPRETED, generated, generated]
        session = resource.get_session()
        fit_code_generation(session, 10)
        fit_code_generation(session, 10)  # fitted once
        assert settings(session) == INTERPRETED
        fit_code_generation(session, 10**7)
        assert settings(session) == generated


def test_sparks_kafka_source_is_on_the_session(spark: SparkSession) -> None:
    reader = spark.readStream.format(KAFKA_FORMAT).option("includeHeaders", "true")
    frame = reader.option("kafka.bootstrap.servers", "h:1").option("subscribe", "t").load()
    assert frame.columns == [  # those of Spark's own Kafka source, with includeHeaders
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip


def test_an_unreachable_connect_server_fails_at_once_naming_its_url() -> None:
    url = f"sc://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(SparkConnectUnreachable, match=url):
        SparkResource(remote=url, connect_wait_s=0).get_session()
    assert time.monotonic() - started < 5


def test_a_run_waits_two_minutes_for_a_restarting_server_by_default() -> None:
    assert SparkResource(remote="sc://h:1").connect_wait_s == CONNECT_WAIT_S == 120


def test_a_server_that_never_comes_is_named_after_the_wait() -> None:
    url = f"sc://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(SparkConnectUnreachable, match=rf"{url} \(waited 2 s\)"):
        check_reachable(url, wait_s=2)
    assert 2 <= time.monotonic() - started < 10


def test_a_server_that_starts_during_the_wait_is_reached() -> None:
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def listen() -> None:
        server.bind(("127.0.0.1", port))
        server.listen()

    starts = threading.Timer(2.0, listen)
    starts.start()
    try:
        started = time.monotonic()
        check_reachable(f"sc://127.0.0.1:{port}", wait_s=60)
        assert 2 <= time.monotonic() - started < 30
    finally:
        starts.join()
        server.close()


def test_a_connect_urls_token_is_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    url = f"sc://127.0.0.1:{free_port()}/;user_id=ann;token=s3cr3t"
    with pytest.raises(SparkConnectUnreachable) as raised:
        check_reachable(url, wait_s=1)
    shown = url.replace("s3cr3t", "<hidden>")
    assert shown in str(raised.value) and "s3cr3t" not in str(raised.value)
    assert shown in caplog.text and "s3cr3t" not in caplog.text
    with pytest.raises(SparkConnectUnreachable) as raised:
        check_reachable("http://h:1/;token=s3cr3t")
    assert "s3cr3t" not in str(raised.value)


def test_a_remote_that_is_not_a_connect_url_is_named_in_the_error() -> None:
    with pytest.raises(SparkConnectUnreachable, match="http://host:15002"):
        SparkResource(remote="http://host:15002").get_session()


def test_quick_start_options_name_the_archive_only_when_it_exists(tmp_path: Path) -> None:
    archive = tmp_path / "driver.jsa"
    assert quick_start_options(archive) == "-XX:TieredStopAtLevel=1"
    archive.write_bytes(b"x")
    assert quick_start_options(archive) == (
        f"-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile={archive}"
    )
    assert quick_start_options(archive, quick_jit=False) == f"-XX:SharedArchiveFile={archive}"


def start_local_spark_in_a_child(
    conf: dict[str, str], java_options: str = ""
) -> subprocess.CompletedProcess[str]:
    """Start a local Spark application with ``conf`` in a new process (its JVM launched with
    ``java_options`` before any of Spark's); print its driver's JVM options, then count 3 rows."""
    code = (
        "import sys, json; from resources import SparkResource; "
        "spark = SparkResource(spark_config=json.loads(sys.argv[1])).get_session(); "
        "print(spark.sparkContext.getConf().get('spark.driver.extraJavaOptions')); "
        "print(spark.range(3).count())"
    )
    command = [sys.executable, "-c", code, json.dumps(conf)]
    # An application of its own, beside the session's server: a metastore of its own too.
    env = {**without_connect(os.environ), ENV_METASTORE: new_metastore()}
    if java_options:
        env["JDK_JAVA_OPTIONS"] = java_options
    return subprocess.run(command, capture_output=True, text=True, env=env)


@pytest.mark.services  # starts a local Spark driver
def test_a_local_driver_jvm_starts_from_the_installed_archive_which_fits_this_jdk() -> None:
    assert DEFAULT_ARCHIVE.is_file(), "no class archive: `make install` writes it"
    # -Xshare:on makes an archive the JVM cannot use an error instead of a warning.
    child = start_local_spark_in_a_child({}, java_options="-Xshare:on")
    assert child.returncode == 0, child.stderr[-2000:]
    options, count = child.stdout.strip().splitlines()[-2:]
    assert quick_start_options(DEFAULT_ARCHIVE) in options
    assert count == "3"


def test_every_connect_server_maps_the_archive_with_a_late_c2_unless_told_otherwise() -> None:
    assert DEFAULT_ARCHIVE.is_file(), "no class archive: `make install` writes it"
    postgres = "postgresql://hive@db/metastore"  # no Derby, no Derby log
    options = SparkConnectServer(metastore=postgres).conf["spark.driver.extraJavaOptions"]
    late_c2 = ("-XX:Tier4InvocationThreshold=40000 -XX:Tier4MinInvocationThreshold=4800 "
               "-XX:Tier4CompileThreshold=120000 -XX:Tier4BackEdgeThreshold=320000")  # fmt: skip
    base, agent = f"-XX:SharedArchiveFile={DEFAULT_ARCHIVE} {late_c2}", delta_agent_option()
    assert agent == f"-javaagent:{DELTA_AGENT_JAR}"
    assert options == f"{base} {agent}"
    assert "TieredStopAtLevel" not in options  # the full JIT, C2 included
    more = SparkConnectServer(java_options="-XX:+UseParallelGC", metastore=postgres).conf
    assert more["spark.driver.extraJavaOptions"] == f"{options} -XX:+UseParallelGC"
    derby = SparkConnectServer(metastore="/data/metastore").conf["spark.driver.extraJavaOptions"]
    assert derby == f"{base} -Dderby.stream.error.file=/data/metastore/derby.log {agent}"
    own = {"spark.driver.extraJavaOptions": "-Xss4m"}
    assert SparkConnectServer(conf=own, java_options="-XX:+UseParallelGC").conf == own


@pytest.mark.services  # starts a local Spark driver
def test_an_unusable_archive_costs_time_not_the_run(tmp_path: Path) -> None:
    stale = tmp_path / "stale.jsa"
    stale.write_bytes(b"not a class archive")
    java_options = quick_start_options(stale)
    child = start_local_spark_in_a_child({"spark.driver.extraJavaOptions": java_options})
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip().endswith("3")


def test_a_frame_cached_for_a_block_is_released_after_it_even_when_the_block_fails(
    spark: SparkSession,
) -> None:
    # The application's cache outlives sessions: a frame left cached stays for the server's life.
    frame = spark.range(7).withColumn("doubled", F.col("id") * 2)
    with pytest.raises(RuntimeError, match="the write failed"), cached(frame) as rows:
        assert rows.count() == 7
        assert frame.storageLevel != StorageLevel.NONE  # the same plan: cached
        raise RuntimeError("the write failed")
    assert frame.storageLevel == StorageLevel.NONE


def jobs_per_append_in_a_child(time_zone: str) -> list[int]:
    """The Spark jobs of each of 3 small appends to a Delta table, by a local Spark application
    of the project's settings in a new process whose host time zone is ``time_zone``."""
    code = """if True:
        import sys
        from resources import SparkResource
        spark = SparkResource().get_session()
        rows = spark.createDataFrame([(1, "a")], "id long, v string")
        rows.write.format("delta").save(sys.argv[1])
        for n in range(3):
            spark.sparkContext.setJobGroup(f"append{n}", "append")
            rows.write.format("delta").mode("append").save(sys.argv[1])
            print(len(spark.sparkContext.statusTracker().getJobIdsForGroup(f"append{n}")))
    """
    env = {**without_connect(os.environ), ENV_METASTORE: new_metastore(), "TZ": time_zone}
    table = Path(new_metastore()) / "table"
    child = subprocess.run(
        [sys.executable, "-c", code, str(table)], capture_output=True, text=True, env=env
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return [int(line) for line in child.stdout.split()]


@pytest.mark.services  # starts local Spark drivers
def test_a_host_outside_utc_costs_a_delta_commit_no_more_spark_jobs() -> None:
    """Delta 4.4 rebuilds a table's state at every commit to check its checksum when the JVM's
    zone is not UTC (``allFilesInCrc.verificationMode.forceOnNonUTC``), unless told not to."""
    assert jobs_per_append_in_a_child("America/New_York") == jobs_per_append_in_a_child("UTC")


# docs/jars.md, "Delta's checkpoint interval": a table the project creates checkpoints every 50.
CHECKPOINT_INTERVAL = "50"


def test_a_new_table_carries_the_projects_checkpoint_interval(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A table created by a write and one created by Delta's streaming sink (bronze's) keep the
    interval as their property, which every later writer follows."""
    source, sink = tmp_path / "written", tmp_path / "streamed"
    delta.append(spark.createDataFrame([(1, "a")], "id long, v string"), str(source))
    stream = spark.readStream.format("delta").load(str(source))
    run_available_now(stream, str(sink), str(tmp_path / "checkpoint"), "interval")
    for table in (source, sink):
        properties = DeltaTable(str(table)).metadata().configuration
        assert properties.get("delta.checkpointInterval") == CHECKPOINT_INTERVAL, table


def test_a_stray_file_in_a_new_streams_checkpoint_is_not_called_another_run(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Spark refuses to start a stream it finds new (no batch's offsets) whose checkpoint holds
    files. That is another run of it only once that run's first offsets are there; a file left
    behind is Spark's own error, which says to clear the checkpoint."""
    source, sink, checkpoint = tmp_path / "written", tmp_path / "streamed", tmp_path / "checkpoint"
    delta.append(spark.createDataFrame([(1, "a")], "id long, v string"), str(source))
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "left-behind").write_text("")
    stream = spark.readStream.format("delta").load(str(source))
    with pytest.raises(PySparkException, match=CHECKPOINT_NOT_EMPTY):  # not StreamRunElsewhere
        run_available_now(stream, str(sink), str(checkpoint), "stray")
