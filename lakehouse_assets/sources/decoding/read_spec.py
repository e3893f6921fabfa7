"""How a source's records are read: plain values from its declaration
(``SourceDeclaration.read_spec``) and its schema, built once per run and pickled to the executors
(``reader``, ``columnar``, ``connect_columns``). Decoding takes this, never the declaration."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from lakehouse_assets.sources.decoding import debezium
from lakehouse_assets.sources.decoding import schema as types
from lakehouse_assets.sources.decoding.schema import Schema, Type


@dataclass(frozen=True)
class ReadSpec:
    """How a source's records are read: plain values, pickled to the executors."""

    schema: Schema
    flatten: bool
    format: str  # json | debezium-json | avro
    mode: str
    name: str = ""  # the source's: its schema file is ``silver/_schemas/<name>.json``
    keys: tuple[str, ...] = ()
    order_by: str = "offset"
    avsc: str | None = None  # the Avro schema, JSON
    avro_schema: str | None = None  # where the Avro schema was read, for its errors
    sample_size: int = 10_000  # records a schema is first inferred from at most
    avro_framing: str = "confluent"
    separator: str = "_"  # between a flattened column's parent and child names
    keep_empty_strings: bool = False  # False: an empty string is stored as NULL
    placeholder: str = debezium.PLACEHOLDER  # Debezium's unavailable.value.placeholder
    truncates: bool = False  # a truncate is read (a delete of no key), not rejected
    # Every record's value kept, not only a reject's: some records the reader accepts go to the
    # quarantine afterwards (``SourceDeclaration.read_spec``), which keeps their bytes.
    keep_values: bool = False

    def using(self, schema: Schema) -> ReadSpec:
        """The spec reading with ``schema``."""
        return dataclasses.replace(self, schema=schema)

    def leaves(self) -> list[tuple[str, tuple[str, ...], Type]]:
        return list(types.leaves(self.schema, self.flatten, self.separator))
