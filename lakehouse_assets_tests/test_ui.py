"""`dagster dev` serves the project, and the asset graph of the Dagster UI, opened in a real
headless Chromium driven by Playwright, shows every bronze, silver and gold asset.

With LAKEHOUSE_UI_SCREENSHOT=<path> the test also saves the graph as a PNG (the README's picture:
`LAKEHOUSE_UI_SCREENSHOT=docs/asset_graph.png make test`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from playwright.sync_api import Locator, Page, expect, sync_playwright
from pyspark.sql import SparkSession

from lakehouse_assets.constants import SILVER, asset_key
from lakehouse_assets.definitions import defs
from lakehouse_assets.fitness.names import WORKOUT_BPM
from lakehouse_assets.fitness.silver import columns as silver_columns
from lakehouse_assets.fitness.silver.assets import silver_assets
from lakehouse_assets_tests.fitness.silver.test_workout_bpm import (
    JAN_1,
    JAN_2,
    at,
    complete,
    read,
    register,
)
from lakehouse_tools.broker import free_port
from resources import ENV_DOCUMENTS_URL, ENV_LAKEHOUSE_ROOT, ENV_SPARK_CONF
from resources.settings import ENV_PROFILE

REPO_ROOT = Path(__file__).parents[1]
# Without the background-networking switches Chromium keeps dialling Google on a closed network.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
ELLIPSIS = "…"
HEARTRATE_DESCRIPTION = silver_columns.DESCRIPTIONS[WORKOUT_BPM]["heartrate"]


@contextlib.contextmanager
def dagster_dev(
    tmp_path: Path,
    prepare: Callable[[Path], None] | None = None,
    run: bool = False,
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """`dagster dev` on a free port with a fresh instance (``prepare(home)`` may fill it
    first); yields the UI's address.

    The instance is the project's `dagster.yaml`; unless ``run``, with a run queue that starts
    nothing: the daemon runs and the sensors request runs as usual, but no run executes while the
    test looks. With ``run`` it is started as the README does (`lakehouse dev`, the command of
    `make dev`). Its first-visit "Join the Dagster community" dialog is off (`nux`), as a
    returning user sees the UI.
    """
    home = tmp_path / "dagster_home"
    home.mkdir()
    instance = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
    if not run:
        instance["concurrency"]["runs"]["max_concurrent_runs"] = 0
    instance["nux"] = {"enabled": False}
    (home / "dagster.yaml").write_text(yaml.safe_dump(instance))
    if prepare is not None:
        prepare(home)
    port = free_port()
    environ = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "LAKEHOUSE_ROOT": str(tmp_path / "lake"),
        **(env or {}),
    }
    bin_dir = Path(sys.executable).parent
    if run:
        command = [str(bin_dir / "lakehouse"), "dev", "--port", str(port)]
    else:
        command = [str(bin_dir / "dagster"), "dev", "-w", "workspace.yaml", "-p", str(port)]
    log_path = tmp_path / "dagster_dev.log"
    with log_path.open("w") as log:
        server = subprocess.Popen(
            command, cwd=REPO_ROOT, env=environ, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url, server, log_path)
        yield url
    finally:
        # `dagster dev` does not stop on SIGTERM while its children start; its session holds
        # the webserver, the daemon and the code servers, and nothing else.
        os.killpg(server.pid, 9)
        server.wait()


# A document store's URL with a password, as a user sets it: the UI must never show the password.
DOCUMENTS_PASSWORD = "s3cret-Pw"
DOCUMENTS_URL = f"postgresql://lake:{DOCUMENTS_PASSWORD}@127.0.0.1:5432/docs"
# Spark settings holding an object store's secret key (docs/object_storage.md): nor this.
SPARK_SECRET = "s3cret-Key"
SPARK_CONF = json.dumps({"spark.hadoop.fs.s3a.secret.key": SPARK_SECRET})


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One `dagster dev` for the module's tests that only look."""
    env = {ENV_DOCUMENTS_URL: DOCUMENTS_URL, ENV_SPARK_CONF: SPARK_CONF}
    with dagster_dev(tmp_path_factory.mktemp("ui"), env=env) as url:
        yield url


def wait_until_serving(url: str, server: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"dagster dev exited:\n{log_path.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(f"{url}/server_info", timeout=2)
            return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"dagster dev did not answer in 120 s:\n{log_path.read_text()[-3000:]}")


def shows(label: str, name: str) -> bool:
    """Whether a node label shows ``name``: whole, or middle-truncated as ``head…tail``."""
    if ELLIPSIS not in label:
        return label == name
    head, tail = label.split(ELLIPSIS)
    return len(head) + len(tail) < len(name) and name.startswith(head) and name.endswith(tail)


