"""Where a Spark application keeps its catalog: Spark's Hive metastore, in an embedded Derby
database (a folder; the default) or in PostgreSQL (the production shape).

The metastore is a setting of the whole application (Spark reads it once, when the application
starts): the Connect server's, or a local session's. ``LAKEHOUSE_METASTORE`` names it, either a
folder or ``postgresql://user:password@host:port/database``. An embedded Derby database admits
one JVM at a time: the Connect server holds it while it runs, so other processes query the lake
through that server (``SPARK_REMOTE``). PostgreSQL admits any number of applications at once.

Spark's Hive client creates the metastore's tables by itself only in Derby. In PostgreSQL,
``prepare`` creates them once, whole, with their keys and constraints, before any application
uses the database: DataNucleus creating them lazily, class by class, waits for ever on
PostgreSQL (it adds a foreign key on a second connection while the first holds the lock it
needs).
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from psycopg2 import OperationalError, connect

from resources import catalog, derby
from resources.object_store import absolute, hadoop_uri
from resources.settings import ENV_METASTORE, lake_root
from resources.spark_jvm import JARS_DIR, driver_class_path, java, spark_home, write_properties

POSTGRES_SCHEMES = ("postgresql", "postgres")
POSTGRES_DRIVER = "org.postgresql.Driver"  # org.postgresql:postgresql, pinned in jars.toml
POSTGRES_JAR = "org.postgresql_postgresql-*.jar"
JDO = "javax.jdo.option."  # the metastore's database, in Hive's own settings
# How Hive 2.3 names the metastore's tables and generates their keys (HiveConf's defaults): the
# tables created beforehand must be the ones the Hive client then looks for.
DATANUCLEUS = {
    "datanucleus.identifierFactory": "datanucleus1",
    "datanucleus.rdbms.useLegacyNativeValueStrategy": "true",
}
SCHEMA_TABLE = "TBLS"  # a table of Hive's schema: present once the schema was created
CONNECT_TIMEOUT_S = 10
SPARK_FALLBACK_WAREHOUSE = "spark-warehouse"  # Spark's warehouse in its working directory


class MetastoreSettingError(ValueError):
    """``LAKEHOUSE_METASTORE`` names neither a folder nor a PostgreSQL database."""


class MetastoreUnavailable(RuntimeError):
    """The metastore's PostgreSQL database cannot be reached or prepared."""


def is_postgres(metastore: str) -> bool:
    """Whether ``metastore`` is a PostgreSQL URL (else an embedded Derby folder)."""
    return urlparse(metastore).scheme in POSTGRES_SCHEMES


def spark_settings(
    metastore: str, jars_dir: Path = JARS_DIR, root: str | None = None
) -> dict[str, str]:
    """The application settings of a Spark whose catalog lives in ``metastore``. A PostgreSQL
    metastore, which other machines share, keeps the schemas that Spark creates by itself
    (``default``) in the warehouse folder of the lake at ``root`` (``LAKEHOUSE_ROOT`` when None),
    never in the working directory (Spark's default).

    Raises:
        MetastoreSettingError: a URL of another scheme, or a PostgreSQL URL without a host or a
            database (the message never shows the password).
    """
    settings = {"spark.sql.catalogImplementation": "hive"}
    if is_postgres(metastore):
        hive = {**_jdo_settings(metastore), **DATANUCLEUS, **POSTGRES_RUNTIME}
        postgres_jar(jars_dir)  # its absence is the setting's error, before any JVM starts
        lake = hadoop_uri(absolute(root or lake_root()))
        settings["spark.sql.warehouse.dir"] = catalog.warehouse(lake)
        return {**settings, **{f"spark.hadoop.{key}": value for key, value in hive.items()}}
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
        f"spark.hadoop.{JDO}ConnectionURL": (
            f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true"
        ),
        # The `default` database's folder (no table of the lake lives there).
        "spark.sql.warehouse.dir": str(folder / "warehouse"),
    }


# The Hive client's settings on a schema that `prepare` created: no table or constraint of
# Hive's is created at run time, only DataNucleus's own key table (SEQUENCE_TABLE, no foreign
# key), and the schema's version is not checked (it has no version row).
POSTGRES_RUNTIME = {
    "datanucleus.schema.autoCreateAll": "false",
    "datanucleus.schema.autoCreateTables": "true",
    "datanucleus.schema.autoCreateColumns": "false",
    "datanucleus.schema.autoCreateConstraints": "false",
    "hive.metastore.schema.verification": "false",
}


def _jdo_settings(url: str) -> dict[str, str]:
    parsed = urlparse(url)
    database = parsed.path.lstrip("/")
    if not parsed.hostname or not database:
        raise MetastoreSettingError(
            f"{ENV_METASTORE} must name a host and a database, "
            f"postgresql://user:password@host:port/database; got {shown(url)}"
        )
    address = f"{parsed.hostname}:{parsed.port or 5432}"
    return {
        f"{JDO}ConnectionURL": f"jdbc:postgresql://{address}/{database}",
        f"{JDO}ConnectionDriverName": POSTGRES_DRIVER,
        f"{JDO}ConnectionUserName": unquote(parsed.username or ""),
        f"{JDO}ConnectionPassword": unquote(parsed.password or ""),
    }


