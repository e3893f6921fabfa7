"""A run killed in the middle of a batch, then re-run, loses nothing and duplicates nothing.

The kill comes where the batch is committed: in the run's own process on a local Spark, in a
Python worker of the Spark Connect server otherwise (a server started for these tests, whose
workers arm the kill switch through ``sitecustomize``). Either just before the Delta commit (the
batch's files are written, not committed) or just after it (committed, and Spark has not recorded
the batch as done).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE, CHECKPOINTS_DIR, TOPIC_BPM, stream_name
from lakehouse_assets.devtools.broker import EmbeddedBroker
from lakehouse_assets.devtools.spark_server import SparkConnectServer
from lakehouse_assets_tests.bronze import crash_run, kill_switch
from lakehouse_assets_tests.bronze.helpers import (
    bronze_sequence_numbers,
    heart_rates,
    materialize_bpm,
)
from lakehouse_assets_tests.conftest import produce
from resources import ENV_SPARK_REMOTE, KafkaResource

pytestmark = pytest.mark.local_spark  # also on a local Spark application

CRASH_BATCH = 2  # batches 0 and 1 complete, the kill comes in batch 2
REPO_ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def killing_spark(
    tmp_path_factory: pytest.TempPathFactory, spark_remote: str | None
) -> Iterator[tuple[dict[str, str], Path]]:
    """The environment of a run whose committing process obeys the kill file, and the file."""
    work = tmp_path_factory.mktemp("kill")
    kill_file = work / "order"
    if spark_remote is None:
        yield {kill_switch.ENV_KILL_FILE: str(kill_file)}, kill_file
        return
    site = work / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "from lakehouse_assets_tests.bronze import kill_switch\nkill_switch.install()\n"
    )
    env = {"PYTHONPATH": f"{site}:{REPO_ROOT}", kill_switch.ENV_KILL_FILE: str(kill_file)}
    with SparkConnectServer(env=env) as server:
        yield {ENV_SPARK_REMOTE: server.url}, kill_file


def run_and_kill(servers: str, lake_root: Path, when: str, killing: tuple[dict, Path]) -> None:
    env, kill_file = killing
    kill_file.write_text(f"{CRASH_BATCH} {when}")
    done = Path(f"{kill_file}.done")
    done.unlink(missing_ok=True)
    command = [sys.executable, "-m", crash_run.__name__, servers, str(lake_root)]
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
        env={**os.environ, **env},
    )  # fmt: skip
    kill_file.unlink()
    assert done.is_file() and done.read_text() == when, completed.stderr[-3000:]
    assert completed.returncode != 0


@pytest.mark.parametrize("when", ["before-commit", "after-commit"])
def test_killed_run_then_rerun_is_exactly_once(
    when: str,
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    lake_root: Path,
    spark: SparkSession,
    killing_spark: tuple[dict[str, str], Path],
) -> None:
    resources["kafka"] = KafkaResource(
        bootstrap_servers=broker.bootstrap_servers, max_records_per_trigger=1000
    )
    resources["kafka"].create_topic(TOPIC_BPM, partitions=3)
    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(0, 5000))

    run_and_kill(broker.bootstrap_servers, lake_root, when, killing_spark)

    checkpoint = lake_root / CHECKPOINTS_DIR / stream_name(BRONZE, TOPIC_BPM)
    assert (checkpoint / "offsets" / str(CRASH_BATCH)).exists()  # the batch was planned...
    assert not (checkpoint / "commits" / str(CRASH_BATCH)).exists()  # ...and never finished
    holds_batch = resources["lake"].table(BRONZE, TOPIC_BPM).history()[0]["batch_id"]
    assert holds_batch == (CRASH_BATCH if when == "after-commit" else CRASH_BATCH - 1)

    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(5000, 700))  # new data meanwhile
    result = materialize_bpm(resources)
    assert bronze_sequence_numbers(spark, resources) == list(range(5700))
    skipped = result.asset_materializations_for_node("bronze__bpm")[0].metadata["batches_skipped"]
    assert skipped.value == ([CRASH_BATCH] if when == "after-commit" else [])
    staged = [p for p in (lake_root / BRONZE / TOPIC_BPM).rglob("*.parquet")]
    committed = resources["lake"].table(BRONZE, TOPIC_BPM).file_uris()
    # Before the commit the batch's files were written: still there, in no snapshot (VACUUM's).
    assert (len(staged) > len(committed)) == (when == "before-commit")