ASSET_LABELS = "[class*='AssetNode_assetName']"  # the name on an asset node of the graph
# The labels wholly visible: inside the window and not under a toolbar or panel.
VISIBLE_LABELS = """(selector) => Array.from(document.querySelectorAll(selector))
    .filter((label) => {
        const box = label.getBoundingClientRect();
        const corners = [[box.left + 1, box.top + 1], [box.right - 1, box.bottom - 1]];
        return box.width > 0 && corners.every(([x, y]) => {
            const top = document.elementFromPoint(x, y);
            return top !== null && (label.contains(top) || top.contains(label));
        });
    })
    .map((label) => label.innerText.trim())"""


def graph_labels(page: Page) -> list[str]:
    """The names on the asset nodes that are wholly visible."""
    expect(page.get_by_role("dialog")).to_have_count(0)  # runs the dialog handler if one is up
    return page.evaluate(VISIBLE_LABELS, ASSET_LABELS)


# The buttons that close a prompt Dagster may show over the page, whenever it shows.
DISMISS_BUTTONS = re.compile(r"^(Skip|Dismiss|Close|Not now|No thanks|Got it)$", re.IGNORECASE)


def dismiss_dialog(dialog: Locator) -> None:
    """Close a dialog with its own dismiss button, or with Escape when it has none."""
    button = dialog.get_by_role("button", name=DISMISS_BUTTONS)
    if button.count():
        button.first.click()
    else:
        dialog.press("Escape")


def open_whole_graph(page: Page, url: str, asset_count: int) -> list[str]:
    """Open the global asset graph, expand every group, zoom out until every node is in view."""
    # Playwright runs the handler before any action while a dialog is up, however late it came.
    page.add_locator_handler(page.get_by_role("dialog"), dismiss_dialog)
    page.goto(f"{url}/asset-groups", wait_until="networkidle")
    zoom_out = page.locator("button:has([aria-label='zoom_out'])")
    zoom_out.wait_for()  # the graph is drawn (its groups collapsed)
    page.locator("body").press("Alt+e")  # the graph's shortcut for "Expand all groups"
    page.locator(ASSET_LABELS).first.wait_for()
    page.locator("button:has([aria-label='panel_show_right'])").last.click()  # hide the tree
    page.wait_for_timeout(1000)
    labels = graph_labels(page)
    for _ in range(12):
        if len(labels) >= asset_count:
            break
        zoom_out.click()
        page.wait_for_timeout(500)
        labels = graph_labels(page)
    return labels


def test_asset_graph_shows_every_bronze_silver_and_gold_asset(dagster_ui: str) -> None:
    keys = defs.resolve_all_asset_keys()
    names = sorted(key.path[-1] for key in keys)
    assert {key.path[0] for key in keys} == {"bronze", "silver", "gold"}
    assert len(set(names)) == len(names)  # a label identifies its asset

    chromium = shutil.which("chromium")  # Debian's; without it, Playwright's own build
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1200})
            labels = open_whole_graph(page, dagster_ui, len(names))
            if screenshot := os.environ.get("LAKEHOUSE_UI_SCREENSHOT"):
                page.screenshot(path=screenshot)
        finally:
            browser.close()

    shown = sorted(name for label in labels for name in names if shows(label, name))
    assert shown == names, f"the graph shows {labels}"


REPOSITORY = {
    "repositoryLocationName": "lakehouse_assets.definitions",
    "repositoryName": "__repository__",
}
RESOURCE_QUERY = """query Resource($selector: ResourceSelector!) {
  topLevelResourceDetailsOrError(resourceSelector: $selector) {
    __typename
    ... on ResourceDetails { configuredValues { key value type } }
  }
}"""
INSTIGATORS_QUERY = """query Instigators($repository: RepositorySelector!) {
  schedulesOrError(repositorySelector: $repository) {
    __typename
    ... on Schedules { results { name pipelineName scheduleState { status } } }
  }
  sensorsOrError(repositorySelector: $repository) {
    __typename
    ... on Sensors { results { name sensorState { status } } }
  }
}"""


