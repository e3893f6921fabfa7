"""What a streaming checkpoint says without Spark: whether a run would find anything new. The
checkpoints are written by hand in Spark's format (a version line, batch metadata, one line of
offsets per source; a commit file per finished batch)."""

from __future__ import annotations

import json
from pathlib import Path

from resources.checkpoints import kafka_caught_up, landing_caught_up, query_id, unread_bytes


def plan(checkpoint: Path, batch: int, offsets: dict[str, dict[str, int]]) -> None:
    (checkpoint / "offsets").mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps({"batchWatermarkMs": 0}), json.dumps(offsets)]
    (checkpoint / "offsets" / str(batch)).write_text("\n".join(lines))


def commit(checkpoint: Path, batch: int) -> None:
    (checkpoint / "commits").mkdir(parents=True, exist_ok=True)
    (checkpoint / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def test_a_kafka_stream_is_caught_up_only_at_the_log_end_with_no_batch_pending(
    tmp_path: Path,
) -> None:
    checkpoint = tmp_path / "stream"
    assert not kafka_caught_up(str(checkpoint), {("t", 0): 0})  # never ran
    plan(checkpoint, 0, {"t": {"0": 5, "1": 0}})
    assert not kafka_caught_up(str(checkpoint), {("t", 0): 5, ("t", 1): 0})  # batch 0 pending
    commit(checkpoint, 0)
    assert kafka_caught_up(str(checkpoint), {("t", 0): 5, ("t", 1): 0})
    assert kafka_caught_up(str(checkpoint), {("t", 0): 5})  # an empty partition either way
    assert kafka_caught_up(str(checkpoint), {("t", 0): 5, ("t", 2): 0})
    assert not kafka_caught_up(str(checkpoint), {("t", 0): 6, ("t", 1): 0})  # a new record
    assert not kafka_caught_up(str(checkpoint), {("t", 0): 5, ("t", 2): 1})  # a new partition
    assert not kafka_caught_up(str(checkpoint), {("t", 0): 3})  # a recreated topic: must fail
    plan(checkpoint, 1, {"t": {"0": 5, "1": 0}})  # planned again after a crash, not committed
    assert not kafka_caught_up(str(checkpoint), {("t", 0): 5, ("t", 1): 0})


def test_a_file_stream_is_caught_up_when_it_has_read_every_complete_file(tmp_path: Path) -> None:
    checkpoint, landing = tmp_path / "stream", tmp_path / "landing"
    landing.mkdir()
    (landing / "a.csv").write_text("x\n1\n")
    (landing / ".b.csv.tmp").write_text("x\n")  # still being written: not a file to read
    (checkpoint / "sources" / "0").mkdir(parents=True)
    entry = {"path": f"file://{landing}/a.csv", "timestamp": 0, "batchId": 0}
    (checkpoint / "sources" / "0" / "0").write_text("v1\n" + json.dumps(entry))
    plan(checkpoint, 0, {"logOffset": 0})
    assert not landing_caught_up(str(checkpoint), str(landing))  # batch 0 pending
    commit(checkpoint, 0)
    assert landing_caught_up(str(checkpoint), str(landing))
    (landing / "c.csv").write_text("x\n2\n")
    assert not landing_caught_up(str(checkpoint), str(landing))
    assert unread_bytes(str(checkpoint), str(landing)) == 4  # c.csv; neither a nor .b


def test_the_query_id_is_read_from_the_checkpoints_metadata(tmp_path: Path) -> None:
    checkpoint = tmp_path / "stream"
    assert query_id(str(checkpoint)) is None  # before the stream's first run
    checkpoint.mkdir()
    # As Spark writes it (StreamMetadata): one JSON object naming the query.
    (checkpoint / "metadata").write_text('{"id":"5a7c1d2e-0b4f-4c61-9d3a-2e8f6b1c9a40"}\n')
    assert query_id(str(checkpoint)) == "5a7c1d2e-0b4f-4c61-9d3a-2e8f6b1c9a40"
