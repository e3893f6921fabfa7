"""The commands a user runs: the demo's lake, and the standard Dagster CLI against any broker.
(`lakehouse demo` itself runs in test_standalone, on a standalone cluster.)"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from datetime import date
from pathlib import Path

import pytest

from lakehouse_assets import sample_data
from lakehouse_assets.constants import BRONZE, GYM_SUMMARY, KAFKA_TOPICS, WORKOUT_BPM_SUMMARY
from lakehouse_assets.demo import DEMO_MARKER, prepare_demo_lake
from lakehouse_assets.devtools.broker import EmbeddedBroker
from lakehouse_assets_tests.test_end_to_end import AS_OF, assert_reports_match, gold_rows
from resources import ENV_KAFKA_BOOTSTRAP_SERVERS as ENV_KAFKA
from resources import ENV_SPARK_REMOTE, LakeResource

REPO_ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent
DEFINITIONS = "lakehouse_assets.definitions"


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``command`` with ``env``; without a broker or Spark Connect server of the test session's
    (a command starts its own, or a local Spark application)."""
    clean = {k: v for k, v in os.environ.items() if k not in (ENV_KAFKA, ENV_SPARK_REMOTE)}
    return subprocess.run(
        command, cwd=REPO_ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=600
    )


def test_a_demo_lake_is_reset_for_the_next_demo_and_any_other_lake_refused(tmp_path: Path) -> None:
    # The embedded broker starts empty: an earlier demo's checkpoints would point past its end.
    demo_lake, other_lake = tmp_path / "demo", tmp_path / "other"
    prepare_demo_lake(demo_lake, embedded=True)
    (demo_lake / "bronze").mkdir()
    prepare_demo_lake(demo_lake, embedded=True)
    assert [path.name for path in demo_lake.iterdir()] == [DEMO_MARKER]
    (other_lake / "bronze").mkdir(parents=True)
    prepare_demo_lake(other_lake, embedded=False)  # a real broker: its lake is kept
    with pytest.raises(SystemExit, match="was not made by an embedded-broker demo"):
        prepare_demo_lake(other_lake, embedded=True)
    assert (other_lake / "bronze").is_dir()


@pytest.mark.own_stack  # on a local Spark application (no SPARK_REMOTE): beside the main suite
def test_dagster_cli_materializes_the_whole_graph_from_any_year_against_the_given_broker(
    tmp_path: Path,
) -> None:
    day = date(2023, 3, 14)  # before the default first gold day: LAKEHOUSE_GOLD_START_DATE opens it
    sample = sample_data.generate(users=2, days=1, first_day=day, seed=3)
    sample_data.write_landing(tmp_path, sample.files)
    materialize = [str(BIN / "dagster"), "asset", "materialize", "-m", DEFINITIONS, "--select"]
    with EmbeddedBroker() as broker:
        sample_data.produce(broker.bootstrap_servers, sample.messages)
        env = {
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
            "LAKEHOUSE_ROOT": str(tmp_path),
            "LAKEHOUSE_AS_OF_DATE": AS_OF.isoformat(),
            "LAKEHOUSE_GOLD_START_DATE": "2023-03-01",
        }
        refresh = run([*materialize, "group:bronze or group:silver"], env)
        assert refresh.returncode == 0, refresh.stderr[-3000:]
        days = f"{day.isoformat()}...{day.isoformat()}"
        gold = run([*materialize, "group:gold", "--partition-range", days], env)
        assert gold.returncode == 0, gold.stderr[-3000:]
    lake = LakeResource(root=str(tmp_path))
    expected = Counter(m.topic for m in sample.messages)
    assert {t: lake.row_count(BRONZE, t) for t in KAFKA_TOPICS} == dict(expected)
    # The sample's one day is the whole of gold: every row as the oracle computes it.
    reports = [gold_rows(lake, table) for table in (WORKOUT_BPM_SUMMARY, GYM_SUMMARY)]
    assert_reports_match(*reports, lake, [sample])


def test_broker_command_stops_its_broker_on_sigterm(tmp_path: Path) -> None:
    import signal
    import socket
    import time

    from lakehouse_assets.devtools.broker import free_port

    port = free_port()
    data = tmp_path / "kafka"
    command = [str(BIN / "lakehouse"), "broker", "--port", str(port), "--data", str(data)]
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert "listening" in process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    time.sleep(0.5)
    with socket.socket() as probe:  # nothing listens on the port any more
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    assert (data / "log" / "meta.properties").is_file()  # its records are kept
