"""A declaration as decoding takes it: the ``ReadSpec`` of a source, built once per run."""

from __future__ import annotations

import json
from pathlib import Path

from lakehouse_assets.sources.declaration.model import CDC_MODES, SourceDeclaration
from lakehouse_assets.sources.decoding import avro
from lakehouse_assets.sources.decoding.read_spec import ReadSpec


def read_spec(source: SourceDeclaration) -> ReadSpec:
    """How the source's records are read, before a schema is known (``ReadSpec.using``); an
    Avro source's .avsc is read here, once.

    Raises:
        AvroSchemaError: the .avsc is missing or not an Avro record schema.
    """
    avsc = None
    if source.format == "avro":
        avsc = json.dumps(avro.read_avsc(Path(str(source.avro_schema))))
    return ReadSpec(
        schema={}, flatten=source.flatten, format=source.format, mode=source.mode,
        name=source.name, keys=source.keys if source.mode in CDC_MODES else (),
        order_by=source.order_by, avsc=avsc, avro_schema=str(source.avro_schema),
        avro_framing=source.avro_framing, separator=source.separator,
        sample_size=source.sample_size, keep_empty_strings=source.keeps_empty_strings,
        placeholder=source.unavailable_value_placeholder, truncates=source.truncate == "apply",
        keep_values=rejects_after_reading(source),
    )  # fmt: skip


def rejects_after_reading(source: SourceDeclaration) -> bool:
    """Whether a record the reader accepts may still go to the quarantine, which keeps its
    bytes: by a ``drop`` expectation, or (``cdc-scd2``) by an order value of another kind than
    ``valid_from`` holds."""
    drops = any(expectation.on_violation == "drop" for expectation in source.expectations)
    return drops or source.mode == "cdc-scd2"
