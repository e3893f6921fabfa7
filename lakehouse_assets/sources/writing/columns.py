"""What the columns of a declared source's silver tables hold (their column schema in the
Dagster UI): the columns the lakehouse adds are described here; the record's own fields name
their source and its schema file."""

from lakehouse_assets.sources.declaration.model import SourceDeclaration
from lakehouse_assets.sources.decoding.reader import OP, SEQUENCE
from lakehouse_assets.sources.decoding.reading import schema_path
from lakehouse_assets.sources.writing.cdc import IS_CURRENT, VALID_FROM, VALID_TO

ADDED = {
    "_kafka_key": "The Kafka record's key, as text.",
    "_kafka_topic": "The Kafka topic of the record.",
    "_kafka_partition": "The Kafka partition of the record.",
    "_kafka_offset": "The record's offset in its partition.",
    "_kafka_timestamp": "The record's Kafka timestamp (UTC).",
    "_landing_file": "The landing file the row comes from.",
    "_ingested_at": "When the file was read into bronze (UTC).",
    "_raw_change_type": "The kind of change of the bronze row in bronze's change data feed "
    "(`insert` for a record appended to bronze).",
    OP: "The Debezium operation of the change: `c` create, `u` update, `d` delete, `r` read "
    "(snapshot).",
    SEQUENCE: "The change's position in its key's history: the declared `order_by` value, ties "
    "broken by the Kafka offset.",
    VALID_FROM: "When this version of the key became current (its change's `order_by` value).",
    VALID_TO: "When the next change of the key replaced this version (null while current).",
    IS_CURRENT: "Whether this is the key's current version.",
}


def field_description(source: SourceDeclaration) -> str:
    """The description of a column holding a field of ``source``'s records."""
    return (
        f"A field of the `{source.name}` records, typed by the schema file "
        f"`{'/'.join(schema_path(source.name))}` under the lake root."
    )
