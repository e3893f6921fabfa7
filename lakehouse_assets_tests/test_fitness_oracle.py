"""The plain-Python oracle on tiny hand-built batches; expectations computed by hand from the spec.

Epoch seconds used below: 2026-11-01T00:00:00Z is 1_793_491_200 (NOV1).
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

from lakehouse_assets_tests import fitness_oracle as oracle
from lakehouse_tools.sample_data import LandingFile, Message, SampleData

NOV1 = 1_793_491_200
H, M = 3600, 60
REGISTRY_HEADER = "user_id,device_id,mac_address,registration_timestamp"
GYM_HEADER = "mac_address,gym,login,logout"


def info(user_id: int, update_type: str, timestamp: float, **fields: object) -> Message:
    value = {"user_id": user_id, "update_type": update_type, "timestamp": timestamp, **fields}
    return Message("user_info", str(user_id), json.dumps(value))


def action(
    user_id: int, session_id: int, act: str, timestamp: float, workout_id: int = 10
) -> Message:
    value = {
        "user_id": user_id,
        "workout_id": workout_id,
        "session_id": session_id,
        "action": act,
        "timestamp": timestamp,
    }
    return Message("workout", str(user_id), json.dumps(value))


def reading(device_id: int, time: int, heartrate: float | None) -> Message:
    value = {"device_id": device_id, "time": time, "heartrate": heartrate}
    return Message("bpm", str(device_id), json.dumps(value))


def raw(topic: str, text: str) -> Message:
    return Message(topic, None, text)


def landing(source: str, name: str, *lines: str) -> LandingFile:
    header = REGISTRY_HEADER if source == "registered_users" else GYM_HEADER
    return LandingFile(source, name, "\n".join([header, *lines]) + "\n")


def batch(messages: list[Message], files: list[LandingFile] | None = None) -> SampleData:
    return SampleData(messages, files or [])


def at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def test_quarantine_reasons_follow_the_first_failing_rule() -> None:
    messages = [
        raw("user_info", '{"user_id": 1'),
        raw("user_info", "[1, 2]"),
        raw("user_info", '{"update_type": "new", "timestamp": 1}'),
        raw("user_info", '{"user_id": null, "update_type": "new", "timestamp": 1}'),
        raw("user_info", '{"user_id": "abc", "update_type": "bogus"}'),  # user_id is checked first
        raw("user_info", '{"user_id": 3.0, "update_type": "new", "timestamp": 1}'),
        raw("user_info", '{"user_id": true, "update_type": "new", "timestamp": 1}'),
        raw("user_info", '{"user_id": 1, "update_type": "upsert", "timestamp": 5}'),
        raw("user_info", '{"user_id": 1, "update_type": "new", "timestamp": "5"}'),
        raw(
            "user_info", '{"user_id": 1, "update_type": "new", "timestamp": 5, "dob": "1990-01-02"}'
        ),
        raw(
            "user_info", '{"user_id": 1, "update_type": "new", "timestamp": 5, "dob": "02/30/1990"}'
        ),
        raw(
            "user_info", '{"user_id": 1, "update_type": "new", "timestamp": 5.5, "dob": null}'
        ),  # ok
        raw("user_info", '{"user_id": 1, "update_type": "delete", "timestamp": 6}'),  # ok
        raw("workout", '{"user_id": 1, "workout_id": 2, "session_id": 1, "action": "pause"}'),
        raw("workout", '{"user_id": 1, "workout_id": 2, "session_id": 1.0, "action": "start"}'),
        raw("workout", '{"user_id": 1, "session_id": 1, "action": "start", "timestamp": 1}'),
        action(1, 1, "start", 1.5),  # ok: a float timestamp is a number
        raw("bpm", '"just a string"'),
        raw("bpm", '{"device_id": 1001, "time": 10}'),  # ok: an absent heartrate is null
        raw("bpm", '{"device_id": 1001, "time": 10.0, "heartrate": 80}'),
        raw("bpm", '{"device_id": 1001, "time": 10, "heartrate": "80"}'),
        raw("bpm", '{"device_id": 1001, "time": 10, "heartrate": false}'),
        raw("bpm", '{"device_id": 1001, "time": 10, "heartrate": -3}'),  # ok, but not valid
    ]
    files = [
        landing(
            "registered_users",
            "r.csv",
            "1,1001,aa:01,100",  # ok
            "x,1001,aa:01,100",
            "2,,aa:02,100",
            "3,1003,,1e2",
            "4,1004,aa:04,1.5",  # epoch seconds are integers
            "5,1005.0,aa:05,1",  # an id is an integer
            "6,1006,aa:06",  # a short row: the last column is missing
        ),
        landing(
            "gym_logins", "g.csv", "aa,g1,100,200", "aa,g1,9am,200", "aa,,100,200", "aa,g1,100,"
        ),
    ]
    reasons = oracle.quarantine_reasons([batch(messages, files)])
    assert reasons == {
        "user_info": [
            "malformed json",
            "malformed json",
            "missing user_id",
            "missing user_id",
            "wrong type user_id",
            "wrong type user_id",
            "wrong type user_id",
            "unknown update_type",
            "wrong type timestamp",
            "bad dob",
            "bad dob",
        ],
        "workout": ["unknown action", "wrong type session_id", "missing workout_id"],
        "bpm": [
            "malformed json",
            "wrong type time",
            "wrong type heartrate",
            "wrong type heartrate",
        ],
        "registered_users": [
            "wrong type user_id",
            "missing device_id",
            "missing mac_address",
            "wrong type registration_timestamp",
            "wrong type device_id",
            "missing registration_timestamp",
        ],
        "gym_logins": ["wrong type login", "missing gym", "missing logout"],
    }
    assert oracle.quarantine_counts([batch(messages, files)]) == {
        "user_info": 11,
        "workout": 3,
        "bpm": 4,
        "registered_users": 6,
        "gym_logins": 3,
    }
    assert oracle.quarantine_counts([batch([])]) == dict.fromkeys(reasons, 0)


def test_user_profile_newest_event_wins_and_deletes_stick() -> None:
    austin = {"street_address": "1 Main St", "city": "Austin", "state": "TX", "zip": 73301}
    denver = {"street_address": "9 Oak Ave", "city": "Denver", "state": "CO", "zip": 80202}
    boston = {"street_address": "2 Elm St", "city": "Boston", "state": "MA", "zip": 2134}
    newest_of_user_1 = info(
        1, "update", 300.5, dob="03/15/2001", sex="F", gender="female", first_name="Ana",
        last_name="Kim", address=denver,
    )  # fmt: skip
    first = batch(
        [
            info(1, "new", 100, dob="03/15/2001", first_name="Ana", address=austin),
            newest_of_user_1,
            info(1, "update", 200, first_name="Ana", address=boston),  # older, arrives later
            info(2, "new", 100, first_name="Ben"),
            info(2, "delete", 400),
            info(2, "update", 350, first_name="Ben"),  # older than the delete: still deleted
            info(3, "new", 500, first_name="Cy"),
            info(3, "update", 500, first_name="Dee"),  # a tie: the later record wins
            raw(
                "user_info", '{"user_id": 3, "update_type": "update", "timestamp": 900, "dob": "x"}'
            ),
        ]
    )
    second = batch(
        [
            info(2, "new", 100, first_name="Ben"),  # a replay: user 2 stays deleted
            newest_of_user_1,  # an exact duplicate changes nothing
            info(4, "new", 50),  # no dob, no address
        ]
    )
    user_1 = {
        "user_id": 1,
        "dob": date(2001, 3, 15),
        "sex": "F",
        "gender": "female",
        "first_name": "Ana",
        "last_name": "Kim",
        "street_address": "9 Oak Ave",
        "city": "Denver",
        "state": "CO",
        "zip": 80202,
        "updated": datetime(1970, 1, 1, 0, 5, 0, 500_000, tzinfo=UTC),  # 300.5 s
    }
    nothing = dict.fromkeys(["dob", "sex", "gender", "first_name", "last_name"], None)
    nothing.update(dict.fromkeys(["street_address", "city", "state", "zip"], None))
    user_3 = {"user_id": 3, **nothing, "first_name": "Dee", "updated": at(500)}  # 00:08:20
    user_4 = {"user_id": 4, **nothing, "updated": at(50)}
    assert oracle.user_profile([first]) == [user_1, user_3]
    assert oracle.user_profile([first, second]) == [user_1, user_3, user_4]


def test_completed_workouts_pair_start_and_stop_within_three_hours() -> None:
    t = NOV1
    first = batch(
        [
            action(1, 1, "start", t + 1000),
            action(1, 1, "start", t + 1000),  # an exact duplicate
            action(1, 1, "stop", t + 2800),  # 30 min: completed
            action(1, 2, "start", t + 5000),  # no stop: waits
            action(1, 3, "start", t + 10_000),
            action(1, 3, "stop", t + 20_800),  # exactly 3 h: completed
            action(1, 4, "start", t + 30_000),
            action(1, 4, "stop", t + 40_801),  # 3 h 1 s: not completed
            action(1, 5, "stop", t + 50_000),  # the stop arrives first: completed
            action(1, 5, "start", t + 49_000),
            action(1, 6, "start", t + 60_000),
            action(1, 6, "stop", t + 60_000),  # stop == start: not completed
            action(1, 7, "start", t + 70_000),
            action(1, 7, "stop", t + 69_000),  # stop before start: not completed
            action(1, 8, "start", t + 80_000),
            action(1, 8, "stop", t + 91_000),
            action(1, 8, "start", t + 80_500),  # the later record wins: 10 500 s <= 3 h
            action(1, 9, "start", t + 100_000.25),
            action(1, 9, "stop", t + 100_600.75),
            action(2, 1, "start", t + 3000, workout_id=11),
        ]
    )
    second = batch([action(2, 1, "stop", t + 4000, workout_id=11)])

    def row(user_id: int, session_id: int, start: float, end: float, workout_id: int = 10):
        ids = {"user_id": user_id, "workout_id": workout_id, "session_id": session_id}
        return {**ids, "start_time": at(start), "end_time": at(end)}

    user_1 = [
        row(1, 1, t + 1000, t + 2800),
        row(1, 3, t + 10_000, t + 20_800),
        row(1, 5, t + 49_000, t + 50_000),
        row(1, 8, t + 80_500, t + 91_000),
        row(1, 9, t + 100_000.25, t + 100_600.75),
    ]
    assert oracle.completed_workouts([first]) == user_1
    assert oracle.completed_workouts([first, second]) == [
        *user_1,
        row(2, 1, t + 3000, t + 4000, workout_id=11),
    ]
    assert user_1[4]["start_time"].microsecond == 250_000


def test_user_bins_whole_years_lower_bound_inclusive() -> None:
    dobs = {
        1: "03/15/2008",  # 18 on the as-of date itself
        2: "03/16/2008",  # 17: turns 18 tomorrow
        3: "03/15/2001",  # 25
        4: "03/16/2001",  # 24
        5: "01/01/1931",  # 95
        6: "12/31/1931",  # 94
        7: None,
        8: "07/04/1976",  # 49
    }
    messages = [
        info(uid, "new", 10, dob=dob, gender="male", address={"city": "Austin", "state": "TX"})
        for uid, dob in dobs.items()
    ]
    messages += [info(9, "new", 10, dob="01/01/1990"), info(9, "delete", 20)]
    bins = oracle.user_bins([batch(messages)], as_of=date(2026, 3, 15))
    assert [(row["user_id"], row["age"]) for row in bins] == [
        (1, "18-25"),
        (2, "under 18"),
        (3, "25-35"),
        (4, "18-25"),
        (5, "95+"),
        (6, "85-95"),
        (7, "invalid age"),
        (8, "45-55"),
    ]
    assert bins[0] == {
        "user_id": 1,
        "age": "18-25",
        "gender": "male",
        "city": "Austin",
        "state": "TX",
    }


def test_workout_bpm_summary_uses_valid_readings_of_the_users_device_in_the_window() -> None:
    t = NOV1 + 23 * H + 30 * M  # 2026-11-01 23:30 UTC; the first workout ends after midnight
    registry = landing("registered_users", "r1.csv", "1,1001,aa:01,100", "2,1002,aa:02,100")
    stale = landing("registered_users", "r2.csv", "2,2002,aa:02,50")  # in force until 100 only
    profile = {"city": "Austin", "state": "TX", "zip": 73301}
    messages = [
        info(1, "new", 10, dob="03/15/2001", gender="female", address=profile),
        action(1, 1, "start", t, workout_id=20261101),
        action(1, 1, "stop", t + 1800, workout_id=20261101),
        reading(1001, t, 90.0),  # at the start: outside (start_time < time)
        reading(1001, t + 600, 120.5),
        reading(1001, t + 600, 120.5),  # a duplicate reading counts once
        reading(1001, t + 900, None),  # invalid
        reading(1001, t + 1000, 0),  # invalid
        reading(1001, t + 1800, 150),  # at the stop: inside (time <= end_time)
        reading(1001, t + 1801, 100.0),  # after the stop
        action(1, 2, "start", t + 3600, workout_id=20261101),  # only an invalid reading: no row
        action(1, 2, "stop", t + 4000, workout_id=20261101),
        reading(1001, t + 3700, None),
        action(2, 1, "start", t + 600, workout_id=20261101),  # user 2 has no profile
        action(2, 1, "stop", t + 900, workout_id=20261101),
        reading(1002, t + 700, 99.0),
        reading(2002, t + 800, 180.0),  # the device user 2 had until 100: nobody's now
        action(3, 1, "start", t, workout_id=20261101),  # user 3 is not registered: no row
        action(3, 1, "stop", t + 1800, workout_id=20261101),
        reading(1003, t + 10, 130.0),
    ]
    summary = oracle.workout_bpm_summary([batch(messages, [registry, stale])], date(2026, 11, 5))
    assert summary == [
        {
            "user_id": 1,
            "date": date(2026, 11, 1),
            "workout_id": 20261101,
            "session_id": 1,
            "age": "25-35",  # 25 on 2026-11-05
            "gender": "female",
            "city": "Austin",
            "state": "TX",
            "min_bpm": 120.5,
            "avg_bpm": 135.25,  # (120.5 + 150) / 2
            "max_bpm": 150.0,
            "num_recordings": 2,
        },
        {
            "user_id": 2,
            "date": date(2026, 11, 1),
            "workout_id": 20261101,
            "session_id": 1,
            "age": None,
            "gender": None,
            "city": None,
            "state": None,
            "min_bpm": 99.0,
            "avg_bpm": 99.0,
            "max_bpm": 99.0,
            "num_recordings": 1,
        },
    ]


def test_a_reading_and_a_visit_belong_to_whoever_had_the_device_or_phone_then() -> None:
    t = NOV1 + 10 * H
    registry = landing("registered_users", "r1.csv", "1,1001,aa:01,100", "2,1002,aa:02,100")
    moves = landing(
        "registered_users",
        "r2.csv",
        f"1,1011,aa:11,{t + 2000}",  # user 1 moves to a new watch and phone
        f"2,1001,aa:02,{t + 5000}",  # user 2 takes user 1's old watch, keeps the phone
    )
    gym = landing(
        "gym_logins",
        "gym_logins-2026-11-01-1.csv",
        f"aa:01,downtown,{t},{t + 3000}",
        f"aa:11,uptown,{t + 1000},{t + 7000}",
    )
    messages = [
        action(1, 1, "start", t),
        action(1, 1, "stop", t + 1000),
        reading(1001, t + 500, 90.0),  # user 1's watch then
        reading(1011, t + 600, 200.0),  # not registered yet: nobody's
        action(1, 2, "start", t + 1500),  # across the move at t + 2000
        action(1, 2, "stop", t + 2500),
        reading(1001, t + 1800, 100.0),  # before the move: user 1's
        reading(1011, t + 2000, 120.0),  # at the registration: in force
        reading(1001, t + 2200, 110.0),  # left by user 1, not taken yet: nobody's
        reading(1011, t + 2400, 130.0),
        action(2, 1, "start", t + 4500),  # across the hand-over at t + 5000
        action(2, 1, "stop", t + 5500),
        reading(1002, t + 4800, 70.0),  # user 2's until t + 5000
        reading(1001, t + 4900, 150.0),  # nobody's until t + 5000
        reading(1001, t + 5100, 80.0),  # user 2's from t + 5000
        reading(1002, t + 5200, 75.0),  # left by user 2: nobody's
        action(1, 3, "start", t + 5000),
        action(1, 3, "stop", t + 6000),
        reading(1001, t + 5300, 160.0),  # user 2's now (in user 2's workout), not user 1's
        reading(1011, t + 5400, 140.0),
    ]
    batches = [batch(messages, [registry, moves, gym])]
    summary = oracle.workout_bpm_summary(batches, date(2026, 11, 5))
    nobody = {"age": None, "gender": None, "city": None, "state": None}
    day = {"date": date(2026, 11, 1), "workout_id": 10, **nobody}
    assert summary == [
        {"user_id": 1, **day, "session_id": 1, "min_bpm": 90.0, "avg_bpm": 90.0,
         "max_bpm": 90.0, "num_recordings": 1},
        {"user_id": 1, **day, "session_id": 2, "min_bpm": 100.0, "avg_bpm": 350 / 3,
         "max_bpm": 130.0, "num_recordings": 3},
        {"user_id": 1, **day, "session_id": 3, "min_bpm": 140.0, "avg_bpm": 140.0,
         "max_bpm": 140.0, "num_recordings": 1},
        {"user_id": 2, **day, "session_id": 1, "min_bpm": 70.0, "avg_bpm": 310 / 3,
         "max_bpm": 160.0, "num_recordings": 3},  # 70, 80 and 160 (t + 5300, user 2's then)
    ]  # fmt: skip
    # aa:01 was user 1's phone until t + 2000: sessions 1 and 2 started in its visit (1000 s
    # each); aa:11 is user 1's from t + 2000: session 3 (1000 s), not session 2.
    assert oracle.gym_summary(batches) == [
        {"gym": "downtown", "mac_address": "aa:01", "date": date(2026, 11, 1),
         "minutes_in_gym": 50.0, "minutes_exercising": 33.33},
        {"gym": "uptown", "mac_address": "aa:11", "date": date(2026, 11, 1),
         "minutes_in_gym": 100.0, "minutes_exercising": 16.67},
    ]  # fmt: skip


def test_gym_summary_sums_visits_and_counts_each_workout_once() -> None:
    d, next_day = NOV1, NOV1 + 24 * H
    registry = landing("registered_users", "r.csv", "1,1001,aa:01,100", "2,1002,aa:02,100")
    day_file = landing(
        "gym_logins",
        "gym_logins-2026-11-01-1.csv",
        f"aa:01,downtown,{d + 10 * H},{d + 11 * H}",  # A: corrected to 11:15 below
        f"aa:01,downtown,{d + 10 * H + 30 * M},{d + 11 * H + 30 * M}",  # B overlaps A
        f"aa:01,uptown,{next_day + 8 * H},{next_day + 8 * H + 1220}",  # 20 min 20 s
        f"aa:02,downtown,{d + 10 * H},{d + 10 * H + 30 * M}",
        f"aa:02,downtown,{d + 23 * H + 50 * M},{next_day + 20 * M}",  # dated by its login
        f"ff:ff,downtown,{d + 12 * H},{d + 12 * H + 30}",  # nobody's mac
    )
    corrections = landing(
        "gym_logins",
        "gym_logins-2026-11-01-2.csv",
        f"aa:01,downtown,{d + 10 * H},{d + 11 * H + 15 * M}",
        f"aa:01,downtown,{d + 10 * H},{d + 10 * H + 45 * M}",  # smaller: the largest logout wins
    )
    messages = [
        action(1, 1, "start", d + 10 * H + 40 * M),  # inside A and B: 30 min, once
        action(1, 1, "stop", d + 11 * H + 10 * M),
        action(1, 2, "start", d + 11 * H + 20 * M),  # inside B only: 20 min
        action(1, 2, "stop", d + 11 * H + 40 * M),
        action(1, 3, "start", d + 9 * H + 50 * M),  # before any login
        action(1, 3, "stop", d + 10 * H + 20 * M),
        action(1, 4, "start", d + 11 * H + 30 * M),  # at B's logout (inclusive): 80 s
        action(1, 4, "stop", d + 11 * H + 31 * M + 20),
        action(1, 5, "start", d + 10 * H + 50 * M),  # never stopped: not completed
        action(1, 6, "start", next_day + 8 * H + 10 * M),  # in the uptown visit: 30 min
        action(1, 6, "stop", next_day + 8 * H + 40 * M),
        action(2, 1, "start", d + 10 * H + 5 * M),  # aa:02's (also within A, not user 1's)
        action(2, 1, "stop", d + 10 * H + 35 * M),
        action(2, 2, "start", next_day + 5 * M),  # in the visit logged in on Nov 1: 10 min
        action(2, 2, "stop", next_day + 15 * M),
    ]
    summary = oracle.gym_summary([batch(messages, [registry, day_file, corrections])])
    assert summary == [
        {
            "gym": "downtown",
            "mac_address": "aa:01",
            "date": date(2026, 11, 1),
            "minutes_in_gym": 135.0,  # A 75 + B 60
            "minutes_exercising": 51.33,  # 30 + 20 + 1.333...
        },
        {
            "gym": "downtown",
            "mac_address": "aa:02",
            "date": date(2026, 11, 1),
            "minutes_in_gym": 60.0,  # 30 + 30
            "minutes_exercising": 40.0,  # 30 + 10
        },
        {
            "gym": "downtown",
            "mac_address": "ff:ff",
            "date": date(2026, 11, 1),
            "minutes_in_gym": 0.5,
            "minutes_exercising": 0.0,
        },
        {
            "gym": "uptown",
            "mac_address": "aa:01",
            "date": date(2026, 11, 2),
            "minutes_in_gym": 20.33,
            "minutes_exercising": 30.0,
        },
    ]
