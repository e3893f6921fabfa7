"""Where a Spark application keeps its catalog: Spark's Hive metastore, in an embedded Derby
database (a folder).

The metastore is a setting of the whole application (Spark reads it once, when the application
starts): the Connect server's, or a local session's. ``LAKEHOUSE_METASTORE`` names the folder.
An embedded Derby database admits one JVM at a time: the Connect server holds it while it runs,
so other processes query the lake through that server (``SPARK_REMOTE``).

A metastore in PostgreSQL is refused for now: the Hive metastore client of the pyspark wheel
creates its own tables lazily through DataNucleus, and on PostgreSQL 15 the first ``CREATE
TABLE`` waits for ever (DataNucleus adds a foreign key on a second connection while the first
holds the lock it needs). It needs the metastore's tables created once, whole, beforehand.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

from resources.settings import ENV_METASTORE

POSTGRES_SCHEMES = ("postgresql", "postgres")
JDO = "spark.hadoop.javax.jdo.option."  # the metastore's database, in Hive's own settings


class MetastoreSettingError(ValueError):
    """``LAKEHOUSE_METASTORE`` names no folder (a URL, PostgreSQL's among them)."""


def is_postgres(metastore: str) -> bool:
    """Whether ``metastore`` is a PostgreSQL URL (else an embedded Derby folder)."""
    return urlparse(metastore).scheme in POSTGRES_SCHEMES


def spark_settings(metastore: str) -> dict[str, str]:
    """The application settings of a Spark whose catalog lives in ``metastore``.

    Raises:
        MetastoreSettingError: a URL (a PostgreSQL database's too, its password never shown).
    """
    settings = {"spark.sql.catalogImplementation": "hive"}
    if is_postgres(metastore):
        raise MetastoreSettingError(
            f"{ENV_METASTORE} names a PostgreSQL database ({shown(metastore)}): not supported yet, "
            "as the Hive metastore client waits for ever creating its tables there "
            "(docs/catalog.md). Name a folder: an embedded metastore."
        )
    if "://" in metastore:
        scheme = metastore.split("://", 1)[0]
        raise MetastoreSettingError(
            f"{ENV_METASTORE} must be a folder (an embedded Derby metastore), not a {scheme}:// URL"
        )
    folder = Path(metastore).absolute()
    return {
        **settings,
        # Derby creates the database on first use; Spark's Hive client then creates the schema.
        f"{JDO}ConnectionURL": f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true",
        # The `default` database's folder (no table of the lake lives there).
        "spark.sql.warehouse.dir": str(folder / "warehouse"),
    }


def shown(metastore: str) -> str:
    """``metastore`` as messages show it: a URL's password hidden."""
    parsed = urlparse(metastore)
    if not parsed.password:
        return metastore
    return metastore.replace(f":{parsed.password}@", ":<hidden>@", 1)


def java_options(metastore: str) -> str:
    """Driver JVM options for ``metastore``: an embedded Derby writes its log beside its
    database, not into the working directory."""
    if is_postgres(metastore):
        return ""
    return f"-Dderby.stream.error.file={Path(metastore).absolute() / 'derby.log'}"
