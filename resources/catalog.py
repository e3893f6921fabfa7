"""Every table of the lake by its name: each is registered in the Spark application's catalog
(``resources.metastore``) as an external Delta table at its location, ``<schema>.<table>``,
where the schema is the table's layer (``bronze``, ``silver``, ``gold``), after the lake's
prefix when it has one (``acme_gold``: one application may serve several lakes).

The location stays the stable interface: the catalog only names it. Spark reads a registered
table through its Delta log; the metastore also keeps a copy of the columns (Delta writes it
when ``spark.databricks.delta.catalog.update.enabled`` is on), which JDBC clients' metadata
calls read. A table written by its location does not update that copy, so registration
compares it with the table's schema and registers the table again when they differ.

A writer registers a table after writing it, once per process, in one catalog call: a ``CREATE
TABLE`` when its write created the table, else a ``SHOW TABLE EXTENDED`` (which reads the
metastore only), followed by a ``CREATE TABLE`` only for a table its registration missed (a lake
older than the catalog, a crash between a table's first write and its registration). A name
registered at another location is never taken over (``CatalogClash`` names both), but for a
demo's lake, which the next demo resets anyway.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from resources import files

# A registered name's part: what every metastore and BI tool takes unquoted.
IDENTIFIER = re.compile(r"[a-z][a-z0-9_]{0,127}")
_verified: set[tuple[str, str, str]] = set()  # (name, location, schema) checked by this process
_lock = threading.Lock()
LOG = logging.getLogger(__name__)
# The lake's own folder for the metastore's schemas (``<root>/_warehouse/<schema>.db``): never a
# layer's folder, which Hive deletes with its schema (``DROP SCHEMA ... CASCADE``), and never a
# process's working directory, which a shared metastore would name to every other machine.
WAREHOUSE = "_warehouse"
# Marks a lake filled from a demo's own embedded broker: the next demo resets it, and another
# lake may take over the names its tables have in the catalog.
DEMO_MARKER = ".embedded-broker-demo"


class CatalogClash(RuntimeError):
    """A table's name is registered in the catalog for another location."""


class InvalidTableName(ValueError):
    """A table's name is not one the catalog can hold."""


@dataclass(frozen=True)
class Registered:
    """What the catalog holds for a name: its location and its copy of the columns (Spark's
    tree text of the schema, empty when the metastore holds none)."""

    location: str
    schema_tree: str


def schema_name(prefix: str, layer: str) -> str:
    """The catalog schema of ``layer``'s tables: the layer, after ``prefix`` and ``_`` if any."""
    return f"{prefix}_{layer}" if prefix else layer


def warehouse(root: str) -> str:
    """The warehouse folder of the lake at ``root`` (as Spark names it)."""
    return f"{root.rstrip('/')}/{WAREHOUSE}"


def schema_location(table_location: str, schema: str) -> str:
    """Where the metastore keeps ``schema``, a schema of the lake of the table at
    ``table_location`` (``<root>/<layer>/<table>``): in that lake's warehouse folder."""
    return f"{warehouse(lake_root(table_location))}/{schema}.db"


def lake_root(table_location: str) -> str:
    """The lake root of the table at ``table_location`` (``<root>/<layer>/<table>``)."""
    return table_location.rstrip("/").rsplit("/", 2)[0]


def check_name(table: str) -> None:
    """Refuse a table name the catalog cannot hold unquoted.

    Raises:
        InvalidTableName: naming the table.
    """
    if not IDENTIFIER.fullmatch(table):
        raise InvalidTableName(
            f"{table!r} cannot be a table's name in the catalog: lower-case letters, digits and "
            "_ after a letter, at most 128"
        )


def same_location(registered: str, location: str) -> bool:
    """Whether two spellings of a location are one: a local path with or without ``file:``."""
    return plain_location(registered) == plain_location(location)


def plain_location(location: str) -> str:
    """``location`` as registrations compare it: without ``file:`` and a trailing ``/``."""
    path = re.sub(r"^file:(//)?", "", location.rstrip("/"))
    return path if "://" in path or path.startswith("/") else "/" + path


def register(
    spark: SparkSession,
    schema: str,
    table: str,
    location: str,
    tree: str,
    new: bool = False,
) -> None:
    """Register the Delta table at ``location`` (as Spark names it) as ``schema.table``, unless
    it is registered there with the columns of ``tree`` (``schema_tree`` of its schema).
    ``new``: the caller has just created the table, so its name is most likely free: it is
    registered at once, and looked up only if it is taken.

    A name registered for another location is taken over only when that location's lake is one
    the next demo resets anyway (``disposable``).

    Raises:
        CatalogClash: the name is registered at another location; nothing is changed.
        InvalidTableName: the name cannot be registered.
    """
    check_name(table)
    key = (f"{schema}.{table}", plain_location(location), tree)
    with _lock:
        if key in _verified:
            return
    if new and _create(spark, schema, table, location, taken_ok=True):
        with _lock:
            _verified.add(key)
        return
    found = registered(spark, schema, table)
    elsewhere = found is not None and not same_location(found.location, location)
    if found is not None and elsewhere and not disposable(plain_location(found.location)):
        raise CatalogClash(
            f"{schema}.{table} is registered in the catalog for {found.location}, not for this "
            f"lake's {location}. Drop that registration (DROP TABLE {schema}.{table} leaves "
            "its data), or give this lake schemas of its own with LAKEHOUSE_SCHEMA_PREFIX."
        )
    if found is None:
        _create(spark, schema, table, location)
    elif elsewhere:
        LOG.warning(f"{schema}.{table} now names {location}, no longer the demo's {found.location}")
        spark.sql(f"DROP TABLE IF EXISTS {schema}.{table}")
        _create(spark, schema, table, location)
    elif found.schema_tree != tree:
        # The metastore's copy of the columns is older than the table's (a write by location
        # added or widened a column): register the table again to copy them anew.
        spark.sql(f"DROP TABLE IF EXISTS {schema}.{table}")
        _create(spark, schema, table, location)
    with _lock:
        _verified.add(key)


