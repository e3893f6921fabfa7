"""A deterministic generator of the fitness company's sources (seeded; scales by users and days).

It follows the source contract of issue 3 and ``docs/fitness_pipeline.md``: Kafka topics
``user_info``, ``workout`` and ``bpm`` (JSON values), and landing CSV files ``registered_users`` and
``gym_logins``. Per-user facts (device, mac address, home gym, registration, base profile, whether
the user is deleted or has no date of birth) depend on the user id only, so a second call with a
later ``first_day`` and another seed is a consistent second batch for the same users.
"""

from __future__ import annotations

import random
from datetime import date

from lakehouse_assets.fitness.names import TOPIC_BPM, TOPIC_USER_INFO, TOPIC_WORKOUT
from lakehouse_tools.sample_data.delivery import produce
from lakehouse_tools.sample_data.events import (
    bpm_values,
    interleave,
    plan,
    topic_messages,
    user_events,
    workout_values,
)
from lakehouse_tools.sample_data.landing import gym_files, registration_files, write_landing
from lakehouse_tools.sample_data.model import (
    DAY_S,
    DEVICE_ID_OFFSET,
    NIGHT_SESSION_ID,
    LandingFile,
    Message,
    SampleData,
    epoch,
    mac_address,
)

__all__ = [
    "DEVICE_ID_OFFSET",
    "NIGHT_SESSION_ID",
    "LandingFile",
    "Message",
    "SampleData",
    "generate",
    "mac_address",
    "produce",
    "write_landing",
]


def generate(
    users: int = 20,
    days: int = 2,
    first_day: date = date(2026, 11, 1),
    seed: int = 7,
    malformed_rate: float = 0.01,
) -> SampleData:
    """One batch of all five sources; the same for the same arguments.

    Args:
        users: users 1..``users`` (a second batch names the same users).
        days: days of activity, from ``first_day``.
        first_day: the first UTC day; a later batch starts at ``first_day + days``.
        seed: the seed of every random choice but the per-user facts.
        malformed_rate: malformed records per valid record of each topic and landing file (at
            least one of each kind when positive).

    Returns:
        The Kafka records in production order and the landing files, named by day.
    """
    rng = random.Random(seed)
    sessions, visits = plan(rng, users, first_day, days)
    start = epoch(first_day)
    window = range(start, start + days * DAY_S)
    per_user = [user_events(rng, user_id, start, days) for user_id in range(1, users + 1)]
    values = {
        TOPIC_USER_INFO: interleave(rng, per_user),
        TOPIC_WORKOUT: workout_values(rng, sessions, window),
        TOPIC_BPM: bpm_values(rng, sessions, window),
    }
    messages = [
        message
        for topic, topic_values in values.items()
        for message in topic_messages(rng, topic, topic_values, malformed_rate)
    ]
    files = registration_files(rng, users, first_day, days, malformed_rate)
    return SampleData(messages, files + gym_files(rng, visits, first_day, days, malformed_rate))
