"""Where a Spark application keeps its catalog: Spark's Hive metastore, in an embedded Derby
database (a folder; the default) or in PostgreSQL (the production shape).

The metastore is a setting of the whole application (Spark reads it once, when the application
starts): the Connect server's, or a local session's. ``LAKEHOUSE_METASTORE`` names it, either a
folder or ``postgresql://user:password@host:port/database``. An embedded Derby database admits
one JVM at a time: the Connect server holds it while it runs, so other processes query the lake
through that server (``SPARK_REMOTE``). PostgreSQL admits any number of applications at once.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from resources.settings import ENV_METASTORE

POSTGRES_SCHEMES = ("postgresql", "postgres")
POSTGRES_DRIVER = "org.postgresql.Driver"  # org.postgresql:postgresql, pinned in jars.toml
JDO = "spark.hadoop.javax.jdo.option."  # the metastore's database, in Hive's own settings


class MetastoreSettingError(ValueError):
    """``LAKEHOUSE_METASTORE`` names neither a folder nor a PostgreSQL database."""


def is_postgres(metastore: str) -> bool:
    """Whether ``metastore`` is a PostgreSQL URL (else an embedded Derby folder)."""
    return urlparse(metastore).scheme in POSTGRES_SCHEMES


def spark_settings(metastore: str) -> dict[str, str]:
    """The application settings of a Spark whose catalog lives in ``metastore``.

    Raises:
        MetastoreSettingError: a URL of another scheme, or a PostgreSQL URL without a host or a
            database (the message never shows the password).
    """
    settings = {"spark.sql.catalogImplementation": "hive"}
    if is_postgres(metastore):
        return {**settings, **_postgres_settings(metastore)}
    if "://" in metastore:
        scheme = metastore.split("://", 1)[0]
        raise MetastoreSettingError(
            f"{ENV_METASTORE} must be a folder (an embedded Derby metastore) or a URL "
            f"postgresql://user:password@host:port/database, not a {scheme}:// URL"
        )
    folder = Path(metastore).absolute()
    return {
        **settings,
        # Derby creates the database on first use; Spark's Hive client then creates the schema.
        f"{JDO}ConnectionURL": f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true",
        # The `default` database's folder (no table of the lake lives there).
        "spark.sql.warehouse.dir": str(folder / "warehouse"),
    }


def _postgres_settings(url: str) -> dict[str, str]:
    parsed = urlparse(url)
    database = parsed.path.lstrip("/")
    if not parsed.hostname or not database:
        shown = f"{parsed.scheme}://{parsed.hostname or ''}:{parsed.port or ''}/{database}"
        raise MetastoreSettingError(
            f"{ENV_METASTORE} must name a host and a database, "
            f"postgresql://user:password@host:port/database; got {shown}"
        )
    address = f"{parsed.hostname}:{parsed.port or 5432}"
    return {
        f"{JDO}ConnectionURL": f"jdbc:postgresql://{address}/{database}",
        f"{JDO}ConnectionDriverName": POSTGRES_DRIVER,
        f"{JDO}ConnectionUserName": unquote(parsed.username or ""),
        f"{JDO}ConnectionPassword": unquote(parsed.password or ""),
        # Spark's Hive client creates the metastore's tables by itself only in Derby: here
        # DataNucleus creates them on first use, and the schema's version is not checked.
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
    }


def java_options(metastore: str) -> str:
    """Driver JVM options for ``metastore``: an embedded Derby writes its log beside its
    database, not into the working directory."""
    if is_postgres(metastore):
        return ""
    return f"-Dderby.stream.error.file={Path(metastore).absolute() / 'derby.log'}"
