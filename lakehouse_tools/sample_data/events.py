"""The sample's Kafka topics: ``user_info``, ``workout`` and ``bpm`` values of the users'
sessions, with duplicates and malformed records."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace
from datetime import date, timedelta

from lakehouse_assets.fitness.names import TOPIC_BPM, TOPIC_USER_INFO, TOPIC_WORKOUT
from lakehouse_tools.sample_data.model import (
    BAD_READING_RATE,
    CITIES,
    DAY_S,
    DEVICE_ID_OFFSET,
    DUPLICATE_RATE,
    FIRST_NAMES,
    GYMS,
    HOUR_S,
    LAST_NAMES,
    MAX_WORKOUT_S,
    MINUTE_S,
    NIGHT_SESSION_ID,
    ODD_WORKOUT_RATE,
    Message,
    Session,
    Value,
    Visit,
    bad_count,
    count_at,
    epoch,
    has_no_dob,
    is_deleted,
    mac_address,
    registered_at,
)


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


def user_events(rng: random.Random, user_id: int, start: int, days: int) -> list[Value]:
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


def _day_plan(rng: random.Random, user_id: int, day: date) -> tuple[list[Session], list[Visit]]:
    """One user's sessions of a day (1 to 3) and gym visits (1 or 2, around some sessions)."""
    day_start, workout_id = epoch(day), int(day.strftime("%Y%m%d"))
    sessions: list[Session] = []
    begin = day_start + rng.randrange(6 * HOUR_S, 8 * HOUR_S)
    for session_id in range(1, rng.choice((1, 1, 2, 2, 3)) + 1):
        end = begin + rng.randrange(20 * MINUTE_S, 75 * MINUTE_S)
        sessions.append(Session(user_id, workout_id, session_id, begin, end, end))
        begin = end + rng.randrange(HOUR_S, 3 * HOUR_S)
    gym, mac = GYMS[user_id % len(GYMS)], mac_address(user_id)
    visits: list[Visit] = []
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


def _odd_workouts(rng: random.Random, sessions: list[Session]) -> list[Session]:
    """Turn a few sessions into a start without stop, a stop > 3 h late, a stop at exactly 3 h."""
    k = count_at(ODD_WORKOUT_RATE, len(sessions) // 3)
    picked = rng.sample(range(len(sessions)), 3 * k)
    odd = sessions[:]
    for n, index in enumerate(picked):
        start = odd[index].start
        stops = (None, start + MAX_WORKOUT_S + rng.randrange(1, HOUR_S), start + MAX_WORKOUT_S)
        odd[index] = replace(odd[index], stop=stops[n // k])
    return odd


def _night_sessions(first_day: date, days: int) -> list[Session]:
    """User 1's workouts from 23:40 to 00:25 the night before this batch and on its last day."""
    nights = (first_day - timedelta(days=1), first_day + timedelta(days=days - 1))
    starts = [(int(n.strftime("%Y%m%d")), epoch(n) + 23 * HOUR_S + 40 * MINUTE_S) for n in nights]
    return [
        Session(1, wid, NIGHT_SESSION_ID, s, s + 45 * MINUTE_S, s + 45 * MINUTE_S)
        for wid, s in starts
    ]


def workout_values(rng: random.Random, sessions: list[Session], window: range) -> list[Value]:
    """Start and stop events that fall in the batch's window, roughly in time order."""
    values = []
    for s in sessions:
        for action, second in (("start", s.start), ("stop", s.stop)):
            if second is not None and second in window:
                ids = {"user_id": s.user_id, "workout_id": s.workout_id, "session_id": s.session_id}
                values.append({**ids, "action": action, "timestamp": second})
    return sorted(values, key=lambda v: v["timestamp"] + rng.uniform(0, 300))  # type: ignore[operator]


def bpm_values(rng: random.Random, sessions: list[Session], window: range) -> list[Value]:
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
    k = count_at(BAD_READING_RATE, len(values) // 2)
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


def topic_messages(
    rng: random.Random, topic: str, values: list[Value], rate: float
) -> list[Message]:
    """The topic's records: ``values``, a few exact duplicates, then malformed records."""
    key_field = KEY_FIELDS[topic]
    messages = [Message(topic, str(v[key_field]), json.dumps(v)) for v in values]
    duplicated = rng.sample(range(len(messages)), count_at(DUPLICATE_RATE, len(messages)))
    for index in sorted(duplicated, reverse=True):
        messages.insert(rng.randint(index + 1, len(messages)), messages[index])
    kinds = [("", DROP), *MALFORMED[topic]]
    for n in range(bad_count(rate, len(kinds), len(values))):
        value = rng.choice(values)
        field, bad = kinds[n % len(kinds)]
        broken = {k: v for k, v in value.items() if k != field}
        if bad is not DROP:
            broken[field] = bad
        text = json.dumps(broken) if field else json.dumps(value)[:-9]  # cut short: not JSON
        messages.insert(rng.randint(0, len(messages)), Message(topic, str(value[key_field]), text))
    return messages


def interleave(rng: random.Random, per_user: list[list[Value]]) -> list[Value]:
    """All users' values in a random interleaving that keeps each user's own order."""
    owners = [index for index, values in enumerate(per_user) for _ in values]
    rng.shuffle(owners)
    iterators = [iter(values) for values in per_user]
    return [next(iterators[index]) for index in owners]


def plan(
    rng: random.Random, users: int, first_day: date, days: int
) -> tuple[list[Session], list[Visit]]:
    """Every user's sessions and gym visits of the batch, plus one guest visit a day."""
    sessions: list[Session] = []
    visits: list[Visit] = []
    for offset in range(days):
        day = first_day + timedelta(days=offset)
        for user_id in range(1, users + 1):
            day_sessions, day_visits = _day_plan(rng, user_id, day)
            sessions += day_sessions
            visits += day_visits
        login = epoch(day) + rng.randrange(7 * HOUR_S, 21 * HOUR_S)  # a mac nobody registered
        guest = mac_address(rng.randrange(10**6, 10**7))
        visits.append((guest, rng.choice(GYMS), login, login + rng.randrange(HOUR_S, 2 * HOUR_S)))
    nights = _night_sessions(first_day, days) if users else []
    return _odd_workouts(rng, sessions) + nights, visits