def graphql(url: str, query: str, variables: dict[str, Any]) -> str:
    """The webserver's answer to ``query``, as text."""
    body = json.dumps({"query": query, "variables": variables}).encode()
    request = urllib.request.Request(f"{url}/graphql", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.read().decode()


def configured_values(url: str, resource: str) -> list[dict[str, str]]:
    """What the webserver shows of resource ``resource``'s settings."""
    answer = graphql(url, RESOURCE_QUERY, {"selector": {**REPOSITORY, "resourceName": resource}})
    details = json.loads(answer)["data"]["topLevelResourceDetailsOrError"]
    assert details["__typename"] == "ResourceDetails", answer
    return details["configuredValues"]


def test_the_ui_shows_the_variable_of_a_credential_not_its_value(dagster_ui: str) -> None:
    shown = configured_values(dagster_ui, "documents")
    assert DOCUMENTS_PASSWORD not in json.dumps(shown)
    assert {"key": "url", "value": ENV_DOCUMENTS_URL, "type": "ENV_VAR"} in shown


def test_the_ui_shows_the_variable_of_the_spark_settings_not_their_values(dagster_ui: str) -> None:
    shown = configured_values(dagster_ui, "spark")
    assert SPARK_SECRET not in json.dumps(shown)
    assert {"key": "extra_settings", "value": ENV_SPARK_CONF, "type": "ENV_VAR"} in shown


def test_the_ui_shows_which_variable_a_setting_comes_from(dagster_ui: str) -> None:
    shown = configured_values(dagster_ui, "lake")
    assert {"key": "root", "value": ENV_LAKEHOUSE_ROOT, "type": "ENV_VAR"} in shown


def test_a_new_instance_runs_the_nightly_schedules_and_the_sensors(dagster_ui: str) -> None:
    """docs/dagster.md: maintenance and profiles run nightly and the sensors launch runs by
    themselves, with nobody turning a toggle on in a new instance."""
    answer = json.loads(graphql(dagster_ui, INSTIGATORS_QUERY, {"repository": REPOSITORY}))
    schedules = answer["data"]["schedulesOrError"]
    sensors = answer["data"]["sensorsOrError"]
    assert schedules["__typename"] == "Schedules", answer
    assert sensors["__typename"] == "Sensors", answer
    scheduled = {schedule["pipelineName"] for schedule in schedules["results"]}
    assert scheduled == {"maintain_bronze", "maintain_silver", "maintain_gold", "profile_tables"}
    stopped = [
        schedule["name"]
        for schedule in schedules["results"]
        if schedule["scheduleState"]["status"] != "RUNNING"
    ] + [
        sensor["name"]
        for sensor in sensors["results"]
        if sensor["sensorState"]["status"] != "RUNNING"
    ]
    assert sensors["results"]
    assert stopped == []


def test_a_label_shows_a_name_whole_or_middle_truncated() -> None:
    assert shows("gym_logs", "gym_logs")
    assert not shows("gym_logs", "gym_logs_quarantine")
    assert shows("gym_lo…_quarantine", "gym_logins_quarantine")
    assert not shows("gym_lo…_quarantine", "gym_logs")
    assert not shows("workou…_summary", "workout_bpm")
    assert shows("workou…_summary", "workout_bpm_summary")


def materialize_profiled_workout_bpm(home: Path, env: dict[str, Any]) -> None:
    """A real run of ``silver/workout_bpm`` in the instance at ``home``, its profile on: one
    workout of user 1 (device 1001) with readings of 90 and 100 bpm inside it."""
    lake = env["lake"]
    register(lake, 1001, at(JAN_1, "08:00"))
    complete(lake, 1, at(JAN_1, "23:00"), at(JAN_2, "01:00"))
    read(lake, [(1001, at(JAN_1, "23:30"), 90.0), (1001, at(JAN_2, "00:30"), 100.0)])
    instance = dg.DagsterInstance.from_config(str(home))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(ENV_PROFILE, "materialization")
        [asset] = [a for a in silver_assets if asset_key(SILVER, WORKOUT_BPM) in a.keys]
        assert dg.materialize([asset], resources=env, instance=instance).success


def test_an_asset_page_shows_the_profile_and_columns_of_its_table(
    tmp_path: Path,
    env: dict[str, Any],
    spark: SparkSession,  # the table helpers' session
) -> None:
    def prepare(home: Path) -> None:  # the UI's lake is env's: tmp_path / "lake"
        materialize_profiled_workout_bpm(home, env)

    chromium = shutil.which("chromium")
    with dagster_dev(tmp_path, prepare) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1200})
            page.add_locator_handler(page.get_by_role("dialog"), dismiss_dialog)
            page.goto(f"{url}/assets/silver/workout_bpm", wait_until="networkidle")
            # The heart rate's row of the per-column table in the latest materialization's
            # metadata. Two readings, 90 and 100 bpm: type, count, missing, density, distinct,
            # min, max, mean; the top values tie and are listed by value.
            stats = r"^heartrate double 2 0 1 2 90\.0 100\.0 95 "
            heartrate = page.get_by_role("row", name=re.compile(stats))
            expect(heartrate).to_contain_text("'90.0' (1), '100.0' (1)", timeout=30_000)
            expect(page.get_by_text("2 rows,", exact=False).first).to_be_visible()
            # The column schema with the layer's descriptions (silver/columns.py).
            expect(page.get_by_text(HEARTRATE_DESCRIPTION).first).to_be_visible()
        finally:
            browser.close()
