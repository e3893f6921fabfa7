"""The main job once on a Spark standalone cluster (a master and two workers started from the
pyspark wheel, a Connect server whose executors run on them): `lakehouse demo` on its embedded
broker prints every bronze table's rows and both gold reports, and gold equals the oracle's.
(Without SPARK_REMOTE the demo starts its own Connect server exactly as the test session starts
its shared one: conftest.py.)"""

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

from lakehouse_assets import sample_data
from lakehouse_assets.constants import BRONZE, GYM_SUMMARY, KAFKA_TOPICS, WORKOUT_BPM_SUMMARY
from lakehouse_assets.devtools.spark_server import SparkConnectServer
from lakehouse_assets.devtools.standalone import standalone_cluster
from lakehouse_assets_tests.test_end_to_end import AS_OF, assert_reports_match, gold_rows
from resources import LakeResource

BIN = Path(sys.executable).parent
USERS, DAYS = 4, 2  # the demo's sample: generate(users, days) with its default first day and seed
EXECUTORS = {"spark.executor.memory": "1g", "spark.executor.cores": "1", "spark.cores.max": "2"}


@pytest.mark.own_stack  # its own Spark and broker: beside the main suite
def test_the_demo_on_a_standalone_cluster_reaches_the_oracles_gold(tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path / "lake"))
    with (
        standalone_cluster(workers=2) as master,
        SparkConnectServer(master=master.url, conf=EXECUTORS) as server,
    ):
        env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
        env |= {"LAKEHOUSE_ROOT": lake.root, "SPARK_REMOTE": server.url}
        env |= {"LAKEHOUSE_AS_OF_DATE": AS_OF.isoformat()}
        command = [str(BIN / "lakehouse"), "demo", "--users", str(USERS), "--days", str(DAYS)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
        with urlopen(master.status_url) as response:
            status = json.load(response)
    apps = [app for app in status["activeapps"] if app["name"] == "lakehouse-connect"]
    assert [app["cores"] for app in apps] == [2]  # one executor on each worker
    assert sorted(worker["coresused"] for worker in status["workers"]) == [1, 1]

    batches = [sample_data.generate(USERS, DAYS)]
    produced = Counter(m.topic for m in batches[0].messages)
    for topic in KAFKA_TOPICS:
        line = rf"^{BRONZE}\.{topic} +{produced[topic]} +\d+\.\d$"  # table, rows, seconds
        assert re.search(line, done.stdout, re.MULTILINE), done.stdout[-3000:]
    assert "gold.workout_bpm_summary (" in done.stdout and "gold.gym_summary (" in done.stdout
    assert_reports_match(
        gold_rows(lake, WORKOUT_BPM_SUMMARY), gold_rows(lake, GYM_SUMMARY), lake, batches
    )
