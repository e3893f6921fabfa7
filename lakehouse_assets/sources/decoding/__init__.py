"""A source's records decoded on the executors (JSON, Debezium envelopes with their Connect
schemas, Avro) and typed against the source's schema, which is inferred, persisted and grown
(reading.py: a bronze batch read so)."""
