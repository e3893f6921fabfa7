"""The commands a user runs: the demo, and the standard Dagster CLI against any broker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from lakehouse_assets import sample_data
from lakehouse_assets.constants import BRONZE, KAFKA_TOPICS
from resources import LakeResource
from resources.broker import EmbeddedBroker

REPO_ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent


def run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("KAFKA_BOOTSTRAP_SERVERS",)}
    return subprocess.run(
        command, cwd=REPO_ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=600
    )


def test_demo_on_the_embedded_broker_prints_every_bronze_table(tmp_path: Path) -> None:
    lake_root = tmp_path / "lake"
    done = run(
        [str(BIN / "lakehouse"), "demo", "--users", "3", "--days", "1"],
        {"LAKEHOUSE_ROOT": str(lake_root)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    expected = Counter(m.topic for m in sample_data.generate(users=3, days=1).messages)
    for topic in KAFKA_TOPICS:
        assert re.search(rf"^{BRONZE}\.{topic} +{expected[topic]}$", done.stdout, re.MULTILINE)
    assert "gold.workout_bpm_summary (" in done.stdout and "gold.gym_summary (" in done.stdout
    # A second demo resets its own lake (the embedded broker starts empty) and succeeds again.
    again = run(
        [str(BIN / "lakehouse"), "demo", "--users", "3", "--days", "1"],
        {"LAKEHOUSE_ROOT": str(lake_root)},
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert LakeResource(root=str(lake_root)).row_count(BRONZE, "bpm") == expected["bpm"]


def test_dagster_cli_materializes_bronze_against_the_given_broker(tmp_path: Path) -> None:
    messages = sample_data.generate(users=2, days=1, seed=3).messages
    with EmbeddedBroker() as broker:
        sample_data.produce(broker.bootstrap_servers, messages)
        env = {"KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers, "LAKEHOUSE_ROOT": str(tmp_path)}
        command = [
            str(BIN / "dagster"),
            "asset",
            "materialize",
            "-m",
            "lakehouse_assets.definitions",
            "--select",
            'key:"bronze/*"',
        ]
        done = run(command, env)
    assert done.returncode == 0, done.stderr[-3000:]
    lake = LakeResource(root=str(tmp_path))
    expected = Counter(m.topic for m in messages)
    assert {t: lake.row_count(BRONZE, t) for t in KAFKA_TOPICS} == dict(expected)


def test_broker_command_stops_its_broker_on_sigterm() -> None:
    import signal
    import socket
    import time

    from resources.broker import free_port

    port = free_port()
    command = [str(BIN / "lakehouse"), "broker", "--port", str(port)]
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert "listening" in process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    time.sleep(0.5)
    with socket.socket() as probe:  # nothing listens on the port any more
        assert probe.connect_ex(("127.0.0.1", port)) != 0
