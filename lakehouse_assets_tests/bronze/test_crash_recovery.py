"""A run killed in the middle of a batch, then re-run, loses nothing and duplicates nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE, CHECKPOINTS_DIR, TOPIC_BPM, stream_name
from lakehouse_assets.devtools.broker import EmbeddedBroker
from lakehouse_assets_tests.bronze import crash_run
from lakehouse_assets_tests.bronze.helpers import (
    bronze_sequence_numbers,
    heart_rates,
    materialize_bpm,
)
from lakehouse_assets_tests.conftest import SPARK_MODE, produce
from resources import KafkaResource

pytestmark = [
    pytest.mark.local_spark,
    # The kill lands in the process that commits: over Connect, a worker of the server.
    pytest.mark.skipif(SPARK_MODE != "local", reason="kills the run's own process"),
]

CRASH_BATCH = 2  # batches 0 and 1 complete, the kill comes in batch 2


def run_and_kill(servers: str, lake_root: Path, when: str) -> None:
    module = crash_run.__name__
    command = [sys.executable, "-m", module, servers, str(lake_root), str(CRASH_BATCH), when]
    repo_root = Path(__file__).parents[2]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=repo_root)
    assert completed.returncode == crash_run.KILLED, completed.stderr[-3000:]


@pytest.mark.parametrize("when", ["before-commit", "after-commit"])
def test_killed_run_then_rerun_is_exactly_once(
    when: str,
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    lake_root: Path,
    spark: SparkSession,
) -> None:
    resources["kafka"] = KafkaResource(
        bootstrap_servers=broker.bootstrap_servers, max_records_per_trigger=1000
    )
    resources["kafka"].create_topic(TOPIC_BPM, partitions=3)
    produce(broker.bootstrap_servers, TOPIC_BPM, heart_rates(0, 5000))

    run_and_kill(broker.bootstrap_servers, lake_root, when)

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
