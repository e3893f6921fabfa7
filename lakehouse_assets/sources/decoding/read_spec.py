"""What the executors need to read a source's records (``reader``, ``columnar``,
``connect_columns``): plain values from its declaration and schema, pickled to them."""

from __future__ import annotations

from dataclasses import dataclass

from lakehouse_assets.sources.decoding import debezium
from lakehouse_assets.sources.decoding import schema as types
from lakehouse_assets.sources.decoding.schema import Schema, Type


@dataclass(frozen=True)
class ReadSpec:
    """What the executors need to read a source's records: plain values, pickled to them."""

    schema: Schema
    flatten: bool
    format: str  # json | debezium-json | avro
    mode: str
    keys: tuple[str, ...] = ()
    order_by: str = "offset"
    avsc: str | None = None  # the Avro schema, JSON
    avro_framing: str = "confluent"
    separator: str = "_"  # between a flattened column's parent and child names
    keep_empty_strings: bool = False  # False: an empty string is stored as NULL
    placeholder: str = debezium.PLACEHOLDER  # Debezium's unavailable.value.placeholder
    truncates: bool = False  # a truncate is read (a delete of no key), not rejected
    # Every record's value kept, not only a reject's: some records the reader accepts go to the
    # quarantine afterwards (``reading.rejects_after_reading``), which keeps their bytes.
    keep_values: bool = False

    def leaves(self) -> list[tuple[str, tuple[str, ...], Type]]:
        return list(types.leaves(self.schema, self.flatten, self.separator))
