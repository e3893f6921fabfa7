"""Read what a Spark streaming checkpoint says a stream has processed, without Spark.

Used by the sensors: the offsets a Kafka stream committed, and the files a file stream read.
Works on any file system pyarrow knows (local, s3://, gs://, hdfs://).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from pyarrow import fs

from resources.files import move_folder
from resources.kafka_client import Offsets, TopicPartitionKey, from_offsets
from resources.object_store import filesystem as _filesystem


def _log_entries(filesystem: fs.FileSystem, folder: str) -> dict[int, str]:
    """``{batch id: file path}`` of a checkpoint log folder (``offsets``, ``commits``...)."""
    selector = fs.FileSelector(folder, allow_not_found=True)
    entries: dict[int, str] = {}
    for info in filesystem.get_file_info(selector):
        name = info.base_name.removesuffix(".compact")
        if info.type == fs.FileType.File and name.isdigit():
            entries[int(name)] = info.path
    return entries


def _read_lines(filesystem: fs.FileSystem, path: str) -> list[str]:
    with filesystem.open_input_stream(path) as stream:
        return stream.read().decode().splitlines()


def _batches(filesystem: fs.FileSystem, root: str) -> tuple[dict[int, str], dict[int, str]]:
    """The checkpoint's planned batches (their offsets files) and its committed ones."""
    return _log_entries(filesystem, f"{root}/offsets"), _log_entries(filesystem, f"{root}/commits")


def _pending(planned: dict[int, str], committed: dict[int, str]) -> bool:
    """Whether a batch was planned (its offsets written) but not committed: a crash mid-batch."""
    return max(planned, default=-1) > max(committed, default=-1)


def _offsets(filesystem: fs.FileSystem, path: str) -> Offsets:
    """The source offsets of an offsets file: a version line, the batch metadata, then one line
    per source."""
    lines = _read_lines(filesystem, path)
    source = lines[2] if len(lines) > 2 else "{}"
    return json.loads(source) if source.strip() not in ("", "-") else {}


def kafka_caught_up(checkpoint: str, log_ends: Mapping[TopicPartitionKey, int]) -> bool:
    """Whether a Kafka stream has committed exactly up to ``log_ends`` (every partition) with no
    batch pending, so that a run would read nothing and need not start the stream. Offsets
    beyond a log's end (a recreated topic) are not caught up: the stream must see them to fail.
    """
    filesystem, root = _filesystem(checkpoint)
    planned, committed = _batches(filesystem, root)
    if not committed or _pending(planned, committed):
        return False
    offsets = from_offsets(_offsets(filesystem, planned[max(committed)]))
    # A partition holding no record may be missing on either side.
    return {tp: o for tp, o in offsets.items() if o} == {tp: e for tp, e in log_ends.items() if e}


def landing_caught_up(checkpoint: str, folder: str) -> bool:
    """Whether a file stream has read every complete file in ``folder`` with no batch pending."""
    filesystem, root = _filesystem(checkpoint)
    if _pending(*_batches(filesystem, root)):
        return False
    return landed_files(folder) <= files_read(checkpoint)


CLUSTER_FILE = "kafka_cluster_id"  # beside Spark's files: the cluster a Kafka stream reads


def recorded_cluster(checkpoint: str) -> str | None:
    """The id of the Kafka cluster a stream's checkpoint was written for (None: not recorded)."""
    filesystem, root = _filesystem(checkpoint)
    path = f"{root}/{CLUSTER_FILE}"
    if filesystem.get_file_info(path).type != fs.FileType.File:
        return None
    return "".join(_read_lines(filesystem, path)).strip()


def record_cluster(checkpoint: str, cluster_id: str) -> None:
    """Record the Kafka cluster a stream's checkpoint belongs to."""
    filesystem, root = _filesystem(checkpoint)
    filesystem.create_dir(root, recursive=True)
    with filesystem.open_output_stream(f"{root}/{CLUSTER_FILE}") as stream:
        stream.write(f"{cluster_id}\n".encode())


def set_aside(checkpoint: str) -> str:
    """Move a checkpoint aside (to ``<checkpoint>.set-aside-<UTC time>``), so the stream starts
    anew where it is told; returns where the old one is kept."""
    kept = f"{checkpoint}.set-aside-{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}"
    move_folder(checkpoint, kept)
    return kept


def query_id(checkpoint: str) -> str | None:
    """The id of the streaming query the checkpoint belongs to (None: no checkpoint yet); Delta's
    streaming sink records its batches under it."""
    filesystem, root = _filesystem(checkpoint)
    path = f"{root}/metadata"
    if filesystem.get_file_info(path).type != fs.FileType.File:
        return None
    return json.loads("".join(_read_lines(filesystem, path)))["id"]


def committed_offsets(checkpoint: str) -> Offsets | None:
    """The source offsets of the last batch the stream committed (None: no batch yet)."""
    filesystem, root = _filesystem(checkpoint)
    planned, committed = _batches(filesystem, root)
    return _offsets(filesystem, planned[max(committed)]) if committed else None


def files_read(checkpoint: str) -> set[str]:
    """The names of the files a file stream has taken into a batch (compacted logs included).

    Names, not paths: Spark logs URIs (``file:``, ``s3a:``, escaped) and a landing folder's file
    names are unique.
    """
    filesystem, root = _filesystem(checkpoint)
    names: set[str] = set()
    for path in _log_entries(filesystem, f"{root}/sources/0").values():
        for line in _read_lines(filesystem, path)[1:]:
            entry: dict[str, Any] = json.loads(line)
            names.add(unquote(entry["path"].rsplit("/", 1)[-1]))
    return names


def unread_bytes(checkpoint: str, folder: str) -> int:
    """The bytes of the complete files in a landing folder that a file stream has not read."""
    read = files_read(checkpoint)
    filesystem, root = _filesystem(folder)
    selector = fs.FileSelector(root, allow_not_found=True)
    return sum(
        info.size or 0
        for info in filesystem.get_file_info(selector)
        if info.type == fs.FileType.File
        and not info.base_name.startswith((".", "_"))
        and info.base_name not in read
    )


def landed_files(folder: str) -> set[str]:
    """The names of the complete files in a landing folder (not those starting ``.`` or ``_``)."""
    return set(landed_times(folder))


def landed_times(folder: str) -> dict[str, float]:
    """``landed_files`` with each file's modification time (epoch seconds)."""
    filesystem, root = _filesystem(folder)
    selector = fs.FileSelector(root, allow_not_found=True)
    return {
        info.base_name: info.mtime.timestamp() if info.mtime is not None else 0.0
        for info in filesystem.get_file_info(selector)
        if info.type == fs.FileType.File and not info.base_name.startswith((".", "_"))
    }
