"""The threaded executor: independent steps at once, each after its upstream, bounded, and a
failure handled as Dagster's in-process executor handles it."""

import threading
import time

import dagster as dg
import pytest

from lakehouse_assets.executor import materialize
from resources.settings import ENV_MAX_CONCURRENT_STEPS, max_concurrent_steps

WAIT_S = 20.0  # far longer than a step of these tests takes


def test_independent_steps_run_at_once_and_a_downstream_step_after_them() -> None:
    # a lets b end and waits for b's signal: one step at a time would wait forever
    order: list[str] = []
    a_ends, b_ends = threading.Event(), threading.Event()

    @dg.asset
    def a() -> None:
        order.append("a started")
        b_ends.set()
        assert a_ends.wait(WAIT_S), "b never ran beside a"
        order.append("a ended")

    @dg.asset
    def b() -> None:
        assert b_ends.wait(WAIT_S)
        order.append("b ran")
        a_ends.set()

    @dg.asset(deps=[a, b])
    def c() -> None:
        order.append("c")

    result = materialize([a, b, c], dg.AssetSelection.all(), {}, dg.DagsterInstance.ephemeral())
    assert result.success
    assert order == ["a started", "b ran", "a ended", "c"]
    materialized = {event.asset_key for event in result.get_asset_materialization_events()}
    assert materialized == {dg.AssetKey("a"), dg.AssetKey("b"), dg.AssetKey("c")}


def test_at_most_max_concurrent_steps_run_at_once() -> None:
    running, most = [0], [0]
    lock = threading.Lock()

    def step(name: str) -> dg.AssetsDefinition:
        @dg.asset(name=name)
        def _step() -> None:
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.2)
            with lock:
                running[0] -= 1

        return _step

    assets = [step(f"s{index}") for index in range(5)]
    for limit in (1, 2):
        most[0] = 0
        config = {"execution": {"config": {"max_concurrent": limit}}}
        instance = dg.DagsterInstance.ephemeral()
        result = materialize(assets, dg.AssetSelection.all(), {}, instance, run_config=config)
        assert result.success
        assert most[0] == limit


def test_a_failed_step_skips_its_downstream_and_the_others_end() -> None:
    order: list[str] = []

    @dg.asset
    def fails() -> None:
        raise ValueError("the source is unreadable")

    @dg.asset
    def other() -> None:
        time.sleep(0.3)  # still running when ``fails`` has failed
        order.append("other")

    @dg.asset(deps=[fails])
    def after() -> None:
        order.append("after")

    instance = dg.DagsterInstance.ephemeral()
    with pytest.raises(ValueError, match="the source is unreadable"):
        materialize([fails, other, after], dg.AssetSelection.all(), {}, instance)
    assert order == ["other"]
    assert instance.get_latest_materialization_event(dg.AssetKey("other")) is not None
    assert instance.get_latest_materialization_event(dg.AssetKey("after")) is None

    # a launched run (no raise): the failure is the run's event; ``after`` never starts, as
    # with Dagster's in-process executor
    result = materialize(
        [fails, other, after], dg.AssetSelection.all(), {}, dg.DagsterInstance.ephemeral(),
        raise_on_error=False,
    )  # fmt: skip
    assert not result.success
    failed = {event.step_key for event in result.get_step_failure_events()}
    assert failed == {"fails"}
    started = {event.step_key for event in result.all_events if event.is_step_start}
    assert started == {"fails", "other"}
    assert {event.step_key for event in result.get_step_success_events()} == {"other"}


def test_the_limit_comes_from_the_environment_and_must_be_a_positive_integer() -> None:
    assert max_concurrent_steps({}) == 4
    assert max_concurrent_steps({ENV_MAX_CONCURRENT_STEPS: "2"}) == 2
    for bad in ("0", "-1", "two", ""):
        with pytest.raises(ValueError, match=ENV_MAX_CONCURRENT_STEPS):
            max_concurrent_steps({ENV_MAX_CONCURRENT_STEPS: bad})
