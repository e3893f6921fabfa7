"""Plain files under the lake root (schema files, the landing zone's folders), on any file
system pyarrow knows: a local folder, s3://, gs://, abfss://."""

from __future__ import annotations

import uuid

from pyarrow import fs

from resources.object_store import filesystem as _location


def read_text(uri: str) -> str | None:
    """The text of the file at ``uri``, or None when there is none."""
    filesystem, path = _location(uri)
    try:
        with filesystem.open_input_stream(path) as stream:
            return stream.read().decode()
    except FileNotFoundError:
        return None


def write_text(uri: str, text: str) -> None:
    """Write ``text`` to the file at ``uri``, whole: a reader sees the old file or the new one
    (written beside it, then renamed, where the file system can rename)."""
    filesystem, path = _location(uri)
    folder = path.rsplit("/", 1)[0]
    filesystem.create_dir(folder, recursive=True)
    partial = f"{folder}/.{uuid.uuid4().hex}.partial"
    with filesystem.open_output_stream(partial) as stream:
        stream.write(text.encode())
    filesystem.move(partial, path)


def delta_folders(uri: str) -> list[str]:
    """The names of the folders in ``uri`` that hold a Delta log, sorted."""
    filesystem, path = _location(uri)
    selector = fs.FileSelector(path, allow_not_found=True)
    folders = [i.base_name for i in filesystem.get_file_info(selector)
               if i.type == fs.FileType.Directory]  # fmt: skip
    logs = [filesystem.get_file_info(f"{path}/{name}/_delta_log") for name in folders]
    return sorted(
        n for n, log in zip(folders, logs, strict=True) if log.type != fs.FileType.NotFound
    )


def make_folder(uri: str) -> None:
    """Make the folder ``uri`` (and its parents) where none is: on an object store, an empty
    marker object that Spark's file sources list as a folder."""
    filesystem, path = _location(uri)
    filesystem.create_dir(path, recursive=True)


def move_folder(uri: str, to: str) -> None:
    """Move the folder ``uri`` and all it holds to ``to`` (on the same file system). Where the
    file system cannot rename a folder (an object store), it is copied, then deleted: a crash in
    between leaves both, or the copy whole and part of the original."""
    filesystem, path = _location(uri)
    _, target = _location(to)
    try:
        filesystem.move(path, target)
    except (NotImplementedError, OSError):
        if filesystem.get_file_info(path).type != fs.FileType.Directory:
            raise
        fs.copy_files(path, target, filesystem, filesystem)
        _delete_tree(filesystem, path)


def is_empty(uri: str) -> bool:
    """Whether nothing is at ``uri``: no folder, or an empty one."""
    filesystem, path = _location(uri)
    return not filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))


def delete_folder(uri: str) -> None:
    """Delete the folder ``uri`` and all it holds (nothing when there is none)."""
    filesystem, path = _location(uri)
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        _delete_tree(filesystem, path)


def _delete_tree(filesystem: fs.FileSystem, path: str) -> None:
    """Delete the folder ``path`` and all it holds. A store that refuses the bulk delete (S3's
    DeleteObjects, whose checksum pyarrow's SDK sends as CRC64NVME, which S3-compatible stores
    older than that default do not know) has each file deleted alone, then each folder, the
    deepest first."""
    try:
        filesystem.delete_dir(path)
    except OSError:
        held = filesystem.get_file_info(fs.FileSelector(path, recursive=True))
        for info in held:
            if info.type == fs.FileType.File:
                filesystem.delete_file(info.path)
        folders = [info.path for info in held if info.type == fs.FileType.Directory]
        for folder in [*sorted(folders, key=len, reverse=True), path]:
            filesystem.delete_dir(folder)
