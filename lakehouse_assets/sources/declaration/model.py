"""A declared source's fields: a Kafka source (or landing folder) in a few lines of YAML, which
become its bronze and silver assets (``lakehouse_assets.sources.assets``) without code. They are
the ``attributes`` of a ``defs.yaml`` (``components.Source``; the folder's name is the source's),
or a file of a ``LAKEHOUSE_SOURCES`` folder (the file's name is the source's)::

    topic: shop.public.orders        # or topic_pattern: 'shop\\.public\\..*'
    format: debezium-json            # json | debezium-json | avro | csv (landing/<name>/)
    mode: cdc-scd1                   # append | latest-per-key | cdc-scd1 | cdc-scd2
    keys: [id]
    order_by: source.lsn             # default: the Kafka offset
    unavailable_value_placeholder: __debezium_unavailable_value   # the connector's setting
    truncate: apply                  # a truncate empties the table; default: quarantine
    partition_by: [country, date(created_at)]

A plain JSON source may declare its ``fields`` instead of having its schema inferred: each typed
and checked by its rules (``validation``), a record breaking one quarantined with the first::

    fields:
      - {name: device_id, type: integer}
      - {name: heartrate, type: number, required: false}
      - {name: zip, type: integer, required: false, path: address.zip}
      - {name: action, type: string, allowed: [start, stop]}

An ``expectations`` block states what the silver table should hold (``expectations``); a
``route-by-type`` source adds a ``routing`` block (``routing``). The rules across the fields are
``rules``; ``files`` reads a declaration's file and reports what is wrong with its line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from lakehouse_assets.sources.declaration.expectations import DeclaredExpectation
from lakehouse_assets.sources.declaration.fields import NAME, DeclaredField, Name
from lakehouse_assets.sources.declaration.routing import FIELD_PATH, SEPARATOR, Routing
from lakehouse_assets.sources.decoding import avro
from lakehouse_assets.sources.decoding.read_spec import ReadSpec
from lakehouse_assets.sources.writing.transforms import KAFKA_COLUMNS, LANDING_COLUMNS

OFFSET = "offset"  # order_by's default: the Kafka offset
DATE_OF = re.compile(r"date\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)")

Format = Literal["json", "debezium-json", "avro", "csv"]
LANDING = "csv"  # a landing folder's CSV files, not a topic
Mode = Literal["append", "latest-per-key", "cdc-scd1", "cdc-scd2", "route-by-type"]
CDC_MODES = ("cdc-scd1", "cdc-scd2")
ROUTE = "route-by-type"


def _partition_entry(entry: str) -> str:
    if not (NAME.fullmatch(entry) or DATE_OF.fullmatch(entry)):
        raise ValueError(f"{entry!r} is neither a column name nor date(<column>)")
    return entry


PartitionEntry = Annotated[str, AfterValidator(_partition_entry)]


class SourceDeclaration(BaseModel):
    """A Kafka source declared in a YAML file: what to read, how to parse it, how to keep it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name = Field(description="Tables bronze/<name> and silver/<name>: the file's name.")
    topic: str | None = Field(default=None, description="The topic to read.")
    topic_pattern: str | None = Field(
        default=None, description="A regular expression: every topic whose whole name matches."
    )
    format: Format = Field(
        default="json",
        description="How a record's value is encoded; csv: the lines of the CSV files dropped in "
        "landing/<name>/ under the lake root, not a topic.",
    )
    avro_schema: str | None = Field(
        default=None, description="The .avsc file of an avro source (relative to this file)."
    )
    avro_framing: Literal["confluent", "none"] = Field(
        default="confluent",
        description="confluent: each value starts with a zero byte and a 4-byte schema id.",
    )
    mode: Mode = Field(default="append", description="What the silver table keeps.")
    keys: tuple[str, ...] = Field(
        default=(), description="Columns identifying a row (cdc modes; the Kafka key otherwise)."
    )
    order_by: str = Field(
        default=OFFSET,
        description="Which of two changes of a key is newer: 'offset' (the Kafka offset) or a "
        "field path of the record (for Debezium, of the envelope: 'source.lsn', 'ts_ms').",
    )
    partition_by: tuple[PartitionEntry, ...] = Field(
        default=(), description="Partition columns of silver: a column, or date(<column>)."
    )
    flatten: bool = Field(
        default=True, description="Nested records become <parent>_<child> columns."
    )
    description: str | None = Field(default=None, description="Shown on the assets.")
    owners: tuple[str, ...] = Field(
        default=(), description="Dagster owners: emails or team:<name>."
    )
    sample_size: int = Field(
        default=10_000, gt=0, description="Records the schema is first inferred from at most."
    )
    routing: Routing | None = Field(
        default=None, description="route-by-type: the document store, filters and locations."
    )
    fields: tuple[DeclaredField, ...] = Field(
        default=(),
        description="The records' fields, typed and checked as declared (json, append or "
        "latest-per-key); without them the schema is inferred.",
    )
    empty_strings: Literal["keep", "null"] | None = Field(
        default=None,
        description="'keep': an empty string is a value, apart from NULL; 'null': it is stored "
        "as NULL. Default: keep for debezium-json, avro and the cdc modes (a copy of a database "
        "table answers = '' and IS NULL as the database does); null for other json sources.",
    )
    unavailable_value_placeholder: str = Field(
        default="__debezium_unavailable_value",
        min_length=1,
        description="debezium-json: the connector's unavailable.value.placeholder. A column "
        "holding it (its text, or in a bytes column its bytes) keeps the key's stored value "
        "(cdc-scd1), the previous version's (cdc-scd2); NULL in other modes. Never stored.",
    )
    truncate: Literal["apply", "quarantine"] = Field(
        default="quarantine",
        description="A Debezium truncate (op t, sent when the connector's skipped.operations "
        "leaves t out). 'apply' (cdc modes): it deletes every row older than it (cdc-scd1) or "
        "closes every version open at it (cdc-scd2), and a change older than it arriving later "
        "stays out. 'quarantine': it goes to the quarantine table with its reason.",
    )

    expectations: tuple[DeclaredExpectation, ...] = Field(
        default=(),
        description="What the silver table is expected to hold, and what a violation does "
        "(warn, drop or fail); each an asset check of the table.",
    )

    @field_validator("topic_pattern")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise ValueError(f"is not a regular expression: {error}") from error
        return value

    @field_validator("order_by")
    @classmethod
    def _order_by(cls, value: str) -> str:
        if not FIELD_PATH.fullmatch(value):
            raise ValueError("must be 'offset' or a dotted field path such as source.lsn")
        return value

    @property
    def partition_columns(self) -> list[tuple[str, str | None]]:
        """``(column, date source column or None)`` per partition entry: ``date(created_at)``
        is the column ``created_at_date``."""
        columns: list[tuple[str, str | None]] = []
        for entry in self.partition_by:
            match = DATE_OF.fullmatch(entry)
            columns.append((f"{match[1]}_date", match[1]) if match else (entry, None))
        return columns

    @property
    def separator(self) -> str:
        """Between a flattened column's parent and child names: ``__`` in routed tables."""
        return SEPARATOR if self.mode == ROUTE else "_"

    @property
    def keeps_empty_strings(self) -> bool:
        """Whether an empty string stays one (``empty_strings``, else the format's default)."""
        if self.empty_strings is not None:
            return self.empty_strings == "keep"
        return self.format != "json" or self.mode in CDC_MODES

    @property
    def record_columns(self) -> list[str] | None:
        """The columns a record is read into, when declared (None: inferred)."""
        return [field.name for field in self.fields] if self.fields else None

    @property
    def table_columns(self) -> list[str] | None:
        """The silver table's columns, when its fields are declared (None: inferred)."""
        if not self.fields:
            return None
        added = LANDING_COLUMNS if self.format == LANDING else KAFKA_COLUMNS
        return [field.name for field in self.fields] + list(added)

    def read_spec(self) -> ReadSpec:
        """How the source's records are read, as decoding takes it, before a schema is known
        (``ReadSpec.using``); an Avro source's .avsc is read here, once per run.

        Raises:
            AvroSchemaError: the .avsc is missing or not an Avro record schema.
        """
        avsc = None
        if self.format == "avro":
            avsc = json.dumps(avro.read_avsc(Path(str(self.avro_schema))))
        # A record the reader accepts may still go to the quarantine, which keeps its bytes: by a
        # ``drop`` expectation, or (``cdc-scd2``) by an order value of another kind than
        # ``valid_from`` holds.
        drops = any(expectation.on_violation == "drop" for expectation in self.expectations)
        return ReadSpec(
            schema={}, flatten=self.flatten, format=self.format, mode=self.mode, name=self.name,
            keys=self.keys if self.mode in CDC_MODES else (), order_by=self.order_by, avsc=avsc,
            avro_schema=str(self.avro_schema), avro_framing=self.avro_framing,
            separator=self.separator, sample_size=self.sample_size,
            keep_empty_strings=self.keeps_empty_strings,
            placeholder=self.unavailable_value_placeholder, truncates=self.truncate == "apply",
            keep_values=drops or self.mode == "cdc-scd2",
        )  # fmt: skip
