"""Starting a stream again when the Connect server gave up waiting for its Python worker (Spark
waits a fixed 10 s for it to connect back, which a loaded machine can exceed), and only then."""

from __future__ import annotations

import pytest
from pyspark.errors.exceptions.connect import SparkException

from resources.streaming import start_retrying_slow_workers

WORKER_TIMEOUT = "[INTERNAL] Python worker failed to connect back."  # as the server reports it


class Start:
    """A query's ``start`` that fails with the given errors, one per call, then returns "query"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "query"


def timeouts(n: int) -> list[Exception]:
    return [SparkException(message=WORKER_TIMEOUT) for _ in range(n)]


def test_a_worker_that_did_not_connect_back_in_time_is_waited_for_then_started_again() -> None:
    start, waits = Start(*timeouts(2)), []
    assert start_retrying_slow_workers(start, "bronze/bpm", sleep=waits.append) == "query"
    assert (start.calls, waits) == (3, [10.0, 30.0])


def test_after_three_timeouts_the_third_is_raised() -> None:
    start, waits = Start(*timeouts(3)), []
    with pytest.raises(SparkException, match="failed to connect back"):
        start_retrying_slow_workers(start, "bronze/bpm", sleep=waits.append)
    assert (start.calls, waits) == (3, [10.0, 30.0])


def test_any_other_error_is_raised_at_once() -> None:
    start, waits = Start(SparkException(message="[STREAMING_QUERY_ERROR] boom")), []
    with pytest.raises(SparkException, match="boom"):
        start_retrying_slow_workers(start, "bronze/bpm", sleep=waits.append)
    assert (start.calls, waits) == (1, [])
