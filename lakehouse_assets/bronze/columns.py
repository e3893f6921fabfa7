"""What each column of a bronze table holds (its column schema in the Dagster UI): a Kafka
topic's records as Spark's Kafka source gives them, or a landing folder's lines."""

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
