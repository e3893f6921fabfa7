"""An embedded Derby metastore (``resources.metastore``) admits one JVM at a time: this module
tells whether another process holds one, and which Connect server, so that a second application
is refused at once, in two lines, instead of by Hive's client after a minute of retries and
thousands of lines of traces."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import socket
from pathlib import Path
from urllib.parse import urlparse

from resources.settings import ENV_METASTORE, ENV_SPARK_REMOTE

DERBY_LOCK = "metastore_db/dbex.lck"  # Derby's exclusive lock on a database it has booted
SERVER_FILE = "connect-server"  # the address of the Connect server holding the database


class MetastoreInUse(RuntimeError):
    """An embedded Derby metastore is held by another Spark application."""


def check_free(metastore: str) -> None:
    """Refuse, in two lines, an embedded Derby metastore that another process holds (Derby
    admits one JVM, and the Hive client of a second one fails after a minute of retries, with
    thousands of lines of traces). The message names the Connect server that holds it when that
    server recorded its address there (``record_server``) and still answers.

    Raises:
        MetastoreInUse: naming ``SPARK_REMOTE`` and, where known, the server's address.
    """
    folder = Path(metastore).absolute()
    if not _locked(folder / DERBY_LOCK):
        return
    server = holding_server(metastore)
    holder = (
        f"the Spark Connect server at {server}"
        if server
        else "another Spark application (a Spark Connect server, or a run on a local Spark)"
    )
    raise MetastoreInUse(
        f"The catalog's metastore {metastore} ({ENV_METASTORE}) is an embedded Derby database, "
        f"which admits one Spark application, and {holder} holds it.\n"
        f"Run through that server: export {ENV_SPARK_REMOTE}={server or 'sc://<host>:<port>'}"
    )


def _locked(lock_file: Path) -> bool:
    """Whether another process holds ``lock_file``, a booted Derby database's exclusive lock
    (Java's FileChannel lock, a POSIX record lock as ``fcntl.lockf`` takes)."""
    try:
        handle = lock_file.open("r+b")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno in (errno.EACCES, errno.EAGAIN):
                return True
            raise
        fcntl.lockf(handle, fcntl.LOCK_UN)
    return False


def record_server(metastore: str, url: str) -> None:
    """Note beside the embedded Derby ``metastore`` the address of the Connect server that holds
    it, for the message of a process that finds it held (``check_free``)."""
    folder = Path(metastore).absolute()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SERVER_FILE).write_text(url)


def forget_server(metastore: str, url: str) -> None:
    """Remove the note of ``record_server`` when it still names ``url``."""
    note = Path(metastore).absolute() / SERVER_FILE
    with contextlib.suppress(FileNotFoundError):
        if note.read_text() == url:
            note.unlink()


def holding_server(metastore: str) -> str | None:
    """The recorded address of the Connect server holding the Derby ``metastore``, if it answers."""
    try:
        url = (Path(metastore).absolute() / SERVER_FILE).read_text().strip()
    except FileNotFoundError:
        return None
    address = urlparse(url)
    try:
        socket.create_connection((address.hostname, address.port), timeout=2).close()
    except (OSError, ValueError):
        return None
    return url
