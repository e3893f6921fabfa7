"""A deterministic generator of the fitness company's sources (seeded; scales by users and days).

It follows the source contract of issue 3 and ``docs/fitness_pipeline.md``: Kafka topics
``user_info``, ``workout`` and ``bpm`` (JSON values), and landing CSV files ``registered_users`` and
``gym_logins``. Per-user facts (device, mac address, home gym, registration, base profile, whether
the user is deleted or has no date of birth) depend on the user id only, so a second call with a
later ``first_day`` and another seed is a consistent second batch for the same users.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from lakehouse_assets.constants import (
    LANDING_COLUMNS,
    LANDING_DIR,
    LANDING_GYM_LOGINS,
    LANDING_REGISTERED_USERS,
    TOPIC_BPM,
    TOPIC_USER_INFO,
    TOPIC_WORKOUT,
)

DEVICE_ID_OFFSET = 1000  # a user's device id is user id + this offset
MINUTE_S, HOUR_S, DAY_S = 60, 3600, 86_400
MAX_WORKOUT_S = 3 * HOUR_S  # a stop later than this after its start completes no workout
REGISTRY_EPOCH = 1_704_067_200  # 2024-01-01 UTC: registrations are stable, whatever the batch
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
_Visit = tuple[str, str, int, int]  # mac_address, gym, login, logout


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
class _Session:
    user_id: int
    workout_id: int
    session_id: int
    start: int
    end: int  # end of the exercise (heart-rate readings follow it)
    stop: int | None  # the stop event; None when it is never sent


def _epoch(day: date) -> int:
    return int(datetime.combine(day, datetime.min.time(), UTC).timestamp())


def _count(rate: float, population: int) -> int:
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


def _base_profile(user_id: int) -> Value:
    stable = random.Random(user_id)
    # No February 29: age conventions differ on that birthday.
    born = date(stable.randrange(1928, 2012), stable.randrange(1, 13), stable.randrange(1, 29))
    sex = stable.choice(["M", "F"])
    city, state = stable.choice(CITIES)
    return {
        "user_id": user_id,
        "dob": None if has_no_dob(user_id) else born.strftime("%m/%d/%Y"),
        "sex": sex,
        "gender": "non-binary" if stable.random() < 0.05 else {"M": "male", "F": "female"}[sex],
        "first_name": stable.choice(FIRST_NAMES),
        "last_name": stable.choice(LAST_NAMES),
        "address": {
            "street_address": f"{stable.randrange(1, 999)} Main St",
            "city": city,
            "state": state,
            "zip": stable.randrange(10000, 99999),
        },
    }


def _update(rng: random.Random, base: Value, timestamp: float) -> Value:
    """A full profile with one change (a move or a new last name), sent as an ``update``."""
    event: Value = {"user_id": base["user_id"], "update_type": "update", "timestamp": timestamp}
    event.update(base)
    if rng.random() < 0.5:
        city, state = rng.choice(CITIES)
        street = f"{rng.randrange(1, 999)} {rng.choice(['Oak', 'Pine', 'Elm'])} Ave"
        address = {"street_address": street, "city": city, "state": state}
        event["address"] = {**address, "zip": rng.randrange(10000, 99999)}
    else:
        event["last_name"] = rng.choice(LAST_NAMES)
    if event["dob"] is None and rng.random() < 0.5:
        del event["dob"]  # an absent dob is as null as an explicit null
    return event


def _user_events(rng: random.Random, user_id: int, start: int, days: int) -> list[Value]:
    """A user's ``user_info`` values in arrival order: shuffled relative to their timestamps."""
    base = _base_profile(user_id)
    end = start + days * DAY_S
    new: Value = {"user_id": user_id, "update_type": "new", "timestamp": registered_at(user_id)}
    events = [{**new, **base}]  # the same in every batch: a replay after the first
    for second in sorted(rng.sample(range(start, end - HOUR_S), rng.randint(2, 4))):
        fraction = round(rng.random(), 3) if rng.random() < 0.3 else 0
        events.append(_update(rng, base, second + fraction))
    arrival = events[:]
    rng.shuffle(arrival)
    if arrival == events:  # every user gets at least one out-of-order pair
        arrival[-2], arrival[-1] = arrival[-1], arrival[-2]
    if is_deleted(user_id):
        deleted_at = end - rng.randrange(MINUTE_S, 30 * MINUTE_S)
        delete: Value = {"user_id": user_id, "update_type": "delete", "timestamp": deleted_at}
        late = _update(rng, base, deleted_at - rng.randrange(MINUTE_S, 10 * MINUTE_S))
        arrival += [delete, late]  # an older update arriving after the delete: still deleted
    return arrival


