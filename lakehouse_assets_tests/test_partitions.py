"""Gold's daily partitions start on a configurable first day; silver and gold follow their
upstream tables, including updates made while they run."""

from __future__ import annotations

import dagster as dg
import pytest

from lakehouse_assets.partitions import (
    DEFAULT_GOLD_START_DATE,
    gold_start_date,
    silver_automation,
)


def test_gold_starts_on_the_documented_default_day() -> None:
    assert gold_start_date({}) == DEFAULT_GOLD_START_DATE == "2025-01-01"


def test_gold_start_date_comes_from_the_environment() -> None:
    assert gold_start_date({"LAKEHOUSE_GOLD_START_DATE": "2023-03-01"}) == "2023-03-01"


def test_a_bad_gold_start_date_is_named() -> None:
    with pytest.raises(ValueError, match=r"LAKEHOUSE_GOLD_START_DATE .* '03/01/2023'"):
        gold_start_date({"LAKEHOUSE_GOLD_START_DATE": "03/01/2023"})


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
    assert ticks.requested() == 0  # nothing written yet
    ticks.write(upstream)
    assert ticks.requested() == 1  # the run that reads the first write
    assert ticks.requested() == 0  # while it runs
    return ticks


def test_an_upstream_write_during_a_run_gets_a_run_of_its_own(ticks: Ticks) -> None:
    ticks.write(upstream)  # after the running run read upstream...
    ticks.write(follower)  # ...which then lands, later
    assert ticks.requested() == 1


def test_a_run_that_lands_with_no_upstream_write_since_is_not_followed_by_another(
    ticks: Ticks,
) -> None:
    ticks.write(follower)
    assert ticks.requested() == 0
