"""The ``routing`` block of a ``route-by-type`` source: Kafka carries change notices only, the
documents live in a PostgreSQL store, and each (domain, topic, type) gets a lake table of its own::

    topic_pattern: '(case|form)-sql'
    mode: route-by-type
    order_by: publish_timestamp          # which of two notices of a document is newer
    partition_by: [month, supervisor_id]
    routing:
      documents:                         # per document_type: where its documents are, and
        XFormInstance:                   # which of their fields give the month and the user
          table: form_documents
          month_from: form.meta.timeEnd
          user_from: form.meta.userID
        CommCareCase: {table: case_documents, month_from: opened_on, user_from: user_id}
      domains: [demo]                    # only these domains reach the lake (all when left out)
      types: [pregnancy, 5f1e32ab]       # only these types (all when left out)
      locations:                         # the location hierarchy, kept from its own topic
        topic: location
        levels: [state, district, project, supervisor, flwc]

A notice is a JSON value with ``document_id``, ``document_type``, ``document_subtype``,
``domain``, ``is_deletion`` and ``publish_timestamp``. A document's type is the last ``/``
segment of its subtype (a form's xmlns ``http://openrosa.org/formdesigner/<GUID>`` gives the
GUID). A ``<document_type>-Deleted`` notice, or one with ``is_deletion``, deletes the document.
A location is a JSON value with ``location_id``, ``location_type``, ``parent_location_id`` and
``user_ids`` (the users working there).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

TABLE = re.compile(r"[a-z_][a-z0-9_]*")
# A path into a record: dot-separated field names (``source.lsn``, ``form.meta.timeEnd``).
FIELD_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
SEPARATOR = "__"  # a routed table flattens nested fields into parent__child columns
DELETED_SUFFIX = "-Deleted"


def _field_path(value: str | None) -> str | None:
    if value is not None and not FIELD_PATH.fullmatch(value):
        raise ValueError("must be a dotted field path such as form.meta.timeEnd")
    return value


class DocumentKind(BaseModel):
    """Where the documents of one ``document_type`` live, and what their fields mean."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    table: str = Field(description="The store's table of these documents: id text, doc jsonb.")
    month_from: str = Field(description="The date or date-time field the month comes from.")
    user_from: str | None = Field(
        default=None, description="The field naming the user whose location enriches the row."
    )

    @field_validator("table")
    @classmethod
    def _table(cls, value: str) -> str:
        if not TABLE.fullmatch(value):
            raise ValueError("must be a table name: lower case letters, digits and _")
        return value

    _month_from = field_validator("month_from")(_field_path)
    _user_from = field_validator("user_from")(_field_path)


class Locations(BaseModel):
    """The location hierarchy: its topic, and its levels' types from the root down."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    topic: str = Field(description="The topic of the location records.")
    levels: tuple[str, ...] = Field(
        min_length=1, description="Location types, root first: each gives a <type>_id column."
    )

    @field_validator("levels")
    @classmethod
    def _levels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for level in value:
            if not TABLE.fullmatch(level):
                raise ValueError(f"{level!r} is not a name: lower case letters, digits and _")
        if len(set(value)) < len(value):  # each gives a column <level>_id
            twice = next(level for n, level in enumerate(value) if level in value[:n])
            raise ValueError(f"names the level {twice!r} twice")
        return value

    @property
    def columns(self) -> list[str]:
        """The enrichment columns, ``<level>_id`` root first."""
        return [f"{level}_id" for level in self.levels]


class Routing(BaseModel):
    """How a ``route-by-type`` source finds, filters and enriches its documents."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    documents: dict[str, DocumentKind] = Field(
        min_length=1, description="Per document_type: its store table and fields."
    )
    domains: tuple[str, ...] = Field(default=(), description="Domains kept (all when empty).")
    types: tuple[str, ...] = Field(default=(), description="Types kept (all when empty).")
    locations: Locations | None = Field(default=None, description="The location hierarchy.")

    @field_validator("documents")
    @classmethod
    def _kinds(cls, value: dict[str, DocumentKind]) -> dict[str, DocumentKind]:
        for kind in value:
            if kind.endswith(DELETED_SUFFIX):
                raise ValueError(f"{kind!r}: declare the document type, without {DELETED_SUFFIX}")
        return value


def routing_errors(
    routed: bool,
    routing: Routing | None,
    encoding: str,
    keys: Sequence[str],
    partition_by: Sequence[str],
) -> Iterator[tuple[str, str]]:
    """The rules of the ``routing`` block across a source's fields: only a ``routed`` source
    has one, and it reads JSON notices, takes no ``keys`` and is partitioned by what routing
    derives; as ``(field, message)``."""
    if routed != (routing is not None):
        yield "routing", "a route-by-type source has a 'routing' block (and only such a source)"
    if not routed:
        return
    if encoding != "json":
        yield "format", "route-by-type reads JSON change notices: 'json'"
    if keys:
        yield "keys", "route-by-type keys documents by their id: leave 'keys' out"
    if routing is not None:
        derived = ["month", *(routing.locations.columns if routing.locations else [])]
        for entry in partition_by:
            if entry not in derived:
                yield "partition_by", f"a routed table is partitioned by some of {derived}"


def table_name(domain: str, topic: str, document_type: str) -> str:
    """The lake table of a (domain, topic, type): ``<domain>_<topic>_<type>``, lower case, each
    character other than a letter, a digit or ``_`` made ``_``."""
    return re.sub(r"[^a-z0-9_]", "_", f"{domain}_{topic}_{document_type}".lower())
