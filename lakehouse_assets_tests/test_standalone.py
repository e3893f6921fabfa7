"""The commands a user runs, on a Spark standalone cluster (a master and two workers started from
the pyspark wheel, a Connect server whose executors run on them), with the lake on object storage
(an ``s3a://`` root on the session's S3 endpoint, which the executors write), one after the
other on it:

1. `lakehouse demo` on its embedded broker prints every bronze table's rows and both gold
   reports, and gold equals the oracle's;
2. the standard Dagster CLI (`dagster asset materialize`) makes the demo's gold days anew by
   partition range over the demo's lake, and gold equals the oracle's again.

(Without SPARK_REMOTE the demo starts its own Connect server exactly as the test session starts
its shared one: conftest.py. The cluster's server generates code, as `make run` does; the
session's evaluates interpreted.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.request import urlopen

import pytest

from lakehouse_assets.constants import BRONZE, GOLD
from lakehouse_assets.fitness.names import GYM_SUMMARY, KAFKA_TOPICS, WORKOUT_BPM_SUMMARY
from lakehouse_assets_tests.conftest import new_metastore
from lakehouse_assets_tests.test_end_to_end import AS_OF, assert_reports_match, gold_rows
from lakehouse_tools import sample_data
from lakehouse_tools.spark_server import SparkConnectServer
from lakehouse_tools.standalone import standalone_cluster
from resources import ENV_KAFKA_BOOTSTRAP_SERVERS as ENV_KAFKA
from resources import ENV_SPARK_REMOTE, LakeResource, files

REPO_ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
USERS, DAYS = 4, 2  # the demo's sample: generate(users, days) with its default first day and seed
EXECUTORS = {"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.cores.max": "2"}
DEFINITIONS = "lakehouse_assets.definitions"


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``command`` with ``env`` on top of the test's environment without its broker."""
    clean = {k: v for k, v in os.environ.items() if k != ENV_KAFKA}
    return subprocess.run(
        command, cwd=REPO_ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=900
    )


@pytest.mark.own_stack  # its own Spark and broker: beside the main suite
def test_the_demo_and_the_dagster_cli_on_a_standalone_cluster_reach_the_oracles_gold(
    s3_lake_root: str,
) -> None:
    with (
        standalone_cluster(workers=2) as master,
        SparkConnectServer(master=master.url, conf=EXECUTORS, metastore=new_metastore()) as server,
    ):
        spark = {ENV_SPARK_REMOTE: server.url}
        demo_lake = f"{s3_lake_root}/demo"
        assert_the_demo_reaches_gold(demo_lake, spark)
        with urlopen(master.status_url) as response:
            status = json.load(response)
        apps = [app for app in status["activeapps"] if app["name"] == "lakehouse-connect"]
        assert [app["cores"] for app in apps] == [2]  # one executor on each worker
        assert sorted(worker["coresused"] for worker in status["workers"]) == [1, 1]
        assert_the_dagster_cli_reaches_gold(demo_lake, spark)


def assert_the_demo_reaches_gold(root: str, spark: dict[str, str]) -> None:
    lake = LakeResource(root=root)
    env = {**spark, "LAKEHOUSE_ROOT": lake.root, "LAKEHOUSE_AS_OF_DATE": AS_OF.isoformat()}
    command = [str(BIN / "lakehouse"), "demo", "--users", str(USERS), "--days", str(DAYS)]
    done = run(command, env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    batches = [sample_data.generate(USERS, DAYS)]
    produced = Counter(m.topic for m in batches[0].messages)
    for topic in KAFKA_TOPICS:
        line = rf"^{BRONZE}\.{topic} +{produced[topic]} +\d+\.\d$"  # table, rows, seconds
        assert re.search(line, done.stdout, re.MULTILINE), done.stdout[-3000:]
    assert "gold.workout_bpm_summary (" in done.stdout and "gold.gym_summary (" in done.stdout
    assert_reports_match(
        gold_rows(lake, WORKOUT_BPM_SUMMARY), gold_rows(lake, GYM_SUMMARY), lake, batches
    )


def assert_the_dagster_cli_reaches_gold(root: str, spark: dict[str, str]) -> None:
    """The demo's gold days made anew by the standard CLI over its lake, the gold tables removed
    first: one partition-range run, each gold table's step in a process of its own."""
    lake = LakeResource(root=root)
    tables = (WORKOUT_BPM_SUMMARY, GYM_SUMMARY)
    days = sorted({str(row["date"]) for table in tables for row in gold_rows(lake, table)})
    for table in tables:
        files.delete_folder(lake.table_uri(GOLD, table))
    env = {**spark, "LAKEHOUSE_ROOT": lake.root, "LAKEHOUSE_AS_OF_DATE": AS_OF.isoformat()}
    command = [str(BIN / "dagster"), "asset", "materialize", "-m", DEFINITIONS]
    command += ["--select", "group:gold", "--partition-range", f"{days[0]}...{days[-1]}"]
    gold = run(command, env)
    assert gold.returncode == 0, gold.stderr[-3000:]
    bpm_summary, gym_summary = gold_rows(lake, WORKOUT_BPM_SUMMARY), gold_rows(lake, GYM_SUMMARY)
    assert_reports_match(bpm_summary, gym_summary, lake, [sample_data.generate(USERS, DAYS)])
