"""A declared source's schema for one batch: inferred when there is none yet, grown by what the
batch shows, and what it still rejects. Spark looks at the data (one pass, and one more per field
whose values have several types); the rules are ``lakehouse_assets.sources.schema``'s."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from lakehouse_assets.silver.validation import REASON
from lakehouse_assets.sources import schema as types
from lakehouse_assets.sources import transforms
from lakehouse_assets.sources.schema import Schema, Type


@dataclass
class BatchSchema:
    """The schema a batch is read with, and what the batch changed in it."""

    schema: Schema
    added: list[str] = field(default_factory=list)  # new columns
    widened: list[str] = field(default_factory=list)  # columns of a wider type
    rejected_types: dict[tuple[str, ...], list[str]] = field(default_factory=dict)


def sample(records: DataFrame, size: int) -> DataFrame:
    """The latest valid value of each Kafka key (each keyless record counts alone), at most
    ``size`` of them, newest first: what a first schema is inferred from."""
    valid = records.where(F.col(REASON).isNull())
    newest = Window.partitionBy("topic", "partition", "key").orderBy(F.desc("offset"))
    ranked = valid.withColumn(
        "_rank", F.when(F.col("key").isNull(), 1).otherwise(F.row_number().over(newest))
    )
    return ranked.where(F.col("_rank") == 1).drop("_rank").orderBy(F.desc("timestamp")).limit(size)


def infer(records: DataFrame, size: int) -> Schema:
    """A first schema, from the latest value per key of ``records`` (see ``sample``)."""
    return for_batch(sample(records, size), {}, flatten=True).schema


def for_batch(records: DataFrame, schema: Schema, flatten: bool) -> BatchSchema:
    """``schema`` grown by the valid ``records`` (parsed by ``transforms.parse_values``): new
    fields added, compatible values widened; and, for fields kept whole, the types of values
    seen that the grown schema still does not accept (their records are quarantined)."""
    observed = transforms.observe(records, schema, flatten)
    seen: Type | None = observed["seen"]
    grown = types.evolve(schema, seen) if seen is not None else dict(schema)
    for path in observed["widened"]:
        grown = _widen_at(grown, path)
    for path in transforms.mixed_paths(seen):
        for kind, _ in transforms.types_at(records, path):  # most frequent first
            value = types.observed(kind)
            if value is not None:
                grown = types.evolve(grown, _nest(path, value))
    result = BatchSchema(grown, *_changes(schema, grown, flatten))
    for _, path, declared in types.leaves(grown, flatten):
        if isinstance(declared, str) or _accepted(declared, seen, path):
            continue
        kinds = [kind for kind, _ in transforms.types_at(records, path)]
        result.rejected_types[path] = [
            kind for kind in kinds if not _accepts(declared, types.observed(kind))
        ]
    return result


def _accepts(declared: Type, seen: Type | None) -> bool:
    return seen is None or types.accepts(declared, seen)


def _accepted(declared: Type, seen: Type | None, path: Sequence[str]) -> bool:
    """Whether every value at ``path`` in the batch (merged type ``seen``) fits ``declared``."""
    for name in path:
        if not isinstance(seen, dict):
            return True  # absent from the batch
        seen = seen.get(name)
    return _accepts(declared, seen)


def _nest(path: Sequence[str], value: Type) -> Type:
    for name in reversed(path):
        value = {name: value}
    return value


def _widen_at(schema: Schema, path: Sequence[str]) -> Schema:
    """``schema`` with the field at ``path`` one type wider (``int`` -> ``long``, ``date`` ->
    ``timestamp``)."""
    name, rest = path[0], path[1:]
    current = schema[name]
    if rest and isinstance(current, dict):
        return {**schema, name: _widen_at(current, rest)}
    wider = {"int": "long", "date": "timestamp"}
    return {**schema, name: wider.get(current, current) if isinstance(current, str) else current}


def _changes(before: Schema, after: Schema, flatten: bool) -> tuple[list[str], list[str]]:
    old = {name: declared for name, _, declared in types.leaves(before, flatten)}
    added, widened = [], []
    for name, _, declared in types.leaves(after, flatten):
        if name not in old:
            added.append(name)
        elif types.spark_type(old[name]) != types.spark_type(declared):
            widened.append(name)
    return added, widened