def launcher_environment(
    metastore: str, environ: Mapping[str, str], jars_dir: Path = JARS_DIR
) -> dict[str, str]:
    """The variables that put a PostgreSQL metastore's JDBC driver on the class path of a Spark
    driver launched from ``environ`` (none for Derby): DataNucleus asks java.sql.DriverManager
    for the driver, which sees the JVM's own class path, not ``spark.jars``."""
    if not is_postgres(metastore):
        return {}
    return driver_class_path([postgres_jar(jars_dir)], environ)


def postgres_jar(jars_dir: Path = JARS_DIR) -> Path:
    """The pinned PostgreSQL JDBC driver.

    Raises:
        MetastoreSettingError: it was never resolved (`lakehouse jars` resolves it).
    """
    found = sorted(jars_dir.glob(POSTGRES_JAR))
    if not found:
        raise MetastoreSettingError(
            f"{ENV_METASTORE} names a PostgreSQL database, but its JDBC driver is not in "
            f"{jars_dir}: run `lakehouse jars` (`make install` does)."
        )
    return found[-1]


def prepare(metastore: str, jars_dir: Path = JARS_DIR) -> None:
    """Make ``metastore`` ready for a Spark application: a PostgreSQL database is reached and,
    the first time, given Hive's tables (DataNucleus's SchemaTool, a JVM of a few seconds). An
    embedded Derby folder needs nothing.

    Raises:
        MetastoreSettingError: ``metastore`` is not a folder nor a PostgreSQL URL.
        MetastoreUnavailable: the database is unreachable, or its tables could not be created.
        derby.MetastoreInUse: another application holds the embedded Derby database.
    """
    spark_settings(metastore, jars_dir)  # the setting's errors first
    if not is_postgres(metastore):
        derby.check_free(metastore)
        Path(metastore).mkdir(parents=True, exist_ok=True)  # Derby's log goes there, not stderr
        return
    if _has_schema(metastore):
        return
    with tempfile.TemporaryDirectory() as folder:
        properties = Path(folder) / "metastore.properties"  # holds the password
        write_properties(properties, {**_jdo_settings(metastore), **DATANUCLEUS})
        class_path = f"{spark_home() / 'jars'}/*:{postgres_jar(jars_dir)}"
        done = subprocess.run(
            [
                java(), "-cp", class_path,
                "org.datanucleus.store.schema.SchemaTool", "-create", "-api", "JDO",
                "-props", str(properties), "package.jdo",  # Hive's mapping, in hive-metastore's jar
            ],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
    # Two applications preparing one new database at once: one of them creates the tables.
    if not _has_schema(metastore):
        output = (done.stdout + done.stderr).strip().splitlines()
        raise MetastoreUnavailable(
            f"Could not create the catalog's tables in {shown(metastore)} ({ENV_METASTORE}): "
            + "\n".join(output[-20:])
        )


def _has_schema(metastore: str) -> bool:
    with _connected(metastore) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (f'"{SCHEMA_TABLE}"',))
        row = cursor.fetchone()
    return bool(row and row[0])


def relocate_schemas(
    metastore: str, locations: Mapping[str, str], default: str
) -> list[tuple[str, str, str]]:
    """Give each schema of the PostgreSQL ``metastore`` named in ``locations`` that folder where
    it has another, and the ``default`` schema the folder ``default`` where Spark put it in a
    working directory (``spark-warehouse``). Returns (schema, old, new) of each. Only the
    record changes: a table keeps its own location. Spark refuses ``ALTER SCHEMA ... SET
    LOCATION`` on its Hive 2.3 client, so Hive's table of schemas is updated in the database.

    Raises:
        MetastoreUnavailable: the database cannot be reached.
    """
    moved = []
    with _connected(metastore) as connection, connection.cursor() as cursor:
        cursor.execute('SELECT "NAME", "DB_LOCATION_URI" FROM "DBS"')
        for name, old in cursor.fetchall():
            new = locations.get(name)
            if name == "default" and old.rstrip("/").endswith(f"/{SPARK_FALLBACK_WAREHOUSE}"):
                new = default
            if new is None or catalog.same_location(old, new):
                continue
            update = 'UPDATE "DBS" SET "DB_LOCATION_URI" = %s WHERE "NAME" = %s'
            cursor.execute(update, (_qualified(new), name))
            moved.append((name, old, _qualified(new)))
        connection.commit()
    return moved


def _qualified(location: str) -> str:
    """``location`` as Hive records a folder: a local path with ``file:``."""
    return location if ":" in location.split("/", 1)[0] else f"file:{location}"


@contextlib.contextmanager
def _connected(metastore: str) -> Iterator[Any]:
    """A connection to the PostgreSQL ``metastore``, closed after the block.

    Raises:
        MetastoreUnavailable: it cannot be reached (the message hides the password).
    """
    try:
        connection = connect(metastore, connect_timeout=CONNECT_TIMEOUT_S)
    except OperationalError as error:
        raise MetastoreUnavailable(
            f"The catalog's metastore {shown(metastore)} ({ENV_METASTORE}) cannot be reached:\n"
            + " ".join(line.strip() for line in str(error).strip().splitlines())
        ) from error
    try:
        yield connection
    finally:
        connection.close()


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
