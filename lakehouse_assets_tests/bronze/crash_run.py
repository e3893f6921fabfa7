"""Run the bpm bronze stream in a process of its own: on a Spark application of its own (a local
one, started without ``SPARK_REMOTE``), so that killing this process kills the writer itself (its
driver and executors), or on the Connect server ``SPARK_REMOTE`` names.

Usage: python -m lakehouse_assets_tests.bronze.crash_run SERVERS LAKE_ROOT RECORDS_PER_BATCH
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from lakehouse_assets_tests.bronze.helpers import materialize_bpm
from resources import ENV_METASTORE, ENV_SPARK_REMOTE, KafkaResource, build_resources
from resources.spark_jvm import CONNECT_MODE_MARK

REPO_ROOT = Path(__file__).parents[2]


def start(
    servers: str, lake_root: str, per_batch: int, env: Mapping[str, str] | None = None
) -> subprocess.Popen:
    """This module run in a new process, in a session of its own (its JVM in its group), with
    ``env`` added to this process's variables but ``SPARK_REMOTE`` (unless ``env`` sets it). Its
    local Spark is an application of its own: its catalog is in a new embedded metastore, since
    the session's server may hold this process's."""
    command = [sys.executable, "-m", __name__, servers, lake_root, str(per_batch)]
    local = {k: v for k, v in os.environ.items() if k not in (ENV_SPARK_REMOTE, CONNECT_MODE_MARK)}
    local[ENV_METASTORE] = tempfile.mkdtemp(prefix="lakehouse-metastore-")
    local.update(env or {})
    return subprocess.Popen(
        command, cwd=REPO_ROOT, env=local, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def main() -> None:
    servers, root, per_batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    resources = build_resources(
        {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": servers, "LAKEHOUSE_ROOT": root}
    )
    resources["kafka"] = KafkaResource(bootstrap_servers=servers, max_records_per_trigger=per_batch)
    materialize_bpm(resources)


if __name__ == "__main__":
    main()
