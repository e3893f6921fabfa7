"""Gold's daily partitions start on a configurable first day."""

from __future__ import annotations

import pytest

from resources.settings import DEFAULT_GOLD_START_DATE, gold_start_date


def test_gold_starts_on_the_documented_default_day() -> None:
    assert gold_start_date({}) == DEFAULT_GOLD_START_DATE == "2025-01-01"


def test_gold_start_date_comes_from_the_environment() -> None:
    assert gold_start_date({"LAKEHOUSE_GOLD_START_DATE": "2023-03-01"}) == "2023-03-01"


def test_a_bad_gold_start_date_is_named() -> None:
    with pytest.raises(ValueError, match=r"LAKEHOUSE_GOLD_START_DATE .* '03/01/2023'"):
        gold_start_date({"LAKEHOUSE_GOLD_START_DATE": "03/01/2023"})
