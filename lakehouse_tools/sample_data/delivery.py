"""The sample's records sent to a Kafka cluster."""

from __future__ import annotations

from lakehouse_tools.sample_data.model import Message

MAX_RECORD = 8 * 1024 * 1024  # bytes; as the Kafka source's fetch size


def _encoded(text: str | bytes | None) -> bytes | None:
    return text.encode() if isinstance(text, str) else text


def produce(bootstrap_servers: str, messages: list[Message]) -> dict[str, int]:
    """Send ``messages`` with normal producer batching; returns the count per topic."""
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers.split(","), linger_ms=20, max_request_size=MAX_RECORD
    )
    counts: dict[str, int] = {}
    try:
        for message in messages:
            producer.send(
                message.topic,
                key=_encoded(message.key),
                value=_encoded(message.value),
                headers=list(message.headers),
            )
            counts[message.topic] = counts.get(message.topic, 0) + 1
        producer.flush()
    finally:
        producer.close()
    return counts
