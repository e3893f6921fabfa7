"""Run the bpm bronze stream with the kill switch armed (see ``kill_switch``).

Usage: python -m lakehouse_assets_tests.bronze.crash_run SERVERS LAKE_ROOT

On a local Spark the batch is committed in this process, which dies with ``KILLED``; over Spark
Connect a worker of the server dies instead, and the run fails.
"""

from __future__ import annotations

import os
import sys

from lakehouse_assets_tests.bronze import kill_switch
from lakehouse_assets_tests.bronze.helpers import materialize_bpm
from resources import KafkaResource, build_resources


def main() -> None:
    servers, root = sys.argv[1], sys.argv[2]
    kill_switch.install()
    resources = build_resources(
        {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": servers, "LAKEHOUSE_ROOT": root}
    )
    resources["kafka"] = KafkaResource(bootstrap_servers=servers, max_records_per_trigger=1000)
    materialize_bpm(resources)
    sys.exit("the stream finished without reaching the batch to die in")


if __name__ == "__main__":
    main()
