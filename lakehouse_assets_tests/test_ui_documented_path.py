"""The "Dagster UI" path (docs/dagster.md) as a new user walks it: an empty instance, the
embedded broker, `lakehouse produce-sample`, then `lakehouse dev` (what `make dev` runs) with the
daemon left to run by itself, on a Spark Connect server of the test's own (beside the main suite;
one that `lakehouse dev` starts would outlive the SIGKILL that ends it here): the sensors launch
bronze's runs, which take silver with them. Then, in headless Chromium: bronze's page shows the
row count of its run, and a sensor's latest tick says why it launched nothing.

(The daemon's automation on to gold is the fault matrix's, on `lakehouse up`; a table page's
column descriptions and profile are test_ui's.)
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
from playwright.sync_api import expect, sync_playwright

from lakehouse_assets.constants import BRONZE, SILVER, asset_key
from lakehouse_assets.fitness.names import HEART_RATE, TOPIC_BPM
from lakehouse_assets.sensors.runs import runs_in_progress
from lakehouse_assets_tests.conftest import connect_server
from lakehouse_assets_tests.test_ui import CHROMIUM_ARGS, REPO_ROOT, dagster_dev, dismiss_dialog
from lakehouse_tools import sample_data
from lakehouse_tools.broker import EmbeddedBroker
from resources import ENV_SPARK_REMOTE

BPM_KEY, HEART_RATE_KEY = asset_key(BRONZE, TOPIC_BPM), asset_key(SILVER, HEART_RATE)
LAKEHOUSE = str(Path(sys.executable).parent / "lakehouse")
USERS, DAYS = 4, 2  # `produce-sample --users 4` (its default two days)
WAIT_S = 600
SENSOR_INTERVAL_S = 5


def row_count(home: Path, key: dg.AssetKey) -> int | None:
    """The row count of the latest materialization of ``key`` (None before any)."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        event = instance.get_latest_materialization_event(key)
    materialization = event.asset_materialization if event else None
    count = materialization.metadata.get("dagster/row_count") if materialization else None
    return int(count.value) if count else None  # type: ignore[arg-type]


def wait_for_runs(home: Path, key: dg.AssetKey) -> None:
    """Until no run that materializes ``key`` is queued or in progress."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            if not runs_in_progress(instance, key):
                return
        time.sleep(1)
    raise TimeoutError(f"a run of {key.to_user_string()} still in progress after {WAIT_S} s")


def wait_for_materialization(home: Path, key: dg.AssetKey, log: Path) -> int:
    """``key``'s row count once the daemon's runs have materialized it."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if (rows := row_count(home, key)) is not None:
            return rows
        time.sleep(5)
    raise TimeoutError(f"{key.to_user_string()} not materialized in {WAIT_S} s:\n"
                       f"{log.read_text()[-5000:]}")  # fmt: skip


@pytest.mark.own_stack  # its own broker and Connect server: beside the main suite
def test_the_documented_path_runs_bronze_then_silver_by_itself_and_shows_rows_and_reasons(
    tmp_path: Path,
) -> None:
    lake, home, log = tmp_path / "lake", tmp_path / "dagster_home", tmp_path / "dagster_dev.log"
    today = datetime.now(UTC).date()
    sample = sample_data.generate(USERS, DAYS, first_day=today - timedelta(days=DAYS - 1))
    bpm_records = sum(1 for message in sample.messages if message.topic == TOPIC_BPM)
    server = connect_server()
    with EmbeddedBroker() as broker, server:
        env = {
            ENV_SPARK_REMOTE: server.url,
            "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
            "LAKEHOUSE_ROOT": str(lake),
            "LAKEHOUSE_AS_OF_DATE": today.isoformat(),
            "LAKEHOUSE_SENSOR_INTERVAL_S": str(SENSOR_INTERVAL_S),
        }
        produced = subprocess.run(
            [LAKEHOUSE, "produce-sample", "--users", str(USERS)],
            cwd=REPO_ROOT, env={**env, "PATH": ""}, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert produced.returncode == 0, produced.stderr
        assert "landing files" in produced.stdout
        with dagster_dev(tmp_path, run=True, env=env) as url:
            assert wait_for_materialization(home, HEART_RATE_KEY, log) > 0  # the sensor's run
            assert row_count(home, BPM_KEY) == bpm_records  # which read them all
            wait_for_runs(home, BPM_KEY)
            time.sleep(3 * SENSOR_INTERVAL_S)  # two ticks after it, at least: both caught up
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS
                )
                try:
                    page = browser.new_page(viewport={"width": 1400, "height": 1200})
                    page.add_locator_handler(page.get_by_role("dialog"), dismiss_dialog)
                    page.goto(f"{url}/assets/bronze/bpm", wait_until="networkidle")
                    count = page.get_by_text(re.compile(r"^Row count$")).first
                    expect(count).to_be_visible(timeout=30_000)
                    expect(page.get_by_text(f"{bpm_records:,}", exact=True).first).to_be_visible()

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
