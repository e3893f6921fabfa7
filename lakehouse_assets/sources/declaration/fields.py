"""The fields a JSON source may declare instead of having its schema inferred (``fields`` in its
declaration): each a column with its type and rules, read by ``validation.parse_json``."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from lakehouse_assets.sources.declaration.routing import FIELD_PATH

NAME = re.compile(r"[a-z][a-z0-9_]*")  # of a source, of a field


def _lower_case(value: str) -> str:
    if not NAME.fullmatch(value):
        raise ValueError("must be lower case letters, digits and _, starting with a letter")
    return value


Name = Annotated[str, AfterValidator(_lower_case)]  # a source's or a field's name


class DeclaredField(BaseModel):
    """A field of a source's JSON records, declared: its column, type and rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Name = Field(description="The column, and the field's name in the record.")
    type: Literal["integer", "number", "string"] = Field(
        description="integer: bigint; number: decimal(20,6); string: string."
    )
    required: bool = Field(default=True, description="A record without it is quarantined.")
    allowed: tuple[str, ...] = Field(
        default=(), description="The only values it may hold (as text); others are quarantined."
    )
    path: str | None = Field(
        default=None, description="Where it is in the record, e.g. address.zip (default: name)."
    )

    @field_validator("path")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        if value is not None and not FIELD_PATH.fullmatch(value):
            raise ValueError("must be a dotted field path such as address.zip")
        return value


def field_errors(
    fields: Sequence[DeclaredField],
    encoding: str,
    mode: str,
    keys: Sequence[str],
    partitioned: bool,
    ordered_by_offset: bool,
) -> Iterator[tuple[str, str]]:
    """The rules of a source declaring its ``fields`` (encoded as ``encoding``, kept as ``mode`` by
    ``keys``), as ``(field, message)``."""
    names = [field.name for field in fields]
    if encoding not in ("json", "csv") or mode not in ("append", "latest-per-key"):
        yield (
            "fields",
            "declared fields type plain JSON records or CSV lines: format json or csv, mode "
            "append or latest-per-key",
        )
    if encoding == "csv":
        yield from _csv_errors(fields, mode)
    for name in sorted({name for name in names if names.count(name) > 1}):
        yield "fields", f"the field {name!r} is declared twice"
    if mode == "latest-per-key" and not keys:
        yield "keys", "latest-per-key with declared fields keys rows by some of them: name them"
    for key in keys:
        if key not in names:
            yield "keys", f"the key {key!r} is not a declared field"
    if partitioned:
        yield "partition_by", "a source with declared fields is not partitioned: leave it out"
    if not ordered_by_offset:
        yield "order_by", "the latest record read wins: leave out 'order_by'"


def _csv_errors(fields: Sequence[DeclaredField], mode: str) -> Iterator[tuple[str, str]]:
    """A CSV line's columns, by position: every one required, an integer or text."""
    if mode == "append":
        yield (
            "mode",
            "a landing file's lines have no Kafka coordinates to keep them by: mode "
            "latest-per-key, with keys",
        )
    for n, field in enumerate(fields):
        if field.type == "number":
            yield f"fields.{n}.type", "a csv column is an integer or a string"
        if not field.required or field.allowed or field.path:
            yield (
                f"fields.{n}",
                "a csv column is required, by position: no required, allowed or path",
            )
