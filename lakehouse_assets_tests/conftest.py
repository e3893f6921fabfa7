"""Shared fixtures: a real embedded broker per test, one Spark session per test process."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from lakehouse_assets import sample_data
from lakehouse_assets.sample_data import Message
from resources import SparkResource, build_resources
from resources.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    return SparkResource().get_session()


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as running:
        yield running


@pytest.fixture
def lake_root(tmp_path: Path) -> Path:
    return tmp_path / "lake"


@pytest.fixture
def resources(broker: EmbeddedBroker, lake_root: Path, spark: SparkSession) -> dict[str, Any]:
    return build_resources(
        {"KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers, "LAKEHOUSE_ROOT": str(lake_root)}
    )


def produce(
    bootstrap_servers: str,
    topic: str,
    values: Iterable[dict[str, Any]],
    key_field: str | None = None,
) -> int:
    """Produce JSON values with normal producer batching; returns the count."""
    messages = [
        Message(topic, None if key_field is None else str(value[key_field]), json.dumps(value))
        for value in values
    ]
    sample_data.produce(bootstrap_servers, messages)
    return len(messages)
