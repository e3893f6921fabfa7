"""The sample's vocabulary: its records and files, its rates and constants, and the per-user facts
that depend on the user id only (the same in every batch)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime

DEVICE_ID_OFFSET = 1000  # a user's device id is user id + this offset
MINUTE_S, HOUR_S, DAY_S = 60, 3600, 86_400
MAX_WORKOUT_S = 3 * HOUR_S  # a stop later than this after its start completes no workout
REGISTRY_EPOCH = 946_684_800  # 2000-01-01 UTC: registrations are stable, whatever the batch,
# and before the sample's days (a reading before its device's registration is nobody's)
NIGHT_SESSION_ID = 9  # user 1's late workout on a batch's last day; its stop is in the next batch
GYMS = ("downtown", "riverside", "uptown")
CITIES = [("Austin", "TX"), ("Denver", "CO"), ("Portland", "OR"), ("Boston", "MA"), ("Miami", "FL")]
FIRST_NAMES = ["Ana", "Ben", "Chen", "Dana", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo"]
LAST_NAMES = ["Smith", "Garcia", "Kim", "Okafor", "Novak", "Silva", "Berg", "Rossi"]
DUPLICATE_RATE = 0.01  # exact duplicate Kafka records, per topic
ODD_WORKOUT_RATE = 0.03  # per kind: a start without stop, a stop > 3 h late, a stop at exactly 3 h
BAD_READING_RATE = 0.005  # per kind: null heartrate, heartrate 0
OVERLAP_RATE = CORRECTION_RATE = REREGISTRATION_RATE = 0.05

Value = dict[str, object]
Visit = tuple[str, str, int, int]  # mac_address, gym, login, logout


@dataclass(frozen=True)
class Message:
    """One Kafka record to produce."""

    topic: str
    key: str | bytes | None
    value: str | bytes | None  # text is sent as UTF-8
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class LandingFile:
    """One CSV file (with its header line) for ``<root>/landing/<source>/<name>``."""

    source: str
    name: str
    text: str


@dataclass(frozen=True)
class SampleData:
    """One batch of the sources: the Kafka records in production order and the landing files."""

    messages: list[Message]
    files: list[LandingFile]


@dataclass(frozen=True)
class Session:
    user_id: int
    workout_id: int
    session_id: int
    start: int
    end: int  # end of the exercise (heart-rate readings follow it)
    stop: int | None  # the stop event; None when it is never sent


def epoch(day: date) -> int:
    return int(datetime.combine(day, datetime.min.time(), UTC).timestamp())


def count_at(rate: float, population: int) -> int:
    """How many of ``population`` to pick at ``rate``: at least one when the rate is positive."""
    return 0 if rate <= 0 or population == 0 else min(population, max(1, round(rate * population)))


def mac_address(user_id: int) -> str:
    """The mac address of a user's phone (stable: derived from the user id)."""
    return "a2:4e:" + ":".join(f"{byte:02x}" for byte in user_id.to_bytes(4, "big"))


def registered_at(user_id: int) -> int:
    """The epoch second a user first registered (stable: derived from the user id)."""
    return REGISTRY_EPOCH + user_id * 5413


def is_deleted(user_id: int) -> bool:
    """Whether the user deletes their profile at the end of every batch."""
    return user_id % 9 == 2


def has_no_dob(user_id: int) -> bool:
    """Whether the user never gives a date of birth (their age bin is ``invalid age``)."""
    return user_id % 7 == 3


def bad_count(rate: float, kinds: int, population: int) -> int:
    """Malformed records at ``rate``: none at rate 0, else at least one of each kind."""
    return 0 if rate <= 0 else max(kinds, math.ceil(rate * population))
