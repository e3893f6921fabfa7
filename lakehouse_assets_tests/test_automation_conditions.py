"""Silver and gold follow their upstream tables by their automation conditions, including
updates made while they run."""

from __future__ import annotations

import dagster as dg
import pytest

from lakehouse_assets.automation import silver_automation
from lakehouse_assets.checks.results import require_upstream_checks_passed


@dg.asset
def upstream() -> None:
    pass


@dg.asset(deps=[upstream], automation_condition=silver_automation)
def follower() -> None:
    pass


class Ticks:
    """The automation's ticks over ``upstream`` and ``follower``, on one instance."""

    def __init__(self) -> None:
        self.instance = dg.DagsterInstance.ephemeral()
        self.cursor = None

    def write(self, asset: dg.AssetsDefinition) -> None:
        assert dg.materialize([asset], instance=self.instance).success

    def requested(self) -> int:
        """How many runs of ``follower`` this tick requests."""
        result = dg.evaluate_automation_conditions(
            defs=[upstream, follower], instance=self.instance, cursor=self.cursor
        )
        self.cursor = result.cursor
        return result.get_num_requested(follower.key)


@pytest.fixture
def ticks() -> Ticks:
    ticks = Ticks()
    ticks.write(upstream)
    ticks.write(follower)
    assert ticks.requested() == 0  # the first tick: both written
    ticks.write(upstream)
    assert ticks.requested() == 1  # the run that reads the new write
    assert ticks.requested() == 0  # while it runs
    return ticks


def test_an_upstream_write_during_a_run_gets_a_run_of_its_own(ticks: Ticks) -> None:
    ticks.write(upstream)  # after the running run read upstream...
    ticks.write(follower)  # ...which then lands, later
    assert ticks.requested() == 1


def test_an_upstream_write_before_the_tick_after_the_request_gets_a_run_of_its_own() -> None:
    """The tick after a request counts it as handled: a write between the two is kept."""
    ticks = Ticks()
    ticks.write(upstream)
    ticks.write(follower)
    assert ticks.requested() == 0
    ticks.write(upstream)
    assert ticks.requested() == 1
    ticks.write(upstream)  # while that run reads, before the next tick
    ticks.write(follower)
    assert ticks.requested() == 1
    assert ticks.requested() == 0


def test_a_run_that_lands_with_no_upstream_write_since_is_not_followed_by_another(
    ticks: Ticks,
) -> None:
    ticks.write(follower)
    assert ticks.requested() == 0


def test_a_table_whose_upstream_was_written_before_the_first_tick_is_started() -> None:
    """The runs of a new instance ended before automation's first tick (the daemon down):
    Dagster's eager would wait for the next upstream write."""
    ticks = Ticks()
    ticks.write(upstream)
    assert ticks.requested() == 1


FAILING = {"follower": False}


@dg.asset(deps=[upstream], automation_condition=silver_automation)
def failing_follower() -> None:
    if FAILING["follower"]:
        raise RuntimeError("the step did not write")


def _run(instance: dg.DagsterInstance, tags: dict[str, str]) -> None:
    """One run selecting both assets, as a stream sensor's run does (its selection recorded)."""
    job = dg.Definitions(
        assets=[upstream, failing_follower]
    ).resolve_implicit_global_asset_job_def()
    job.execute_in_process(
        instance=instance,
        asset_selection=[upstream.key, failing_follower.key],
        tags=tags,
        raise_on_error=False,
    )


@pytest.mark.parametrize(
    ("tags", "expected"), [({"lakehouse/stream": "lakehouse-bronze-x"}, 1), ({}, 0)]
)
def test_a_table_a_stream_run_wrote_upstream_of_but_failed_to_write_gets_a_run(
    tags: dict[str, str], expected: int
) -> None:
    """A run that wrote the upstream and failed at the table (cancelled, or its worker killed
    past its retries): Dagster's eager ignores that upstream write (the run selected the table);
    for a stream's run the failure brings a run of its own, once. A run with no stream tag
    (launched by automation itself) is not retried by automation."""
    instance = dg.DagsterInstance.ephemeral()
    cursor = None

    def requested() -> int:
        nonlocal cursor
        result = dg.evaluate_automation_conditions(
            defs=[upstream, failing_follower], instance=instance, cursor=cursor
        )
        cursor = result.cursor
        return result.get_num_requested(failing_follower.key)

    assert requested() == 0
    FAILING["follower"] = False
    _run(instance, tags)  # both written, in one run: nothing left to do
    assert requested() == 0
    FAILING["follower"] = True
    try:
        _run(instance, tags)  # upstream written, the table not
    finally:
        FAILING["follower"] = False
    assert requested() == expected
    assert requested() == 0  # once


def test_a_missing_table_whose_run_failed_is_not_started_at_every_tick() -> None:
    """Its upstream written and its own step failed, in one run: no run at each tick after."""
    instance = dg.DagsterInstance.ephemeral()
    FAILING["follower"] = True
    try:
        _run(instance, {})
    finally:
        FAILING["follower"] = False
    cursor = None
    for _ in range(3):
        result = dg.evaluate_automation_conditions(
            defs=[upstream, failing_follower], instance=instance, cursor=cursor
        )
        cursor = result.cursor
        assert result.get_num_requested(failing_follower.key) == 0


CHECKED = {"writes": True, "passes": True}


@dg.asset(check_specs=[dg.AssetCheckSpec("sound", asset="checked", blocking=True)])
def checked() -> dg.MaterializeResult:
    if not CHECKED["writes"]:
        raise RuntimeError("the step did not write")
    return dg.MaterializeResult(
        check_results=[dg.AssetCheckResult(check_name="sound", passed=CHECKED["passes"])]
    )


@dg.asset(deps=[checked], automation_condition=silver_automation)
def checked_follower(context) -> None:
    require_upstream_checks_passed(context)


def _after(writes: list[tuple[bool, bool]]) -> tuple[int, bool]:
    """After runs of ``checked`` that write or not, and whose check passes or not: the runs of
    ``checked_follower`` the first tick requests, and whether a run of it succeeds."""
    instance = dg.DagsterInstance.ephemeral()
    for CHECKED["writes"], CHECKED["passes"] in writes:
        dg.materialize([checked], instance=instance, raise_on_error=False)
    CHECKED.update(writes=True, passes=True)
    result = dg.evaluate_automation_conditions(defs=[checked, checked_follower], instance=instance)
    run = dg.materialize(
        [checked, checked_follower], selection=[checked_follower.key], instance=instance,
        raise_on_error=False,
    )  # fmt: skip
    return result.get_num_requested(checked_follower.key), run.success


def test_a_table_follows_an_upstream_write_whose_blocking_checks_passed() -> None:
    assert _after([(True, True)]) == (1, True)
    assert _after([(True, False)]) == (0, False)  # failed at the latest write: blocked