def _day_plan(rng: random.Random, user_id: int, day: date) -> tuple[list[_Session], list[_Visit]]:
    """One user's sessions of a day (1 to 3) and gym visits (1 or 2, around some sessions)."""
    day_start, workout_id = _epoch(day), int(day.strftime("%Y%m%d"))
    sessions: list[_Session] = []
    begin = day_start + rng.randrange(6 * HOUR_S, 8 * HOUR_S)
    for session_id in range(1, rng.choice((1, 1, 2, 2, 3)) + 1):
        end = begin + rng.randrange(20 * MINUTE_S, 75 * MINUTE_S)
        sessions.append(_Session(user_id, workout_id, session_id, begin, end, end))
        begin = end + rng.randrange(HOUR_S, 3 * HOUR_S)
    gym, mac = GYMS[user_id % len(GYMS)], mac_address(user_id)
    visits: list[_Visit] = []
    for session in sessions:
        if len(visits) < 2 and rng.random() < 0.6:
            early = rng.random() < 0.9  # else the badge is read after the workout started
            login = session.start + (-1 if early else 1) * rng.randrange(MINUTE_S, 20 * MINUTE_S)
            logout = session.end + rng.randrange(2 * MINUTE_S, 20 * MINUTE_S)
            visits.append((mac, gym, login, logout))
    if not visits:
        login = day_start + rng.randrange(7 * HOUR_S, 21 * HOUR_S)
        visits.append((mac, gym, login, login + rng.randrange(30 * MINUTE_S, 90 * MINUTE_S)))
    return sessions, visits


