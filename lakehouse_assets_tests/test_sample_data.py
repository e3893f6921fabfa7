"""The sample-data generator: deterministic, with every feature the pipeline's tests rely on."""

from __future__ import annotations

import csv
import io
import json
from collections import Counter, defaultdict
from datetime import UTC, date, datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from lakehouse_assets_tests import fitness_oracle as oracle
from lakehouse_tools import sample_data
from lakehouse_tools.sample_data import LandingFile, SampleData, generate, write_landing

THREE_HOURS = 3 * 3600


@pytest.fixture(scope="module")
def data() -> SampleData:
    return generate(users=12, days=2, first_day=date(2026, 11, 1), seed=11)


def accepted(data: SampleData, topic: str) -> list[dict[str, Any]]:
    """The topic's values in arrival order, without the malformed ones."""
    return [
        json.loads(m.value)
        for m in data.messages
        if m.topic == topic and oracle.kafka_reason(topic, m.value) is None
    ]


def csv_rows(data: SampleData, source: str) -> list[tuple[str, dict[str, str]]]:
    """(file name, row) of the well-formed rows of the source's files, in file order."""
    return [
        (f.name, row)
        for f in data.files
        if f.source == source
        for row in csv.DictReader(io.StringIO(f.text))
        if oracle.csv_reason(source, row) is None
    ]


def utc_date(seconds: float) -> date:
    return datetime.fromtimestamp(seconds, UTC).date()


def test_the_same_arguments_give_the_same_batch() -> None:
    assert generate(users=4, days=1, seed=5) == generate(users=4, days=1, seed=5)
    assert generate(users=4, days=1, seed=5) != generate(users=4, days=1, seed=6)


def test_the_registry_lists_every_user_with_their_device_and_mac(data: SampleData) -> None:
    rows = csv_rows(data, "registered_users")
    first = [row for name, row in rows if name == "registered_users-2026-11-01-1.csv"]
    assert sorted(int(row["user_id"]) for row in first) == list(range(1, 13))
    assert all(int(row["device_id"]) == int(row["user_id"]) + 1000 for _, row in rows)
    macs = {row["user_id"]: row["mac_address"] for row in first}
    assert len(set(macs.values())) == 12
    # A user registering again, later, in a later file, keeps the device and mac.
    again = [row for name, row in rows if name == "registered_users-2026-11-02-2.csv"]
    assert again
    first_at = {row["user_id"]: int(row["registration_timestamp"]) for row in first}
    for row in again:
        assert row["mac_address"] == macs[row["user_id"]]
        assert int(row["registration_timestamp"]) > first_at[row["user_id"]]


def test_every_user_has_profile_updates_arriving_out_of_order(data: SampleData) -> None:
    arrivals: dict[int, list[float]] = defaultdict(list)
    for event in accepted(data, "user_info"):
        arrivals[event["user_id"]].append(event["timestamp"])
    assert sorted(arrivals) == list(range(1, 13))
    assert all(times != sorted(times) for times in arrivals.values())
    types = Counter(e["update_type"] for e in accepted(data, "user_info"))
    assert types["new"] == 12 and types["update"] >= 24 and types["delete"] >= 1


def test_an_older_update_arrives_after_a_delete(data: SampleData) -> None:
    events = accepted(data, "user_info")
    late_updates = [
        (delete, later)
        for n, delete in enumerate(events)
        if delete["update_type"] == "delete"
        for later in events[n + 1 :]
        if later["user_id"] == delete["user_id"] and later["timestamp"] < delete["timestamp"]
    ]
    assert late_updates


def test_some_users_have_no_dob_and_some_timestamps_have_fractions(data: SampleData) -> None:
    events = accepted(data, "user_info")
    no_dob = {e["user_id"] for e in events if e["update_type"] != "delete" and not e.get("dob")}
    assert no_dob and no_dob < set(range(1, 13))
    assert any(e.get("dob", 0) is None for e in events)  # an explicit null
    assert any("dob" not in e and e["update_type"] != "delete" for e in events)  # absent
    fractions = [e["timestamp"] for e in events if isinstance(e["timestamp"], float)]
    assert any(t != int(t) for t in fractions)


