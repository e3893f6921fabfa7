"""A deterministic generator of the fitness company's events (seeded; scales by users and days).

Kafka topics follow the source contract of the reference pipeline: ``user_info`` (profile changes,
keyed by user id), ``workout`` (start/stop actions, keyed by user id) and ``bpm`` (heart-rate
readings, keyed by device id). Values are JSON objects.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from lakehouse_assets.constants import TOPIC_BPM, TOPIC_USER_INFO, TOPIC_WORKOUT

CITIES = [("Austin", "TX"), ("Denver", "CO"), ("Portland", "OR"), ("Boston", "MA"), ("Miami", "FL")]
FIRST_NAMES = ["Ana", "Ben", "Chen", "Dana", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo"]
LAST_NAMES = ["Smith", "Garcia", "Kim", "Okafor", "Novak", "Silva", "Berg", "Rossi"]
DEVICE_ID_OFFSET = 1000  # a user's device id is user id + this offset
READING_INTERVAL_S = 10


@dataclass(frozen=True)
class Message:
    """One Kafka record to produce."""

    topic: str
    key: str | None
    value: str


def _user_info(rng: random.Random, user_id: int, timestamp: float) -> dict[str, object]:
    city, state = rng.choice(CITIES)
    born = date(1940, 1, 1) + timedelta(days=rng.randrange(0, 365 * 65))
    sex = rng.choice(["M", "F"])
    return {
        "user_id": user_id,
        "update_type": "new",
        "timestamp": timestamp,
        "dob": born.strftime("%m/%d/%Y"),
        "sex": sex,
        "gender": {"M": "male", "F": "female"}[sex],
        "first_name": rng.choice(FIRST_NAMES),
        "last_name": rng.choice(LAST_NAMES),
        "address": {
            "street_address": f"{rng.randrange(1, 999)} Main St",
            "city": city,
            "state": state,
            "zip": rng.randrange(10000, 99999),
        },
    }


def _workout_day(
    rng: random.Random, user_id: int, day_start: int, workout_id: int
) -> Iterator[Message]:
    start = day_start + rng.randrange(6 * 3600, 20 * 3600)
    stop = start + rng.randrange(20 * 60, 90 * 60)
    for action, timestamp in (("start", start), ("stop", stop)):
        value = {
            "user_id": user_id,
            "workout_id": workout_id,
            "session_id": 1,
            "action": action,
            "timestamp": timestamp,
        }
        yield Message(TOPIC_WORKOUT, str(user_id), json.dumps(value))
    device_id = user_id + DEVICE_ID_OFFSET
    for time in range(start, stop + 1, READING_INTERVAL_S):
        reading = {"device_id": device_id, "time": time, "heartrate": round(rng.gauss(120, 20), 2)}
        yield Message(TOPIC_BPM, str(device_id), json.dumps(reading))


def generate(
    users: int = 20, days: int = 2, first_day: date = date(2026, 11, 1), seed: int = 7
) -> list[Message]:
    """All messages of ``users`` users over ``days`` days, the same for the same arguments."""
    rng = random.Random(seed)
    start_epoch = int(datetime.combine(first_day, datetime.min.time(), UTC).timestamp())
    messages = [
        Message(TOPIC_USER_INFO, str(uid), json.dumps(_user_info(rng, uid, start_epoch - 86400)))
        for uid in range(1, users + 1)
    ]
    for day in range(days):
        for user_id in range(1, users + 1):
            workout_id = day * 10 + 1
            messages.extend(_workout_day(rng, user_id, start_epoch + day * 86400, workout_id))
    return messages


def produce(bootstrap_servers: str, messages: list[Message]) -> dict[str, int]:
    """Send ``messages`` with normal producer batching; returns the count per topic."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap_servers.split(","), linger_ms=20)
    counts: dict[str, int] = {}
    try:
        for message in messages:
            key = None if message.key is None else message.key.encode()
            producer.send(message.topic, key=key, value=message.value.encode())
            counts[message.topic] = counts.get(message.topic, 0) + 1
        producer.flush()
    finally:
        producer.close()
    return counts
