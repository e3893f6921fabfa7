"""A declared source's schema for one batch: inferred when there is none yet, and grown by what
the batch shows (the ``_issues`` the reader reports: new fields, and values of other types).
The rules are ``lakehouse_assets.sources.decoding.schema``'s."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.sources.decoding import schema as types
from lakehouse_assets.sources.decoding.read_spec import ReadSpec
from lakehouse_assets.sources.decoding.reader import ISSUES, Reader
from lakehouse_assets.sources.decoding.schema import Schema, Type

MAX_ISSUES = 10_000  # distinct (field, type) reports a batch's schema is grown from, at most


def sample(records: DataFrame, size: int) -> list[tuple[bytes, bytes | None]]:
    """``(value, key)`` of the latest record of each Kafka key (each keyless record counts
    alone) among the ``size`` newest (highest offsets), newest first: what a first schema is
    inferred from."""
    newest = records.where(F.col("value").isNotNull()).orderBy(F.desc("offset")).limit(size)
    rows = newest.select("topic", "partition", "key", "value").collect()  # one pass, no shuffle
    seen: set[tuple] = set()
    latest = []
    for row in rows:
        key = (row.topic, row.partition, row.key)
        if row.key is None or key not in seen:
            seen.add(key)
            latest.append((row.value, row.key))
    return latest


def infer(spec: ReadSpec, values: Iterable[tuple[bytes, bytes | None]]) -> Schema:
    """A first schema: every field the ``values`` hold, the newest value's type first."""
    reader = Reader(replace(spec, schema={}, keys=()))
    reports: list[str] = []
    for value, key in values:
        issues = reader.read(value, key).get(ISSUES)
        if issues:
            reports.append(issues)
    return grow({}, [(report, 1) for report in reports])


def issues_of(typed: DataFrame) -> list[tuple[str, int]]:
    """The distinct ``_issues`` reports of a read batch with their counts, most frequent first."""
    reports = typed.where(F.col(ISSUES).isNotNull()).groupBy(ISSUES).count()
    top = reports.orderBy(F.desc("count"), ISSUES).limit(MAX_ISSUES).collect()
    return [(row[ISSUES], row["count"]) for row in top]


def grow(schema: Schema, reports: Sequence[tuple[str, int]]) -> Schema:
    """``schema`` grown by the reports (most frequent first): new fields added, values a wider
    type holds widening their field (``int`` beyond 32 bits to ``long``); other values leave it
    as it is, and their records stay rejected."""
    grown = dict(schema)
    for report, _ in reports:
        for path, seen in json.loads(report):
            if seen is None:
                continue
            if _type_at(grown, path) == "int" and seen == "long":
                grown = _set_at(grown, path, "long")
            else:
                grown = types.evolve(grown, _nest(path, seen))
    return grown


def changes(
    before: Schema, after: Schema, flatten: bool, separator: str = "_"
) -> tuple[list[str], list[str]]:
    """The columns ``after`` adds to ``before``, and those whose type it changes."""
    old = {name: declared for name, _, declared in types.leaves(before, flatten, separator)}
    added, widened = [], []
    for name, _, declared in types.leaves(after, flatten, separator):
        if name not in old:
            added.append(name)
        elif types.spark_type(old[name]) != types.spark_type(declared):
            widened.append(name)
    return added, widened


def _type_at(schema: Schema, path: Sequence[str]) -> Type | None:
    current: Type | None = schema
    for name in path:
        current = current.get(name) if isinstance(current, dict) else None
    return current


def _set_at(schema: Schema, path: Sequence[str], value: Type) -> Schema:
    name, rest = path[0], path[1:]
    child = schema.get(name)
    if rest and isinstance(child, dict):
        return {**schema, name: _set_at(child, rest, value)}
    return {**schema, name: value}


def _nest(path: Sequence[str], value: Type) -> Type:
    for name in reversed(path):
        value = {name: value}
    return value