def test_every_topic_has_exact_duplicates(data: SampleData) -> None:
    counts = Counter(data.messages)
    duplicated = {message.topic for message, count in counts.items() if count > 1}
    assert duplicated == {"user_info", "workout", "bpm"}


def sessions(data: SampleData) -> dict[tuple[int, int, int], dict[str, float]]:
    found: dict[tuple[int, int, int], dict[str, float]] = defaultdict(dict)
    for e in accepted(data, "workout"):
        found[(e["user_id"], e["workout_id"], e["session_id"])][e["action"]] = e["timestamp"]
    return found


def test_workouts_have_several_sessions_a_day_and_a_few_odd_ones(data: SampleData) -> None:
    found = sessions(data)
    per_day = Counter((user_id, workout_id) for user_id, workout_id, _ in found)
    assert max(per_day.values()) >= 2
    lengths = [s["stop"] - s["start"] for s in found.values() if {"start", "stop"} <= set(s)]
    assert any(0 < length < THREE_HOURS for length in lengths)
    assert THREE_HOURS in lengths  # the boundary: still a completed workout
    assert any(length > THREE_HOURS for length in lengths)
    assert any(set(s) == {"start"} for s in found.values())
    for (_, workout_id, _), times in found.items():
        if "start" in times:  # a workout id is the day of its start, as yyyymmdd
            assert workout_id == int(utc_date(times["start"]).strftime("%Y%m%d"))


def test_heart_rates_are_realistic_around_workouts_with_a_few_invalid(data: SampleData) -> None:
    readings = accepted(data, "bpm")
    rates = [r["heartrate"] for r in readings if r["heartrate"]]
    assert all(40 <= rate <= 200 for rate in rates)
    assert sum(60 <= rate <= 190 for rate in rates) > 0.95 * len(rates)
    assert any(r["heartrate"] is None for r in readings)
    assert any(r["heartrate"] == 0 for r in readings)
    by_device: dict[int, set[int]] = defaultdict(set)
    values: dict[tuple[int, int], set[str]] = defaultdict(set)
    for r in readings:
        by_device[r["device_id"]].add(r["time"])
        values[(r["device_id"], r["time"])].add(json.dumps(r))
    assert all(len(found) == 1 for found in values.values())  # duplicates are identical
    gaps = [b - a for times in by_device.values() for a, b in pairwise(sorted(times))]
    assert sum(gap <= 15 for gap in gaps) > 0.95 * len(gaps)  # a reading every 5-15 s
    for (user_id, _, _), times in sessions(data).items():
        if {"start", "stop"} <= set(times) and times["stop"] - times["start"] < THREE_HOURS:
            device_times = by_device[user_id + 1000]
            inside = [t for t in device_times if times["start"] < t <= times["stop"]]
            assert len(inside) >= (times["stop"] - times["start"]) / 15
            assert any(t < times["start"] for t in device_times)  # readings around, too
            assert any(t > times["stop"] for t in device_times)


def visits(data: SampleData) -> list[tuple[str, tuple[str, str, int, int]]]:
    return [
        (name, (row["mac_address"], row["gym"], int(row["login"]), int(row["logout"])))
        for name, row in csv_rows(data, "gym_logins")
    ]


def test_gym_visits_overlap_and_a_later_file_corrects_a_logout(data: SampleData) -> None:
    found = visits(data)
    daily = [visit for name, visit in found if name.endswith("-1.csv")]
    per_day = Counter((mac, utc_date(login)) for mac, _, login, _ in daily)
    for user_id in range(1, 13):
        mac = sample_data.mac_address(user_id)
        assert all(per_day[(mac, date(2026, 11, day))] >= 1 for day in (1, 2))
    overlapping = [
        (a, b)
        for a in daily
        for b in daily
        if a[:2] == b[:2] and a[2] < b[2] < a[3] and utc_date(a[2]) == utc_date(b[2])
    ]
    assert overlapping
    names = [name for name, _ in found]
    order = {name: n for n, name in enumerate(dict.fromkeys(names))}
    corrected = [
        (first, later)
        for first_name, first in found
        for later_name, later in found
        if order[later_name] > order[first_name] and later[:3] == first[:3] and later[3] > first[3]
    ]
    assert corrected
    assert sorted(names) == names  # file names sort in the order the files were produced


