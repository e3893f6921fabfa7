"""A password on the SQL endpoint (HiveServer2's protocol) of the Spark Connect server.

HiveServer2 takes a user's password only through an authentication class of its own kind
(``CUSTOM``; its others are LDAP, Kerberos and PAM). The project keeps one, in Java, beside this
module: it accepts the one user and password of the server's environment
(``LAKEHOUSE_SQL_USER``, default ``lakehouse``, and ``LAKEHOUSE_SQL_PASSWORD``). ``lakehouse
jars`` (``make install``) compiles it with the JDK's ``javac`` against the pyspark wheel's
Thrift server; a server started with ``LAKEHOUSE_SQL_PASSWORD`` set loads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from lakehouse_tools.java_classes import SOURCES, compile_jar
from resources.settings import ENV_SQL_PASSWORD
from resources.spark_jvm import JARS_DIR, spark_home

SOURCE = SOURCES / "lakehouse/sql/EnvironmentPasswordAuthenticator.java"
AUTHENTICATOR = "lakehouse.sql.EnvironmentPasswordAuthenticator"
AUTH_JAR = JARS_DIR.with_name("sql-auth") / "lakehouse-sql-auth.jar"
HIVE_SETTINGS = {
    "hive.server2.authentication": "CUSTOM",
    "hive.server2.custom.authentication.class": AUTHENTICATOR,
}


class SqlAuthUnavailable(RuntimeError):
    """A password is asked for, but the authentication class was never compiled."""


def build(target: Path = AUTH_JAR) -> Path | None:
    """Compile the authentication class into the jar ``target``; returns it, or None when this
    Java has no compiler (a JRE: the SQL endpoint then takes no password).

    Raises:
        subprocess.CalledProcessError: javac refused the source.
    """
    return compile_jar([SOURCE], [spark_home() / "jars"], target)


def required_jar(environ: Mapping[str, str], jar: Path = AUTH_JAR) -> Path | None:
    """The jar a server started with ``environ`` loads: the authentication class when
    ``LAKEHOUSE_SQL_PASSWORD`` is set, else none.

    Raises:
        SqlAuthUnavailable: the password is set but the class was never compiled.
    """
    if not environ.get(ENV_SQL_PASSWORD):
        return None
    if not jar.is_file():
        raise SqlAuthUnavailable(
            f"{ENV_SQL_PASSWORD} is set, but the SQL endpoint's authentication class is not "
            f"compiled ({jar}): run `lakehouse jars` (`make install` does) with a JDK 17, "
            "whose javac compiles it."
        )
    return jar
