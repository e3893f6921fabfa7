"""The "Dagster UI" path (docs/dagster.md) as a new user walks it: an empty instance, the
embedded broker, `lakehouse produce-sample`, then `lakehouse dev` (what `make dev` runs) with the
daemon left to run everything by itself, on a Spark Connect server of the test's own (beside the
main suite; one that `lakehouse dev` starts would outlive the SIGKILL that ends it here). Then,
in headless Chromium: the gold table's page shows a non-zero row count and its column schema,
and a sensor's latest tick says why it launched nothing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
from playwright.sync_api import expect, sync_playwright

from lakehouse_assets.constants import GOLD, WORKOUT_BPM_SUMMARY, asset_key
from lakehouse_assets.devtools.broker import EmbeddedBroker
from lakehouse_assets.devtools.spark_server import SparkConnectServer
from lakehouse_assets_tests.conftest import INTERPRETED
from lakehouse_assets_tests.test_ui import CHROMIUM_ARGS, REPO_ROOT, dagster_dev, dismiss_dialog
from resources import ENV_SPARK_REMOTE

GOLD_KEY = asset_key(GOLD, WORKOUT_BPM_SUMMARY)
LAKEHOUSE = str(Path(sys.executable).parent / "lakehouse")
WAIT_FOR_GOLD_S = 600
# From gold/columns.py: what the page must show for the column `min_bpm`.
MIN_BPM = "The lowest valid heart rate during the workout, in beats per minute."


def gold_rows(home: Path) -> int:
    """The row count of the latest materialization of the gold table (0 before any)."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(GOLD_KEY)
    materialization = event.asset_materialization if event else None
    count = materialization.metadata.get("dagster/row_count") if materialization else None
    return int(count.value) if count else 0  # type: ignore[arg-type]


def wait_for_gold(home: Path, log: Path) -> int:
    deadline = time.monotonic() + WAIT_FOR_GOLD_S
    while time.monotonic() < deadline:
        if rows := gold_rows(home):
            return rows
        time.sleep(5)
    raise TimeoutError(f"no gold rows in {WAIT_FOR_GOLD_S} s:\n{log.read_text()[-5000:]}")


@pytest.mark.own_stack  # its own broker and Connect server: beside the main suite
def test_the_documented_path_shows_gold_rows_columns_and_sensor_reasons(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    server = SparkConnectServer(quick_start=True, quick_jit=False, conf=INTERPRETED)  # as conftest
    with EmbeddedBroker() as broker, server:
        env = {
            ENV_SPARK_REMOTE: server.url,
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
            "LAKEHOUSE_ROOT": str(lake),
            "LAKEHOUSE_SENSOR_INTERVAL_S": "5",
        }
        produced = subprocess.run(
            [LAKEHOUSE, "produce-sample", "--users", "4"],
            cwd=REPO_ROOT, env={**env, "PATH": ""}, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert produced.returncode == 0, produced.stderr
        assert "landing files" in produced.stdout
        with dagster_dev(tmp_path, run=True, env=env) as url:
            rows = wait_for_gold(tmp_path / "dagster_home", tmp_path / "dagster_dev.log")
            assert rows > 0
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS
                )
                try:
                    page = browser.new_page(viewport={"width": 1400, "height": 1200})
                    page.add_locator_handler(page.get_by_role("dialog"), dismiss_dialog)
                    page.goto(f"{url}/assets/gold/workout_bpm_summary", wait_until="networkidle")
                    expect(page.get_by_text(MIN_BPM).first).to_be_visible(timeout=30_000)
                    count = page.get_by_text(re.compile(r"^Row count$")).first
                    expect(count).to_be_visible()
                    expect(page.get_by_text(f"{rows:,}", exact=True).first).to_be_visible()

                    sensor = f"{url}/locations/lakehouse_assets.definitions/sensors/bpm_kafka_lag"
                    page.goto(sensor, wait_until="networkidle")
                    # The tick's log opens in a dialog: from here on a dialog is wanted.
                    page.remove_locator_handler(page.get_by_role("dialog"))
                    # The newest tick but one: the newest may still be evaluating.
                    page.get_by_role("button", name="View logs").nth(1).click()
                    reason = re.compile(r"lakehouse-bronze-bpm is caught up: 0 records waiting")
                    logs = page.get_by_role("dialog")
                    expect(logs.get_by_text(reason).first).to_be_visible(timeout=30_000)
                finally:
                    browser.close()