def test_some_workouts_start_inside_a_visit_and_some_outside(data: SampleData) -> None:
    found = [visit for _, visit in visits(data)]
    inside, outside = 0, 0
    for (user_id, _, _), times in sessions(data).items():
        if "start" in times:
            mac = sample_data.mac_address(user_id)
            within = any(v[0] == mac and v[2] <= times["start"] <= v[3] for v in found)
            inside, outside = inside + within, outside + (not within)
    assert inside and outside


def test_malformed_records_of_each_kind(data: SampleData) -> None:
    reasons = {source: set(found) for source, found in oracle.quarantine_reasons([data]).items()}
    assert reasons == {
        "user_info": {
            "malformed json",
            "missing timestamp",
            "wrong type user_id",  # "abc" and 7.0
            "unknown update_type",
            "bad dob",
        },
        "workout": {
            "malformed json",
            "missing session_id",
            "wrong type workout_id",
            "unknown action",
            "wrong type timestamp",
        },
        "bpm": {
            "malformed json",
            "missing device_id",
            "wrong type device_id",
            "wrong type time",
            "wrong type heartrate",
        },
        "registered_users": {"wrong type user_id", "missing mac_address"},
        "gym_logins": {"wrong type login", "missing logout"},
    }
    user_info = [m.value for m in data.messages if m.topic == "user_info"]
    assert any('"user_id": 7.0' in value for value in user_info)


def test_malformed_records_follow_the_rate() -> None:
    clean = generate(users=5, days=1, malformed_rate=0)
    assert set(oracle.quarantine_counts([clean]).values()) == {0}
    noisy = generate(users=5, days=1, malformed_rate=0.1)
    bpm = sum(m.topic == "bpm" for m in noisy.messages)
    assert oracle.quarantine_counts([noisy])["bpm"] == pytest.approx(bpm * 0.1 / 1.1, rel=0.05)


def test_a_second_batch_continues_the_first() -> None:
    first = generate(users=3, days=2, first_day=date(2026, 11, 1), seed=1)
    second = generate(users=3, days=2, first_day=date(2026, 11, 3), seed=2)
    assert not {f.name for f in first.files} & {f.name for f in second.files}
    assert {e["user_id"] for e in accepted(second, "user_info")} == {1, 2, 3}
    new_days = {utc_date(e["timestamp"]) for e in accepted(second, "workout")}
    assert new_days == {date(2026, 11, 3), date(2026, 11, 4)}
    # User 1's late workout on the first batch's last day stops in the second batch.
    night = (1, 20261102, sample_data.NIGHT_SESSION_ID)
    assert set(sessions(first)[night]) == {"start"}
    assert set(sessions(second)[night]) == {"stop"}
    completed = {
        (w["user_id"], w["workout_id"], w["session_id"])
        for w in oracle.completed_workouts([first, second])
    }
    assert night in completed


def test_write_landing_leaves_whole_files_and_no_temporary_one(tmp_path: Path) -> None:
    files = [
        LandingFile("registered_users", "registered_users-2026-11-01-1.csv", "user_id\n1\n"),
        LandingFile("gym_logins", "gym_logins-2026-11-01-1.csv", "mac_address\naa\n"),
    ]
    write_landing(tmp_path / "lake", files)
    landing = tmp_path / "lake" / "landing"
    for landing_file in files:
        written = landing / landing_file.source / landing_file.name
        assert written.read_text() == landing_file.text
    assert sorted(p.relative_to(landing).as_posix() for p in landing.rglob("*") if p.is_file()) == [
        "gym_logins/gym_logins-2026-11-01-1.csv",
        "registered_users/registered_users-2026-11-01-1.csv",
    ]
