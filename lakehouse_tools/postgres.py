"""A local PostgreSQL server for Dagster's storage (runs, event logs, schedules and sensors), the
production shape: started from the machine's own PostgreSQL binaries (Debian's ``postgresql``
package; `make test` installs it where it is missing), with its data in a folder of its own.

PostgreSQL refuses to run as root: under root the server runs as the ``postgres`` user that the
Debian package creates.
"""

from __future__ import annotations

import getpass
import glob
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Self

from lakehouse_tools.service import LOOPBACK, LocalService, free_port

__all__ = ["PostgresServer", "PostgresServerError", "postgres_bin_dir"]

DATABASE = "dagster"
SERVICE_USER = "postgres"  # the system user of Debian's package, used when this process is root


class PostgresServerError(RuntimeError):
    """The PostgreSQL server could not be started."""


def postgres_bin_dir() -> Path:
    """The folder of the newest installed PostgreSQL server binaries (``initdb``, ``postgres``).

    Raises:
        PostgresServerError: no PostgreSQL server is installed.
    """
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=_major_version)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    raise PostgresServerError(
        "PostgreSQL's server binaries (initdb, postgres) were not found: install Debian's "
        "`postgresql` package (`make test` does), or point DAGSTER_POSTGRES_* at a running "
        "PostgreSQL."
    )


def _major_version(initdb: str) -> int:
    return int(Path(initdb).parents[1].name)


class PostgresServer(LocalService):
    """A PostgreSQL server on a loopback port with a ``dagster`` database; a context manager.

    Its data folder is a new temporary one unless ``data_dir`` names one (kept across restarts:
    an existing cluster is reused).
    """

    name = "PostgreSQL server"
    error = PostgresServerError
    stop_signal = signal.SIGINT  # a fast shutdown: SIGTERM would wait for clients to disconnect

    def __init__(
        self,
        port: int | None = None,
        data_dir: Path | None = None,
        timeout_s: float = 60.0,
        keep_log: bool = False,
        log_file: Path | None = None,
        settings: dict[str, str] | None = None,
    ) -> None:
        """Prepare a server; ``settings``: server settings beyond the defaults (``wal_level``:
        ``logical`` for Debezium's connector)."""
        super().__init__(timeout_s, keep_log, log_file)
        self.settings = dict(settings or {})
        self.port = port or free_port()
        self.data_dir = self._data_folder(data_dir, "lakehouse-postgres-")
        self.user = SERVICE_USER if os.geteuid() == 0 else getpass.getuser()

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def url(self) -> str:
        """The libpq URL of the ``dagster`` database."""
        return self.database_url(DATABASE)

    def database_url(self, name: str) -> str:
        """The libpq URL of the database ``name``."""
        return f"postgresql://{self.user}@{self.address}/{name}"

    @property
    def environment(self) -> dict[str, str]:
        """The variables ``dagster.yaml``'s Postgres storage reads to reach this server."""
        return {
            "DAGSTER_POSTGRES_HOST": LOOPBACK,
            "DAGSTER_POSTGRES_PORT": str(self.port),
            "DAGSTER_POSTGRES_USER": self.user,
            "DAGSTER_POSTGRES_PASSWORD": "",
            "DAGSTER_POSTGRES_DB": DATABASE,
        }

    def _as_user(self, command: list[str]) -> list[str]:
        """``command`` as the service user; setpriv execs it, so signals reach the server."""
        if os.geteuid() != 0:
            return command
        return [
            "setpriv",
            f"--reuid={self.user}",
            f"--regid={self.user}",
            "--init-groups",
            *command,
        ]

    def _run(self, command: list[str]) -> None:
        done = subprocess.run(self._as_user(command), capture_output=True, text=True, check=False)
        if done.returncode:
            raise PostgresServerError(f"{' '.join(command)} failed:\n{done.stdout}{done.stderr}")

    def start(self) -> Self:
        """Create the cluster (first start only), start the server, create the database."""
        bin_dir = postgres_bin_dir()
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.data_dir, self.user)
        if not (self.data_dir / "PG_VERSION").exists():
            self._run(
                [str(bin_dir / "initdb"), "-D", str(self.data_dir), "-U", self.user,
                 "--auth=trust", "--encoding=UTF8", "--no-sync"]
            )  # fmt: skip
        command = [
            str(bin_dir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
            "-c", f"listen_addresses={LOOPBACK}", "-c", f"unix_socket_directories={self.data_dir}",
            "-c", "fsync=off" if self._temporary else "fsync=on",
        ]  # fmt: skip
        for name, value in self.settings.items():
            command += ["-c", f"{name}={value}"]
        self._launch(self._as_user(command), self._accepts_connections)
        self.create_database(DATABASE)
        return self

    def _accepts_connections(self) -> bool:
        ready = [str(postgres_bin_dir() / "pg_isready"), "-h", LOOPBACK, "-p", str(self.port)]
        return subprocess.run(ready, capture_output=True, check=False).returncode == 0

    def _psql(self, bin_dir: Path) -> list[str]:
        return [str(bin_dir / "psql"), "-h", LOOPBACK, "-p", str(self.port), "-U", self.user]

    def create_database(self, name: str) -> None:
        """Create the database ``name`` unless it exists."""
        psql = [*self._psql(postgres_bin_dir()), "-d", "postgres"]
        query = f"SELECT 1 FROM pg_database WHERE datname = '{name}'"
        exists = subprocess.run([*psql, "-tAc", query], capture_output=True, text=True, check=False)
        if exists.stdout.strip() != "1":
            self._run([*psql, "-c", f"CREATE DATABASE {name}"])

    def sql(self, database: str, statements: str) -> str:
        """Run ``statements`` in ``database`` with psql (stopping at the first error); returns
        what psql printed, unaligned and tuples only (``|`` between columns).

        Raises:
            PostgresServerError: a statement failed.
        """
        command = [*self._psql(postgres_bin_dir()), "-d", database, "-v", "ON_ERROR_STOP=1"]
        done = subprocess.run(
            [*command, "-tA", "-c", statements], capture_output=True, text=True, check=False
        )
        if done.returncode:
            raise PostgresServerError(f"psql -d {database} failed:\n{done.stdout}{done.stderr}")
        return done.stdout
