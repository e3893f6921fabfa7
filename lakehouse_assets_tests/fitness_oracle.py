"""The expected fitness tables, computed in plain Python from generated batches (no Spark).

An independent reading of ``docs/fitness_pipeline.md``: it parses the Kafka values and landing CSV
texts itself and shares no code with the pipeline but the ``SampleData`` containers. Batches are
given in production order; within a batch, records count in the order of ``messages`` and files
(the generator keys each user's records alike, so that is also their order within a partition).
JSON and CSV decimals are read exactly; timestamps are compared in whole microseconds, as Spark
stores them, and returned as UTC-aware datetimes; dates are UTC dates.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from fractions import Fraction
from typing import Any

from lakehouse_tools.sample_data import SampleData

Row = dict[str, Any]
Batches = Sequence[SampleData]

INTEGER, NUMBER, TEXT = "integer", "number", "text"
KAFKA_RULES: dict[str, list[tuple[str, str | tuple[str, ...]]]] = {
    "user_info": [
        ("user_id", INTEGER),
        ("update_type", ("new", "update", "delete")),
        ("timestamp", NUMBER),
    ],
    "workout": [
        ("user_id", INTEGER),
        ("workout_id", INTEGER),
        ("session_id", INTEGER),
        ("action", ("start", "stop")),
        ("timestamp", NUMBER),
    ],
    "bpm": [("device_id", INTEGER), ("time", INTEGER)],
}
# Optional fields: absent or null is fine; present with another kind rejects the record.
OPTIONAL_RULES: dict[str, list[tuple[str, str]]] = {
    "user_info": [
        ("dob", TEXT),
        ("sex", TEXT),
        ("gender", TEXT),
        ("first_name", TEXT),
        ("last_name", TEXT),
        ("address.street_address", TEXT),
        ("address.city", TEXT),
        ("address.state", TEXT),
        ("address.zip", INTEGER),
    ],
    "bpm": [("heartrate", NUMBER)],
}
CSV_RULES: dict[str, list[tuple[str, str]]] = {
    "registered_users": [
        ("user_id", INTEGER),
        ("device_id", INTEGER),
        ("mac_address", TEXT),
        ("registration_timestamp", INTEGER),
    ],
    "gym_logins": [("mac_address", TEXT), ("gym", TEXT), ("login", INTEGER), ("logout", INTEGER)],
}
CSV_PATTERNS = {
    INTEGER: re.compile(r"[+-]?\d+"),
    NUMBER: re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?"),
}
DOB_PATTERN = re.compile(r"\d{2}/\d{2}/\d{4}")
MAX_WORKOUT_US = 3 * 3600 * 1_000_000
AGE_BINS = [(18, "under 18"), (25, "18-25"), (35, "25-35"), (45, "35-45"), (55, "45-55")]
AGE_BINS += [(65, "55-65"), (75, "65-75"), (85, "75-85"), (95, "85-95")]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --- Parsing and the quarantine rules ---------------------------------------------------------


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)  # JSON true is no integer


def _is_number(value: object) -> bool:
    return _is_integer(value) or isinstance(value, Decimal)


def _json(value: str) -> Any:
    """JSON with its decimals kept exact (as Spark's variant keeps them), not as binary floats."""
    return json.loads(value, parse_float=Decimal)


def _dob(value: object) -> date | None:
    """A ``MM/dd/yyyy`` date of birth, or None when it is not one."""
    if not isinstance(value, str) or not DOB_PATTERN.fullmatch(value):
        return None
    try:
        return datetime.strptime(value, "%m/%d/%Y").date()
    except ValueError:
        return None


def _json_field_reason(record: dict[str, Any], field: str, kind: str | tuple[str, ...]) -> str:
    value = record.get(field)
    if value is None:  # absent or null
        return f"missing {field}"
    if isinstance(kind, tuple):
        if not isinstance(value, str):
            return f"wrong type {field}"
        return "" if value in kind else f"unknown {field}"
    valid = _is_integer(value) if kind == INTEGER else _is_number(value)
    return "" if valid else f"wrong type {field}"


def kafka_reason(topic: str, value: str | bytes | None) -> str | None:
    """Why a Kafka value of ``topic`` is quarantined, or None when it is accepted."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return "not utf-8"
    if value is None:
        return "malformed json"
    try:
        record = _json(value)
    except ValueError:
        return "malformed json"
    if not isinstance(record, dict):
        return "malformed json"
    for field, kind in KAFKA_RULES[topic]:
        if reason := _json_field_reason(record, field, kind):
            return reason
    for field, kind in OPTIONAL_RULES.get(topic, []):
        value = _optional_value(record, field)
        if value is not None and not _has_kind(value, kind):
            return f"wrong type {field.rsplit('.', 1)[-1]}"
    if topic == "user_info" and record.get("dob") is not None and _dob(record["dob"]) is None:
        return "bad dob"
    return None


def _optional_value(record: dict[str, Any], path: str) -> Any:
    value: Any = record
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _has_kind(value: object, kind: str) -> bool:
    if kind == INTEGER:
        return _is_integer(value)
    if kind == NUMBER:
        return _is_number(value)
    return isinstance(value, str)


def csv_reason(source: str, row: dict[str | None, Any]) -> str | None:
    """Why a landing CSV row of ``source`` is quarantined, or None when it is accepted."""
    for column, kind in CSV_RULES[source]:
        text = row.get(column)
        text = text.strip() if isinstance(text, str) else text
        if text is None or text == "":
            return f"missing {column}"
        if kind in CSV_PATTERNS and not CSV_PATTERNS[kind].fullmatch(text):
            return f"wrong type {column}"
    return None


def _messages(batches: Batches, topic: str) -> Iterator[str]:
    for batch in batches:
        yield from (message.value for message in batch.messages if message.topic == topic)


def _csv_rows(batches: Batches, source: str) -> Iterator[dict[str | None, Any]]:
    for batch in batches:
        for landing_file in batch.files:
            if landing_file.source == source:
                yield from csv.DictReader(io.StringIO(landing_file.text))


def _accepted(batches: Batches, topic: str) -> Iterator[dict[str, Any]]:
    for value in _messages(batches, topic):
        if kafka_reason(topic, value) is None:
            yield _json(value)


def _accepted_rows(batches: Batches, source: str) -> Iterator[dict[str, Any]]:
    """Accepted CSV rows with their numeric columns parsed."""
    for row in _csv_rows(batches, source):
        if csv_reason(source, row) is None:
            yield {column: _csv_value(kind, row[column]) for column, kind in CSV_RULES[source]}


def _csv_value(kind: str, text: str) -> Any:
    if kind == TEXT:
        return text
    return int(text) if CSV_PATTERNS[INTEGER].fullmatch(text) else Decimal(text)


def quarantine_reasons(batches: Batches) -> dict[str, list[str]]:
    """The reason of every quarantined record per source, in production order."""
    reasons: dict[str, list[str]] = {}
    for topic in KAFKA_RULES:
        found = (kafka_reason(topic, value) for value in _messages(batches, topic))
        reasons[topic] = [reason for reason in found if reason is not None]
    for source in CSV_RULES:
        found = (csv_reason(source, row) for row in _csv_rows(batches, source))
        reasons[source] = [reason for reason in found if reason is not None]
    return reasons


def quarantine_counts(batches: Batches) -> dict[str, int]:
    """How many records each source's quarantine table holds."""
    return {source: len(reasons) for source, reasons in quarantine_reasons(batches).items()}


# --- Silver -----------------------------------------------------------------------------------


def _micros(seconds: int | Decimal) -> int:
    """Epoch seconds (exact) as whole microseconds, sub-microsecond digits truncated."""
    return int(seconds * 1_000_000)


def _timestamp(micros: int) -> datetime:
    return EPOCH + timedelta(microseconds=micros)


def users(batches: Batches) -> list[Row]:
    """Silver ``users``: every registration, one per (user id, registration timestamp); of one
    given twice, the later row wins."""
    registrations: dict[tuple[int, int], dict[str, Any]] = {}
    for row in _accepted_rows(batches, "registered_users"):
        registrations[(row["user_id"], _micros(row["registration_timestamp"]))] = row
    return [
        {**row, "registration_timestamp": _timestamp(micros)}
        for (_, micros), row in sorted(registrations.items())
    ]


def holder(batches: Batches, held: str) -> Callable[[Any, int], int | None]:
    """Who held a device (``held`` = ``device_id``) or phone (``mac_address``) at a moment (in
    microseconds): the user of its latest registration at or before then, unless that user
    registered again after it and before then (ties on the timestamp: the higher user id)."""
    registrations = sorted(
        (_micros_of(r["registration_timestamp"]), r["user_id"], r[held]) for r in users(batches)
    )

    def at(value: Any, moment: int) -> int | None:
        past = [(when, user, v) for when, user, v in registrations if when <= moment]
        of_value = [(when, user) for when, user, v in past if v == value]
        if not of_value:
            return None
        when, user = of_value[-1]
        latest_of_user = max(w for w, u, _ in past if u == user)
        return user if latest_of_user == when else None

    return at


def gym_logs(batches: Batches) -> list[Row]:
    """Silver ``gym_logs``: one row per (mac_address, gym, login) with the largest logout."""
    logouts: dict[tuple[str, str, int], int] = {}
    for row in _accepted_rows(batches, "gym_logins"):
        visit = (row["mac_address"], row["gym"], _micros(row["login"]))
        logouts[visit] = max(logouts.get(visit, _micros(row["logout"])), _micros(row["logout"]))
    return [
        {"mac_address": mac, "gym": gym, "login": _timestamp(login), "logout": _timestamp(logout)}
        for (mac, gym, login), logout in sorted(logouts.items())
    ]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _profile_row(event: dict[str, Any]) -> Row:
    address = event.get("address")
    address = address if isinstance(address, dict) else {}
    zip_code = address.get("zip")
    return {
        "user_id": event["user_id"],
        "dob": _dob(event.get("dob")),
        **{
            field: _text(event.get(field)) for field in ("sex", "gender", "first_name", "last_name")
        },
        **{field: _text(address.get(field)) for field in ("street_address", "city", "state")},
        "zip": zip_code if _is_integer(zip_code) else None,
        "updated": _timestamp(_micros(event["timestamp"])),
    }


def user_profile(batches: Batches) -> list[Row]:
    """Silver ``user_profile``: the newest event per user (ties: the later record); no deletes."""
    newest: dict[int, dict[str, Any]] = {}
    for event in _accepted(batches, "user_info"):
        known = newest.get(event["user_id"])
        if known is None or _micros(event["timestamp"]) >= _micros(known["timestamp"]):
            newest[event["user_id"]] = event
    return [
        _profile_row(event)
        for _, event in sorted(newest.items())
        if event["update_type"] != "delete"
    ]


def _completed(batches: Batches) -> list[tuple[int, int, int, int, int]]:
    """(user_id, workout_id, session_id, start, end) of completed workouts, in microseconds."""
    times: dict[tuple[int, int, int, str], int] = {}
    for event in _accepted(batches, "workout"):
        key = (event["user_id"], event["workout_id"], event["session_id"], event["action"])
        times[key] = _micros(event["timestamp"])  # the later record wins
    completed = []
    for (user_id, workout_id, session_id, action), start in sorted(times.items()):
        stop = times.get((user_id, workout_id, session_id, "stop"))
        if action == "start" and stop is not None and start < stop <= start + MAX_WORKOUT_US:
            completed.append((user_id, workout_id, session_id, start, stop))
    return completed


def completed_workouts(batches: Batches) -> list[Row]:
    """Silver ``completed_workouts``: a start and its stop at most 3 hours later."""
    columns = ("user_id", "workout_id", "session_id")
    return [
        {
            **dict(zip(columns, ids, strict=True)),
            "start_time": _timestamp(s),
            "end_time": _timestamp(e),
        }
        for *ids, s, e in _completed(batches)
    ]


def _valid_readings(batches: Batches) -> dict[int, list[tuple[int, float]]]:
    """Per device, the valid (time in microseconds, heartrate) readings of silver ``heart_rate``."""
    heartrates: dict[tuple[int, int], Any] = {}
    for reading in _accepted(batches, "bpm"):
        # A reading is recorded once: its first record (by arrival) stands.
        heartrates.setdefault((reading["device_id"], reading["time"]), reading.get("heartrate"))
    valid: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for (device_id, time), heartrate in sorted(heartrates.items()):
        if heartrate is not None and heartrate > 0:
            valid[device_id].append((_micros(time), float(heartrate)))
    return valid


def age_bin(dob: date | None, as_of: date) -> str:
    """The age bin of whole years from ``dob`` to ``as_of`` (lower bounds inclusive)."""
    if dob is None:
        return "invalid age"
    age = as_of.year - dob.year - ((as_of.month, as_of.day) < (dob.month, dob.day))
    return next((label for upper, label in AGE_BINS if age < upper), "95+")


def user_bins(batches: Batches, as_of: date) -> list[Row]:
    """Silver ``user_bins``: user_id, age (the bin), gender, city, state per profiled user."""
    return [
        {
            "user_id": row["user_id"],
            "age": age_bin(row["dob"], as_of),
            **{field: row[field] for field in ("gender", "city", "state")},
        }
        for row in user_profile(batches)
    ]


# --- Gold -------------------------------------------------------------------------------------


def workout_bpm_summary(batches: Batches, as_of: date) -> list[Row]:
    """Gold ``workout_bpm_summary``: per completed workout with valid readings in its window."""
    owner = holder(batches, "device_id")
    bins = {row["user_id"]: row for row in user_bins(batches, as_of)}
    readings_of: dict[int | None, list[tuple[int, float]]] = defaultdict(list)
    for device_id, device_readings in _valid_readings(batches).items():
        for time, heartrate in device_readings:  # each reading is its device's holder's then
            readings_of[owner(device_id, time)].append((time, heartrate))
    rows = []
    for user_id, workout_id, session_id, start, end in _completed(batches):
        bpm = [heartrate for time, heartrate in readings_of[user_id] if start < time <= end]
        if not bpm:
            continue
        profile = bins.get(user_id, {})
        rows.append(
            {
                "user_id": user_id,
                "date": _timestamp(start).date(),
                "workout_id": workout_id,
                "session_id": session_id,
                **{field: profile.get(field) for field in ("age", "gender", "city", "state")},
                "min_bpm": min(bpm),
                "avg_bpm": sum(bpm) / len(bpm),
                "max_bpm": max(bpm),
                "num_recordings": len(bpm),
            }
        )
    return sorted(rows, key=lambda r: (r["date"], r["user_id"], r["workout_id"], r["session_id"]))


def _minutes(micros: int) -> float:
    """Microseconds as minutes rounded half up (away from zero) to 2 decimals, like Spark."""
    scaled = math.floor(abs(Fraction(micros, 60_000_000)) * 100 + Fraction(1, 2))
    return math.copysign(scaled / 100, micros)


def gym_summary(batches: Batches) -> list[Row]:
    """Gold ``gym_summary``: per (gym, mac_address, date) minutes in the gym and exercising."""
    owner = holder(batches, "mac_address")
    workouts = _completed(batches)
    visits: dict[tuple[str, str, date], list[tuple[int, int]]] = defaultdict(list)
    for log in gym_logs(batches):
        login, logout = _micros_of(log["login"]), _micros_of(log["logout"])
        visits[(log["gym"], log["mac_address"], log["login"].date())].append((login, logout))
    rows = []
    for (gym, mac, day), day_visits in visits.items():
        exercising = {  # each workout once, even when the visits overlap
            w[:3]: w[4] - w[3]
            for w in workouts
            if any(login <= w[3] <= logout for login, logout in day_visits)
            and owner(mac, w[3]) == w[0]  # the mac was the workout's user's phone at its start
        }
        rows.append(
            {
                "gym": gym,
                "mac_address": mac,
                "date": day,
                "minutes_in_gym": _minutes(sum(out - into for into, out in day_visits)),
                "minutes_exercising": _minutes(sum(exercising.values())),
            }
        )
    return sorted(rows, key=lambda r: (r["date"], r["gym"], r["mac_address"]))


def _micros_of(moment: datetime) -> int:
    return (moment - EPOCH) // timedelta(microseconds=1)
