"""Kill the process that commits batch N of a stream, just before or just after its Delta commit.

The order comes from the file named by ``LAKEHOUSE_TEST_KILL_FILE`` (``<batch> <when>``, where
``when`` is ``before-commit``: the batch's files are written, not committed; or ``after-commit``:
committed, and Spark has not recorded the batch as done). The process writes ``when`` into
``<file>.done`` and exits with ``KILLED`` at once, without cleanup, like a kill. ``install`` runs
in the process that commits: the run's own on a local Spark, a Python worker of the server over
Spark Connect (through ``sitecustomize``, see ``test_crash_recovery``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

ENV_KILL_FILE = "LAKEHOUSE_TEST_KILL_FILE"
KILLED = 17


def _kill_if_ordered(batch_markers: dict[str, int], moment: str) -> None:
    order = Path(os.environ[ENV_KILL_FILE])
    if not order.is_file():
        return
    batch, when = order.read_text().split()
    if when == moment and int(batch) in batch_markers.values():
        Path(f"{order}.done").write_text(when)
        os._exit(KILLED)


def install() -> None:
    """Wrap the Delta commit of this process, when a kill file is configured."""
    if not os.environ.get(ENV_KILL_FILE):
        return
    from resources import delta

    commit = delta._commit

    def commit_unless_killed(*args: Any, **kwargs: Any) -> int:
        markers = dict(kwargs.get("markers") or {})
        _kill_if_ordered(markers, "before-commit")
        version = commit(*args, **kwargs)
        _kill_if_ordered(markers, "after-commit")
        return version

    delta._commit = commit_unless_killed
