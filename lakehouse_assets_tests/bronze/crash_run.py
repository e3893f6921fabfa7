"""Run the bpm bronze stream on a Spark application of this process's own (a local one: start it
without ``SPARK_REMOTE``), so that killing this process kills the writer itself: its driver and
executors.

Usage: python -m lakehouse_assets_tests.bronze.crash_run SERVERS LAKE_ROOT RECORDS_PER_BATCH
"""

from __future__ import annotations

import os
import sys

from lakehouse_assets_tests.bronze.helpers import materialize_bpm
from resources import KafkaResource, build_resources


def main() -> None:
    servers, root, per_batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    resources = build_resources(
        {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": servers, "LAKEHOUSE_ROOT": root}
    )
    resources["kafka"] = KafkaResource(bootstrap_servers=servers, max_records_per_trigger=per_batch)
    materialize_bpm(resources)


if __name__ == "__main__":
    main()
