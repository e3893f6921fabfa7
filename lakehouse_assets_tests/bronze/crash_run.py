"""Run the bpm bronze stream in this process and kill the process in the middle of a batch.

Usage: python -m lakehouse_assets_tests.bronze.crash_run SERVERS LAKE_ROOT BATCH WHEN
where WHEN is before-commit or after-commit.

The process dies with ``os._exit`` (no cleanup, like a kill) when the stream writes batch BATCH:
either just before the Delta commit, or just after it and before Spark records the batch as
done in the checkpoint. Exit code 17 says the kill happened where intended.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from lakehouse_assets_tests.bronze.helpers import materialize_bpm
from resources import KafkaResource, LakeResource, build_resources

KILLED = 17


def main() -> None:
    servers, root, batch, when = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    append = LakeResource.append

    def append_then_maybe_die(self: LakeResource, *args: Any, **kwargs: Any) -> int:
        dies_here = batch in (kwargs.get("markers") or {}).values()
        if dies_here and when == "before-commit":
            os._exit(KILLED)
        version = append(self, *args, **kwargs)
        if dies_here and when == "after-commit":
            os._exit(KILLED)
        return version

    LakeResource.append = append_then_maybe_die  # type: ignore[method-assign]
    resources = build_resources({"KAFKA_BOOTSTRAP_SERVERS": servers, "LAKEHOUSE_ROOT": root})
    resources["kafka"] = KafkaResource(bootstrap_servers=servers, max_records_per_trigger=1000)
    materialize_bpm(resources)
    sys.exit("the stream finished without reaching the batch to die in")


if __name__ == "__main__":
    main()
