"""The commands a user runs: the demo's lake, the broker, and what `lakehouse sql` says when it
cannot start. (`lakehouse demo` and the standard
Dagster CLI run their whole graphs in test_standalone, on a standalone cluster.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyarrow.fs import FileSelector

from lakehouse_tools.demo import prepare_demo_lake
from lakehouse_tools.service import free_port
from resources import files, object_store
from resources.catalog import DEMO_MARKER
from resources.settings import ENV_METASTORE
from resources.spark_jvm import without_connect

REPO_ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize("store", ["folder", "s3"])
def test_a_demo_lake_is_reset_for_the_next_demo_and_any_other_lake_refused(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # The embedded broker starts empty: an earlier demo's checkpoints would point past its end.
    root = str(tmp_path) if store == "folder" else request.getfixturevalue("s3_lake_root")
    demo_lake, other_lake = f"{root}/demo", f"{root}/other"
    prepare_demo_lake(demo_lake, embedded=True)
    files.write_text(f"{demo_lake}/bronze/t/part-0.parquet", "rows")
    prepare_demo_lake(demo_lake, embedded=True)
    store_of, path = object_store.filesystem(demo_lake)
    names = [i.base_name for i in store_of.get_file_info(FileSelector(path, recursive=True))]
    assert names == [DEMO_MARKER]
    files.write_text(f"{other_lake}/bronze/t/part-0.parquet", "rows")
    prepare_demo_lake(other_lake, embedded=False)  # a real broker: its lake is kept
    with pytest.raises(SystemExit, match="was not made by an embedded-broker demo"):
        prepare_demo_lake(other_lake, embedded=True)
    assert files.read_text(f"{other_lake}/bronze/t/part-0.parquet") == "rows"


@pytest.mark.services  # starts a broker of its own
def test_broker_command_stops_its_broker_on_sigterm(tmp_path: Path) -> None:
    import signal
    import socket
    import time

    from lakehouse_tools.broker import free_port

    port = free_port()
    data = tmp_path / "kafka"
    command = [str(BIN / "lakehouse"), "broker", "--port", str(port), "--data", str(data)]
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    assert "listening" in process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0
    time.sleep(0.5)
    with socket.socket() as probe:  # nothing listens on the port any more
        assert probe.connect_ex(("127.0.0.1", port)) != 0
    assert (data / "log" / "meta.properties").is_file()  # its records are kept


def test_sql_on_an_unreachable_metastore_fails_in_two_lines_without_its_password(
    tmp_path: Path,
) -> None:
    closed = free_port()  # nothing listens there
    env = {
        **without_connect(os.environ),
        ENV_METASTORE: f"postgresql://hive:s3cret@127.0.0.1:{closed}/m",
    }
    done = subprocess.run(
        [str(BIN / "lakehouse"), "sql", "SELECT 1"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    assert lines[0] == (
        f"The catalog's metastore postgresql://hive:<hidden>@127.0.0.1:{closed}/m "
        "(LAKEHOUSE_METASTORE) cannot be reached:"
    )
    assert "Connection refused" in lines[1] and "s3cret" not in done.stderr
