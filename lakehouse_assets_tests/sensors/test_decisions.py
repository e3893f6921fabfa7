"""What a stream sensor decides and the reason it gives, on hand-built backlogs."""

from lakehouse_assets.checks.freshness import Waiting
from lakehouse_assets.sensors.streams import (
    Decision,
    lag_decision,
    landing_decision,
    unreported_write,
)
from resources import SensorSettings

NOW = 1_000_000.0
STREAM = "lakehouse-bronze-bpm"
SETTINGS = SensorSettings(lag_threshold=100, lag_max_wait_s=300)


def backlog(count: int, waited_s: float) -> Waiting:
    parts = {"bpm-0": count - count // 2, "bpm-1": count // 2}
    return Waiting(count, NOW - waited_s if count else None, parts)


def test_caught_up_says_so_with_the_lag_per_partition() -> None:
    assert lag_decision(STREAM, backlog(0, 0), SETTINGS, NOW) == Decision(
        False,
        "lakehouse-bronze-bpm is caught up: 0 records waiting (bpm-0: 0, bpm-1: 0), the oldest "
        "for 0 s.",
    )


def test_a_small_lag_waits_and_says_when_it_will_launch() -> None:
    assert lag_decision(STREAM, backlog(7, 40), SETTINGS, NOW) == Decision(
        False,
        "7 records waiting (bpm-0: 4, bpm-1: 3), the oldest for 40 s: within the threshold of "
        "100 records; launching when the oldest has waited 300 s (in 260 s) or more records "
        "arrive.",
    )


def test_the_max_wait_launches_a_small_lag() -> None:
    decision = lag_decision(STREAM, backlog(7, 300), SETTINGS, NOW)
    assert decision.launch and "the max wait of 300 s is reached" in decision.reason


def test_a_lag_above_the_threshold_launches_at_once() -> None:
    assert lag_decision(STREAM, backlog(101, 1), SETTINGS, NOW) == Decision(
        True,
        "101 records waiting (bpm-0: 51, bpm-1: 50), the oldest for 1 s: above the threshold "
        "of 100: launching lakehouse-bronze-bpm.",
    )


def test_a_run_in_progress_holds_the_launch_and_still_reports_the_lag() -> None:
    decision = lag_decision(STREAM, backlog(500, 900), SETTINGS, NOW, busy=["run-1"])
    assert decision == Decision(
        False,
        "A run of lakehouse-bronze-bpm is queued or in progress (run-1); 500 records waiting "
        "(bpm-0: 250, bpm-1: 250), the oldest for 900 s.",
    )


def test_landing_decisions() -> None:
    folder, stream = "landing/gym_logins/", "lakehouse-bronze-gym_logins"
    nothing = Waiting(0, None, {})
    files = Waiting(2, NOW - 12, {"landing/gym_logins": 2})
    assert landing_decision(stream, folder, nothing, NOW) == Decision(
        False,
        "No new files in landing/gym_logins/: lakehouse-bronze-gym_logins has read every file.",
    )
    assert landing_decision(stream, folder, files, NOW) == Decision(
        True,
        "2 new files waiting (landing/gym_logins: 2), the oldest for 12 s: launching "
        "lakehouse-bronze-gym_logins.",
    )
    assert not landing_decision(stream, folder, files, NOW, busy=["run-2"]).launch


def test_a_stream_write_no_materialization_recorded_launches_a_run_to_record_it() -> None:
    history = [
        {"version": 3, "operation": "VACUUM END"},  # maintenance: not the stream's
        {"version": 2, "operation": "OPTIMIZE"},
        {"version": 1, "operation": "STREAMING UPDATE", "operationParameters": {"epochId": "1"}},
        {"version": 0, "operation": "WRITE"},  # the table made empty before any record
    ]
    assert unreported_write(history, "0") == 1  # the run died after committing version 1
    assert unreported_write(history, None) == 1  # nothing was ever recorded
    assert unreported_write(history, "none") == 1
    assert unreported_write(history, "1") is None
    assert unreported_write(history, "3") is None  # recorded after the maintenance
    assert unreported_write(history[:2], None) is None  # no write of the stream
