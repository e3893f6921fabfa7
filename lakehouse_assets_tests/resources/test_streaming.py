"""Starting a stream again when the Connect server gave up waiting for its Python worker (Spark
waits a fixed 10 s for it to connect back, which a loaded machine can exceed), and only then."""

from __future__ import annotations

import pytest
from pyspark.errors.exceptions.connect import SparkException

from resources.streaming import WORKER_START_ATTEMPTS, start_retrying_slow_workers

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


def test_a_worker_that_did_not_connect_back_in_time_is_waited_for_again() -> None:
    start = Start(SparkException(message=WORKER_TIMEOUT), SparkException(message=WORKER_TIMEOUT))
    assert start_retrying_slow_workers(start, "bronze/bpm") == "query"
    assert start.calls == 3


def test_the_last_attempt_s_error_is_raised() -> None:
    assert WORKER_START_ATTEMPTS == 3
    start = Start(*(SparkException(message=WORKER_TIMEOUT) for _ in range(3)))
    with pytest.raises(SparkException, match="failed to connect back"):
        start_retrying_slow_workers(start, "bronze/bpm")
    assert start.calls == 3


def test_any_other_error_is_raised_at_once() -> None:
    start = Start(SparkException(message="[STREAMING_QUERY_ERROR] boom"))
    with pytest.raises(SparkException, match="boom"):
        start_retrying_slow_workers(start, "bronze/bpm")
    assert start.calls == 1