def _odd_workouts(rng: random.Random, sessions: list[_Session]) -> list[_Session]:
    """Turn a few sessions into a start without stop, a stop > 3 h late, a stop at exactly 3 h."""
    k = _count(ODD_WORKOUT_RATE, len(sessions) // 3)
    picked = rng.sample(range(len(sessions)), 3 * k)
    odd = sessions[:]
    for n, index in enumerate(picked):
        start = odd[index].start
        stops = (None, start + MAX_WORKOUT_S + rng.randrange(1, HOUR_S), start + MAX_WORKOUT_S)
        odd[index] = replace(odd[index], stop=stops[n // k])
    return odd


def _night_sessions(first_day: date, days: int) -> list[_Session]:
    """User 1's workouts from 23:40 to 00:25 the night before this batch and on its last day."""
    nights = (first_day - timedelta(days=1), first_day + timedelta(days=days - 1))
    starts = [(int(n.strftime("%Y%m%d")), _epoch(n) + 23 * HOUR_S + 40 * MINUTE_S) for n in nights]
    return [
        _Session(1, wid, NIGHT_SESSION_ID, s, s + 45 * MINUTE_S, s + 45 * MINUTE_S)
        for wid, s in starts
    ]


def _workout_values(rng: random.Random, sessions: list[_Session], window: range) -> list[Value]:
    """Start and stop events that fall in the batch's window, roughly in time order."""
    values = []
    for s in sessions:
        for action, second in (("start", s.start), ("stop", s.stop)):
            if second is not None and second in window:
                ids = {"user_id": s.user_id, "workout_id": s.workout_id, "session_id": s.session_id}
                values.append({**ids, "action": action, "timestamp": second})
    return sorted(values, key=lambda v: v["timestamp"] + rng.uniform(0, 300))  # type: ignore[operator]


def _bpm_values(rng: random.Random, sessions: list[_Session], window: range) -> list[Value]:
    """Readings every 5-15 s from a few minutes before each session to a few minutes after."""
    values: list[Value] = []
    for s in sessions:
        rest, peak = 60 + s.user_id % 15, rng.uniform(125, 175)
        grid = {s.start, s.end}  # a reading at the very start and stop
        t, last = s.start - rng.randrange(120, 300), s.end + rng.randrange(120, 300)
        while t <= last:
            grid.add(t)
            t += rng.randrange(5, 16)
        for t in sorted(t for t in grid if t in window):
            if s.start < t <= s.end:
                level = rest + (peak - rest) * min(1.0, (t - s.start) / 300)
            else:
                level = rest + (peak - rest) * math.exp(-max(0, t - s.end) / 120)
            heartrate = round(min(200.0, max(40.0, rng.gauss(level, 4))), 1)
            values.append(
                {"device_id": s.user_id + DEVICE_ID_OFFSET, "time": t, "heartrate": heartrate}
            )
    k = _count(BAD_READING_RATE, len(values) // 2)
    for n, index in enumerate(rng.sample(range(len(values)), 2 * k)):
        values[index]["heartrate"] = None if n < k else 0
    return sorted(values, key=lambda v: v["time"] + rng.uniform(0, 30))  # type: ignore[operator]


DROP = object()  # a malformed-record kind that leaves the field out
MALFORMED: dict[str, list[tuple[str, object]]] = {  # besides a value cut short (not JSON)
    TOPIC_USER_INFO: [
        ("timestamp", DROP),
        ("user_id", "abc"),
        ("user_id", 7.0),  # an integer field takes JSON integers only
        ("update_type", "upsert"),
        ("dob", "1990-04-12"),
    ],
    TOPIC_WORKOUT: [
        ("session_id", DROP),
        ("workout_id", "abc"),
        ("action", "pause"),
        ("timestamp", "yesterday"),
    ],
    TOPIC_BPM: [("device_id", DROP), ("device_id", True), ("time", "12:00"), ("heartrate", "fast")],
}
KEY_FIELDS = {TOPIC_USER_INFO: "user_id", TOPIC_WORKOUT: "user_id", TOPIC_BPM: "device_id"}


def _topic_messages(
    rng: random.Random, topic: str, values: list[Value], rate: float
) -> list[Message]:
    """The topic's records: ``values``, a few exact duplicates, then malformed records."""
    key_field = KEY_FIELDS[topic]
    messages = [Message(topic, str(v[key_field]), json.dumps(v)) for v in values]
    duplicated = rng.sample(range(len(messages)), _count(DUPLICATE_RATE, len(messages)))
    for index in sorted(duplicated, reverse=True):
        messages.insert(rng.randint(index + 1, len(messages)), messages[index])
    kinds = [("", DROP), *MALFORMED[topic]]
    for n in range(_bad_count(rate, len(kinds), len(values))):
        value = rng.choice(values)
        field, bad = kinds[n % len(kinds)]
        broken = {k: v for k, v in value.items() if k != field}
        if bad is not DROP:
            broken[field] = bad
        text = json.dumps(broken) if field else json.dumps(value)[:-9]  # cut short: not JSON
        messages.insert(rng.randint(0, len(messages)), Message(topic, str(value[key_field]), text))
    return messages


def _bad_count(rate: float, kinds: int, population: int) -> int:
    """Malformed records at ``rate``: none at rate 0, else at least one of each kind."""
    return 0 if rate <= 0 else max(kinds, math.ceil(rate * population))


def _csv_text(header: Sequence[str], rows: list[list[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def _with_bad_rows(
    rng: random.Random, rows: list[list[object]], kinds: list[tuple[int, str]], rate: float
) -> list[list[object]]:
    """``rows`` with malformed copies inserted: each kind sets one column to a bad value."""
    out = rows[:]
    for n in range(_bad_count(rate, len(kinds), len(rows))):
        column, bad = kinds[n % len(kinds)]
        row = rng.choice(rows)[:]
        row[column] = bad
        out.insert(rng.randint(0, len(out)), row)
    return out


def _landing(source: str, stamp: str, rows: list[list[object]]) -> LandingFile:
    return LandingFile(source, f"{source}-{stamp}.csv", _csv_text(LANDING_COLUMNS[source], rows))


def _registration_files(
    rng: random.Random, users: int, first_day: date, days: int, rate: float
) -> list[LandingFile]:
    """The registry snapshot on the first day; a few users registering again on the last day."""

    def row(user_id: int, at: int) -> list[object]:
        return [user_id, user_id + DEVICE_ID_OFFSET, mac_address(user_id), at]

    last_day = first_day + timedelta(days=days - 1)
    snapshot = [row(uid, registered_at(uid)) for uid in range(1, users + 1)]
    again_ids = sorted(rng.sample(range(1, users + 1), _count(REREGISTRATION_RATE, users)))
    again = [row(uid, _epoch(last_day) + rng.randrange(DAY_S)) for uid in again_ids]
    bad_kinds = [(0, "u-17"), (2, "")]  # a non-numeric user id, a missing mac address
    return [
        _landing(
            LANDING_REGISTERED_USERS,
            f"{first_day}-1",
            _with_bad_rows(rng, snapshot, bad_kinds, rate),
        ),
        _landing(LANDING_REGISTERED_USERS, f"{last_day}-2", again),
    ]


def _gym_files(
    rng: random.Random, visits: list[_Visit], first_day: date, days: int, rate: float
) -> list[LandingFile]:
    """One file per day, some visits logged in twice; corrected logouts in a later file."""
    twins = []
    for mac, gym, login, logout in rng.sample(visits, _count(OVERLAP_RATE, len(visits))):
        second = login + rng.randrange(5 * MINUTE_S, 30 * MINUTE_S)
        later = logout + rng.randrange(-5 * MINUTE_S, 20 * MINUTE_S)
        twins.append((mac, gym, second, max(second + 5 * MINUTE_S, later)))
    corrected = [
        [mac, gym, login, logout + rng.randrange(5 * MINUTE_S, 45 * MINUTE_S)]
        for mac, gym, login, logout in rng.sample(visits, _count(CORRECTION_RATE, len(visits)))
    ]
    by_day: dict[date, list[list[object]]] = {}
    for visit in sorted(visits + twins, key=lambda v: v[2]):
        by_day.setdefault(datetime.fromtimestamp(visit[2], UTC).date(), []).append(list(visit))
    bad_kinds = [(2, "09:15"), (3, "")]  # a non-numeric login, a missing logout
    last_day = first_day + timedelta(days=days - 1)
    files = [
        _landing(LANDING_GYM_LOGINS, f"{day}-1", _with_bad_rows(rng, rows, bad_kinds, rate))
        for day, rows in sorted(by_day.items())
    ]
    return [*files, _landing(LANDING_GYM_LOGINS, f"{last_day}-2", corrected)]


def _interleave(rng: random.Random, per_user: list[list[Value]]) -> list[Value]:
    """All users' values in a random interleaving that keeps each user's own order."""
    owners = [index for index, values in enumerate(per_user) for _ in values]
    rng.shuffle(owners)
    iterators = [iter(values) for values in per_user]
    return [next(iterators[index]) for index in owners]


def _plan(
    rng: random.Random, users: int, first_day: date, days: int
) -> tuple[list[_Session], list[_Visit]]:
    """Every user's sessions and gym visits of the batch, plus one guest visit a day."""
    sessions: list[_Session] = []
    visits: list[_Visit] = []
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        for user_id in range(1, users + 1):
            day_sessions, day_visits = _day_plan(rng, user_id, day)
            sessions += day_sessions
            visits += day_visits
        login = _epoch(day) + rng.randrange(7 * HOUR_S, 21 * HOUR_S)  # a mac nobody registered
        guest = mac_address(rng.randrange(10**6, 10**7))
        visits.append((guest, rng.choice(GYMS), login, login + rng.randrange(HOUR_S, 2 * HOUR_S)))
    nights = _night_sessions(first_day, days) if users else []
    return _odd_workouts(rng, sessions) + nights, visits


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
    sessions, visits = _plan(rng, users, first_day, days)
    start = _epoch(first_day)
    window = range(start, start + days * DAY_S)
    per_user = [_user_events(rng, user_id, start, days) for user_id in range(1, users + 1)]
    values = {
        TOPIC_USER_INFO: _interleave(rng, per_user),
        TOPIC_WORKOUT: _workout_values(rng, sessions, window),
        TOPIC_BPM: _bpm_values(rng, sessions, window),
    }
    messages = [
        message
        for topic, topic_values in values.items()
        for message in _topic_messages(rng, topic, topic_values, malformed_rate)
    ]
    files = _registration_files(rng, users, first_day, days, malformed_rate)
    return SampleData(messages, files + _gym_files(rng, visits, first_day, days, malformed_rate))


def write_landing(root: str | Path, files: list[LandingFile]) -> None:
    """Write each file to ``<root>/landing/<source>/<name>``, atomically.

    The text goes to a hidden temporary file in the same folder first (Spark's file source skips
    names starting with "."), then is renamed to its final name, so a reader never sees half a file.
    """
    for landing_file in files:
        folder = Path(root) / LANDING_DIR / landing_file.source
        folder.mkdir(parents=True, exist_ok=True)
        temporary = folder / f".{landing_file.name}.tmp"
        temporary.write_text(landing_file.text, encoding="utf-8")
        os.replace(temporary, folder / landing_file.name)


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