def disposable(table_location: str) -> bool:
    """Whether the table at ``table_location`` (``<root>/<layer>/<table>``) is in a demo's
    lake."""
    return files.read_text(f"{lake_root(table_location)}/{DEMO_MARKER}") is not None


def registered(spark: SparkSession, schema: str, table: str) -> Registered | None:
    """What the catalog holds for ``schema.table``, or None (one call, to the metastore only)."""
    return schema_tables(spark, schema, table).get(table)


def schema_tables(spark: SparkSession, schema: str, pattern: str = "*") -> dict[str, Registered]:
    """The tables of ``schema`` whose names match ``pattern`` (``*`` any), by name; empty when
    the schema does not exist. One call, to the metastore only."""
    try:
        rows = spark.sql(f"SHOW TABLE EXTENDED IN {schema} LIKE '{pattern}'").collect()
    except AnalysisException as error:
        if "SCHEMA_NOT_FOUND" in str(error):
            return {}
        raise
    return {row["tableName"]: _parse(row["information"]) for row in rows if not row["isTemporary"]}


def _parse(information: str) -> Registered:
    location, tree = "", []
    lines = information.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("Location: "):
            location = line.removeprefix("Location: ")
        elif line.startswith("Schema: root"):
            tree = ["root", *(text for text in lines[index + 1 :] if text.startswith(" |"))]
    return Registered(location=location, schema_tree="\n".join(tree))


def _create(
    spark: SparkSession, schema: str, table: str, location: str, taken_ok: bool = False
) -> bool:
    """Register the table; returns whether it did. A name taken meanwhile is fine at this
    location, a clash at another; with ``taken_ok``, a taken name returns False instead."""
    statement = f"CREATE TABLE {schema}.{table} USING delta LOCATION '{_escaped(location)}'"
    for attempt in range(2):
        try:
            spark.sql(statement)
            return True
        except AnalysisException as error:
            if "SCHEMA_NOT_FOUND" in str(error) and attempt == 0:
                folder = _escaped(schema_location(location, schema))
                spark.sql(f"CREATE SCHEMA IF NOT EXISTS {schema} LOCATION '{folder}'")
                continue
            if "TABLE_OR_VIEW_ALREADY_EXISTS" not in str(error):
                raise
            if taken_ok:
                return False
            found = registered(spark, schema, table)
            if found is not None and same_location(found.location, location):
                return True  # a writer beside this one registered it first
            raise CatalogClash(
                f"{schema}.{table} was registered for another location than {location} "
                "while this writer registered it"
            ) from error
    return False  # not reached: the second attempt returns or raises


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


def schema_tree(fields: Sequence[Any]) -> str:
    """Spark's tree text of a Delta schema (``StructType.treeString``) from delta-rs's fields:
    what the catalog shows of the columns it holds."""
    lines = ["root"]
    for field in fields:
        _field_lines(lines, " |", field.name, field.type, f"(nullable = {_bool(field.nullable)})")
    return "\n".join(lines)


def _field_lines(lines: list[str], prefix: str, name: str, kind: Any, note: str) -> None:
    lines.append(f"{prefix}-- {name}: {_type_name(kind)} {note}".rstrip())
    _nested_lines(lines, prefix + "    |", kind)


def _nested_lines(lines: list[str], prefix: str, kind: Any) -> None:
    if hasattr(kind, "element_type"):
        note = f"(containsNull = {_bool(kind.contains_null)})"
        _field_lines(lines, prefix, "element", kind.element_type, note)
    elif hasattr(kind, "key_type"):
        _field_lines(lines, prefix, "key", kind.key_type, "")
        note = f"(valueContainsNull = {_bool(kind.value_contains_null)})"
        _field_lines(lines, prefix, "value", kind.value_type, note)
    elif hasattr(kind, "fields"):
        for field in kind.fields:
            note = f"(nullable = {_bool(field.nullable)})"
            _field_lines(lines, prefix, field.name, field.type, note)


def _type_name(kind: Any) -> str:
    name = getattr(kind, "type", "")
    return name if isinstance(name, str) else ""


def _bool(value: bool) -> str:
    return "true" if value else "false"
