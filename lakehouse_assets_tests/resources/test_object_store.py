"""The lake on object storage: the settings each engine takes from the standard variables, a clear
error for a root that cannot be used, the S3 server's conditional writes, and the lake's own calls
on an ``s3a://`` root of the session's S3 endpoint (S3Proxy on loopback)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import dagster as dg
import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.bronze.position import StreamPosition
from lakehouse_assets.constants import BRONZE, CHECKPOINTS_DIR, LANDING_DIR, asset_key
from lakehouse_assets.definitions import defs
from lakehouse_assets.fitness.names import LANDING_GYM_LOGINS, TOPIC_BPM
from lakehouse_assets.fitness.pipeline import bronze_landing_assets
from lakehouse_assets.schedules.profiles import profile_job
from lakehouse_assets_tests.bronze.helpers import (
    bronze_sequence_numbers,
    heart_rates,
    materialize_bpm,
)
from lakehouse_assets_tests.conftest import S3_BUCKET, observations, produce
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.s3_endpoint import ACCESS_KEY, REGION, SECRET_KEY, S3Endpoint
from resources import LakeResource, checkpoints, files, object_store
from resources.object_store import LakeRootUnreachable
from resources.settings import ENV_PROFILE

pytestmark = pytest.mark.external  # an S3 endpoint

GYM_ASSET = next(a for a in bronze_landing_assets if a.key == asset_key(BRONZE, LANDING_GYM_LOGINS))


def test_spark_reaches_the_endpoint_of_the_standard_variables_path_style() -> None:
    environ = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-3"}
    assert object_store.spark_settings(environ) == {
        "spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:9000",
        "spark.hadoop.fs.s3a.path.style.access": "true",
        "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
        "spark.hadoop.fs.s3a.endpoint.region": "eu-west-3",
    }
    assert object_store.delta_rs_options(environ) == {"AWS_ALLOW_HTTP": "true"}
    # A TLS endpoint needs nothing of delta-rs; the region may come from the older variable.
    environ = {"AWS_ENDPOINT_URL": "https://s3.example.com", "AWS_DEFAULT_REGION": "us-west-2"}
    assert object_store.spark_settings(environ)["spark.hadoop.fs.s3a.endpoint"] == (
        "https://s3.example.com"
    )
    assert object_store.spark_settings(environ)["spark.hadoop.fs.s3a.connection.ssl.enabled"] == (
        "true"
    )
    assert object_store.spark_settings(environ)["spark.hadoop.fs.s3a.endpoint.region"] == (
        "us-west-2"
    )
    assert object_store.delta_rs_options(environ) == {}
    assert object_store.spark_settings({}) == {}  # AWS itself: S3A's own defaults


def test_a_root_without_its_bucket_is_named_before_any_step_runs(
    s3_endpoint: S3Endpoint, env: dict[str, Any]
) -> None:
    env["lake"] = LakeResource(root="s3a://no-such-bucket/lake")
    with pytest.raises(dg.DagsterResourceFunctionError) as failure:
        dg.materialize([GYM_ASSET], resources=env)
    assert isinstance(failure.value.__cause__, LakeRootUnreachable)
    message = str(failure.value.__cause__)
    assert "s3a://no-such-bucket/lake" in message
    assert "bucket 'no-such-bucket' does not exist" in message


def test_an_endpoint_that_does_not_answer_is_named_with_the_root(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    with pytest.raises(LakeRootUnreachable, match=r"s3a://lake/p.*127\.0\.0\.1:1"):
        object_store.check_root("s3a://lake/p")
    object_store.check_root("relative/folder")  # a local root needs no store


def test_refused_credentials_are_named_with_the_root(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "nobody")
    with pytest.raises(LakeRootUnreachable, match=r"s3a://lake/lake.*ACCESS_DENIED"):
        object_store.check_root(f"s3a://{S3_BUCKET}/lake")


def s3_client(endpoint: S3Endpoint) -> Any:
    """A boto3 client of ``endpoint`` with its access key."""
    return boto3.client(
        "s3",
        endpoint_url=endpoint.address,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
    )


def test_of_writers_racing_to_create_one_key_the_s3_server_lets_one_win(
    s3_endpoint: S3Endpoint,
) -> None:
    # What the s3a:// log store relies on: a PUT with If-None-Match: * is refused (412) when the
    # key exists, the check and the write one step, however many writers race.
    client = s3_client(s3_endpoint)

    def create(key: str, writer: int) -> int:
        try:
            client.put_object(Bucket=S3_BUCKET, Key=key, Body=b"%d" % writer, IfNoneMatch="*")
        except botocore.exceptions.ClientError as refused:
            return refused.response["ResponseMetadata"]["HTTPStatusCode"]
        return 200

    for attempt in range(5):
        key = f"race/_delta_log/{attempt:020}.json"
        with ThreadPoolExecutor(max_workers=16) as pool:
            answers = list(pool.map(create, [key] * 16, range(16)))
        assert sorted(answers) == [200] + [412] * 15
        winner = answers.index(200)
        body = client.get_object(Bucket=S3_BUCKET, Key=key)["Body"].read()
        assert body == b"%d" % winner  # the one that won wrote the object, once


def test_a_listing_beside_a_writer_shows_every_object_the_writer_made(
    s3_endpoint: S3Endpoint,
) -> None:
    # What Delta's readers rely on (S3 lists consistently): each version listed, none skipped.
    # Each PUT puts a temporary file beside its object on the server's disk and removes it; the
    # pinned S3Proxy release stopped a listing at such a file and dropped what came after it.
    # S3Proxy lists that file while it is there (`<key>-<uuid>`), as no log file: Delta reads only
    # names that are one whole (`<digits>.json`, its `FileNames.deltaFilePattern`), as this does.
    client = s3_client(s3_endpoint)
    folder = f"{uuid.uuid4().hex}/_delta_log/"
    versions = 400

    def write() -> None:
        for version in range(versions):
            key = f"{folder}{version:020}.json"
            client.put_object(Bucket=S3_BUCKET, Key=key, Body=b"{}", IfNoneMatch="*")

    gaps = []
    with ThreadPoolExecutor(max_workers=1) as pool:
        writing = pool.submit(write)
        while not writing.done():
            listed = client.list_objects_v2(Bucket=S3_BUCKET, Prefix=folder).get("Contents", [])
            names = [item["Key"].rsplit("/", 1)[1] for item in listed]
            seen = [int(name[:20]) for name in names if re.fullmatch(r"\d{20}\.json", name)]
            if seen != list(range(len(seen))):  # the writer goes in order: 0 to n, no hole
                gaps.append(seen)
        writing.result()
    assert gaps == []
    listed = client.list_objects_v2(Bucket=S3_BUCKET, Prefix=folder)["Contents"]
    assert len(listed) == versions


def test_files_and_checkpoints_on_the_object_store(s3_lake_root: str) -> None:
    files.write_text(f"{s3_lake_root}/schemas/a.json", '{"a": 1}')
    assert files.read_text(f"{s3_lake_root}/schemas/a.json") == '{"a": 1}'
    assert files.read_text(f"{s3_lake_root}/schemas/none.json") is None
    files.make_folder(f"{s3_lake_root}/landing/empty")
    assert checkpoints.landed_files(f"{s3_lake_root}/landing/empty") == set()

    checkpoint = f"{s3_lake_root}/{CHECKPOINTS_DIR}/stream"
    checkpoints.record_cluster(checkpoint, "cluster-1")
    files.write_text(f"{checkpoint}/offsets/0", "v1\n{}\n{}")
    kept = checkpoints.set_aside(checkpoint)
    assert checkpoints.recorded_cluster(kept) == "cluster-1"
    assert files.read_text(f"{kept}/offsets/0") == "v1\n{}\n{}"
    assert checkpoints.recorded_cluster(checkpoint) is None  # the stream starts anew


def test_bronze_streams_land_exactly_once_on_the_object_store(
    broker: EmbeddedBroker, s3_resources: dict[str, Any], s3_lake_root: str, spark: SparkSession
) -> None:
    lake: LakeResource = s3_resources["lake"]
    s3_resources["kafka"].create_topic(TOPIC_BPM, partitions=2)
    produced = 0
    for size in (300, 0, 200):
        produced += produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(produced, size))
        materialize_bpm(s3_resources)
        assert bronze_sequence_numbers(spark, s3_resources) == list(range(produced))
    assert lake.row_count(BRONZE, TOPIC_BPM) == produced  # the log, read by delta-rs
    ends = s3_resources["kafka"].end_offsets([TOPIC_BPM])  # the lag sensor's question:
    assert StreamPosition(lake, TOPIC_BPM).kafka_caught_up(ends)

    dg.materialize([GYM_ASSET], resources=s3_resources)  # no landing folder yet: an empty table
    landing = lake.path(LANDING_DIR, LANDING_GYM_LOGINS)
    files.write_text(f"{landing}/a.csv", "mac_address,gym,login,logout\nm1,5,100,200\n")
    files.write_text(f"{landing}/b.csv", "mac_address,gym,login,logout\n")
    dg.materialize([GYM_ASSET], resources=s3_resources)
    dg.materialize([GYM_ASSET], resources=s3_resources)  # nothing new
    rows = lake.read(spark, BRONZE, LANDING_GYM_LOGINS).select("line", "source_file").collect()
    assert sorted((bytes(r.line), os.path.basename(r.source_file)) for r in rows) == [
        (b"m1,5,100,200", "a.csv"),
        (b"mac_address,gym,login,logout", "a.csv"),
        (b"mac_address,gym,login,logout", "b.csv"),
    ]
    assert StreamPosition(lake, LANDING_GYM_LOGINS).landing_caught_up(landing)  # the file sensor's

    # The nightly jobs: compaction and VACUUM, then a profile of each column, on S3.
    files_before = len(lake.table(BRONZE, TOPIC_BPM).file_uris())
    assert files_before > 1  # two partitions, two runs with records
    result = defs.get_job_def("maintain_bronze").execute_in_process(resources=s3_resources)
    observed = observations(result)[asset_key(BRONZE, TOPIC_BPM)].metadata
    assert (observed["files_before"].value, observed["files_after"].value) == (files_before, 1)
    assert observed["files_vacuumed"].value == 0  # younger than the retention
    assert bronze_sequence_numbers(spark, s3_resources) == list(range(produced))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_PROFILE, "schedule")
        result = profile_job({BRONZE: [TOPIC_BPM]}).execute_in_process(resources=s3_resources)
    assert asset_key(BRONZE, TOPIC_BPM) in observations(result)
    columns = len(lake.read(spark, BRONZE, TOPIC_BPM).columns)
    assert lake.read(spark, "profiles", f"{BRONZE}__{TOPIC_BPM}").count() == columns


def test_a_command_on_a_root_without_its_bucket_says_so_and_writes_nothing(
    s3_endpoint: S3Endpoint,
) -> None:
    env = {**os.environ, "LAKEHOUSE_ROOT": "s3a://no-such-bucket/lake"}
    env["KAFKA_BOOTSTRAP_SERVERS"] = "127.0.0.1:1"  # never reached: the root fails first
    command = [str(Path(sys.executable).parent / "lakehouse"), "produce-sample", "--users", "2"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "The lake root s3a://no-such-bucket/lake cannot be used" in done.stderr
    assert "Traceback" not in done.stderr
