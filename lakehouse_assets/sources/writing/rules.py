"""The data-quality rules of a declared source's silver table, from its declaration."""

from __future__ import annotations

from lakehouse_assets.checks.expectations import Expectation
from lakehouse_assets.checks.rules import ONE_CURRENT_VERSION, TableRules, primary_key
from lakehouse_assets.sources.declaration.model import SourceDeclaration
from lakehouse_assets.sources.writing.cdc import IS_CURRENT, VALID_FROM


def source_rules(source: SourceDeclaration) -> TableRules:
    """The rules of a declared source's silver table, from its declaration: the key of its mode
    (``keys`` for SCD1; ``keys`` and ``valid_from`` for SCD2, with one current version per key;
    the Kafka key for a latest-per-key mirror; the record's Kafka coordinates for append)."""
    if source.mode == "cdc-scd1":
        return TableRules(primary_key(*source.keys))
    if source.mode == "cdc-scd2":
        listed = ", ".join(f"`{key}`" for key in source.keys)
        current = Expectation(
            ONE_CURRENT_VERSION,
            "fail",
            unique=source.keys,
            where=IS_CURRENT,
            description=f"{listed} unique among the rows where `{IS_CURRENT}`.",
        )
        return TableRules((*primary_key(*source.keys, VALID_FROM), current))
    if source.mode == "latest-per-key":
        return TableRules(primary_key("_kafka_key"))
    return TableRules(primary_key("_kafka_topic", "_kafka_partition", "_kafka_offset"))
