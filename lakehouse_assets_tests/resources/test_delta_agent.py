"""The Delta agent (``resources.spark_jvm.DELTA_AGENT_JAR``): a snapshot answers its set
transactions, file count and size from its checksum without rebuilding its state, the same
answers as Delta's own, and falls back to Delta's own path wherever the checksum cannot answer.
The exactly-once and crash tests of bronze and the s3a:// writers run with it too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lakehouse_assets_tests.conftest import new_metastore
from resources.settings import ENV_METASTORE
from resources.spark_jvm import DELTA_AGENT_JAR, without_connect

REPO_ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each table shape's answers, from a local Spark of the project's settings in a child."""
    folder = tmp_path_factory.mktemp("delta_agent")
    env = {**without_connect(os.environ), ENV_METASTORE: new_metastore()}
    module = "lakehouse_assets_tests.resources.delta_agent_child"
    child = subprocess.run(
        [sys.executable, "-m", module, str(folder)],
        capture_output=True, text=True, env=env, cwd=REPO_ROOT, timeout=900,
    )  # fmt: skip
    assert child.returncode == 0, child.stderr[-3000:]
    return json.loads(child.stdout.strip().splitlines()[-1])


pytestmark = pytest.mark.services  # a local Spark driver of its own


def test_the_agent_is_compiled_by_the_install() -> None:
    assert DELTA_AGENT_JAR.is_file(), "`lakehouse jars` (make install) compiles it with javac"


@pytest.mark.parametrize(
    ("shape", "marker", "files"),
    # Hand-counted: one streaming batch is one file and one marker (the batch's number).
    [("spark", 2, 3), ("checkpoint", 11, 12)],
)
def test_a_version_with_its_checksum_answers_from_it_as_delta_would(
    shapes: dict[str, Any], shape: str, marker: int, files: int
) -> None:
    served, own = shapes[shape]["true"], shapes[shape]["false"]
    assert not served["rebuilt"]
    assert shapes[shape].get("checkpointed", shape != "checkpoint")  # the version 10 checkpoint
    assert [version for _, version in served["transactions"]] == [marker]
    assert served["files"] == files
    assert {k: v for k, v in served.items() if k != "rebuilt"} == {
        k: v for k, v in own.items() if k != "rebuilt"
    }


@pytest.mark.parametrize(
    ("shape", "marker", "files"),
    [("deleted", 2, 3), ("delta_rs", 1, 3), ("expiring", 1, 2)],
)
def test_where_the_checksum_cannot_answer_delta_rebuilds_the_state(
    shapes: dict[str, Any], shape: str, marker: int, files: int
) -> None:
    """A deleted N.crc; a version delta-rs wrote after Spark's (no checksum of it); markers that
    expire (delta.setTransactionRetentionDuration)."""
    served, own = shapes[shape]["true"], shapes[shape]["false"]
    assert served["rebuilt"]
    assert [version for _, version in served["transactions"]] == [marker]
    assert served["files"] == files
    assert served == own
