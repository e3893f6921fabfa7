"""What each column of the bronze tables holds (the tables' column schema in the Dagster UI)."""

from lakehouse_assets.constants import KAFKA_TOPICS, LANDING_COLUMNS

KAFKA_RECORD = {
    "key": "The record's key, as the bytes delivered (null for a record without a key).",
    "value": "The record's value, as the bytes delivered (null for a tombstone).",
    "topic": "The Kafka topic the record was read from.",
    "partition": "The Kafka partition of the record.",
    "offset": "The record's offset in its partition: with topic and partition, its identity.",
    "timestamp": "The record's Kafka timestamp (UTC).",
    "timestampType": "What the timestamp is: 0 the producer's create time, 1 the broker's log "
    "append time, -1 none.",
    "headers": "The record's headers in order: key (text) and value (bytes); null when none.",
    "ingested_at": "When the micro-batch that wrote the record ran (UTC).",
    "date": "The UTC date of the Kafka timestamp; the table is partitioned by it.",
}
LANDING_LINE = {
    "line": "One line of the file, as the bytes the file holds (without the line break; the "
    "header line included).",
    "source_file": "The landing file the line comes from.",
    "ingested_at": "When the micro-batch that read the file ran (UTC).",
}

DESCRIPTIONS: dict[str, dict[str, str]] = {
    **{topic: KAFKA_RECORD for topic in KAFKA_TOPICS},
    **{source: LANDING_LINE for source in LANDING_COLUMNS},
}
