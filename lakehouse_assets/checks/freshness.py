"""Freshness of a bronze table against its source: the age of the oldest Kafka record or landing
file that is waiting to be ingested (not yet in the stream's checkpoint).

The check is a warning (it never holds the tables downstream back: they are as fresh as bronze
lets them be). The lag and landing sensors report it when it changes and every few minutes
(``sensors.streams.REPORT_AGAIN_S``); it can also be run from the UI like any asset check.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import dagster as dg

from lakehouse_assets.bronze.position import StreamPosition
from lakehouse_assets.constants import BRONZE, LANDING_DIR, asset_key
from resources import KafkaResource, LakeResource
from resources.checkpoints import landed_times
from resources.settings import DEFAULT_FRESHNESS_S, ENV_FRESHNESS_S, freshness_limit_s

FRESHNESS = "fresh"


@dataclass(frozen=True)
class Waiting:
    """What waits for a bronze table: ``count`` records or files, per partition or folder, and
    since when (epoch seconds; None when nothing waits)."""

    count: int
    since: float | None
    parts: Mapping[str, int]

    def age_s(self, now: float) -> float:
        return 0.0 if self.since is None else max(now - self.since, 0.0)


def kafka_waiting(
    kafka: KafkaResource,
    lake: LakeResource,
    table: str,
    topics: Sequence[str] = (),
    pattern: str | None = None,
) -> Waiting:
    """The records of the topics not yet in ``bronze.<table>``'s checkpoint, and the timestamp
    of the oldest (the first waiting record of each partition)."""
    positions = StreamPosition(lake, table).offsets()
    subscribed = kafka.matching(pattern) if pattern else (topics or [table])
    lag = kafka.lag(subscribed, positions)
    lagging = {tp: positions.get(tp, 0) for tp, n in lag.items() if n > 0}
    stamps = kafka.timestamps_at(lagging) if lagging else {}
    since = min(stamps.values()) / 1000 if stamps else (time.time() if lagging else None)
    parts = {f"{t}-{p}": n for (t, p), n in sorted(lag.items())}
    return Waiting(sum(lag.values()), since, parts)


def landing_waiting(lake: LakeResource, source: str) -> Waiting:
    """The landing files of ``source`` its stream has not read, and the oldest one's time."""
    read = StreamPosition(lake, source).files_read()
    landed = landed_times(lake.path(LANDING_DIR, source))
    new = [landed_at for name, landed_at in landed.items() if name not in read]
    if not new:
        return Waiting(0, None, {})
    return Waiting(len(new), min(new), {f"landing/{source}": len(new)})


def freshness_evaluation(
    key: dg.AssetKey, waiting: Waiting, now: float | None = None
) -> dg.AssetCheckEvaluation:
    """The freshness check's outcome: passed unless the oldest waiting item is older than
    ``LAKEHOUSE_FRESHNESS_S``."""
    limit, age = freshness_limit_s(), waiting.age_s(time.time() if now is None else now)
    return dg.AssetCheckEvaluation(
        asset_key=key,
        check_name=FRESHNESS,
        passed=age <= limit,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "waiting": waiting.count,
            "oldest_waiting_s": round(age, 1),
            "limit_s": limit,
            "waiting_by_partition": dg.MetadataValue.json(dict(waiting.parts)),
        },
    )


def _description(origin: str) -> str:
    return (
        f"Warns when the oldest {origin} not yet in this table has waited longer than "
        f"{ENV_FRESHNESS_S} (default {DEFAULT_FRESHNESS_S} s). Reported by the sensor at each "
        "change, and every 5 minutes while nothing changes."
    )


def _result(evaluation: dg.AssetCheckEvaluation) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=evaluation.passed, severity=evaluation.severity, metadata=evaluation.metadata
    )


def kafka_freshness_check(
    table: str, topics: Sequence[str] = (), pattern: str | None = None
) -> dg.AssetChecksDefinition:
    """The freshness check of ``bronze/<table>`` against its Kafka topics."""
    key = asset_key(BRONZE, table)

    @dg.asset_check(asset=key, name=FRESHNESS, description=_description("Kafka record"))
    def _check(kafka: KafkaResource, lake: LakeResource) -> dg.AssetCheckResult:
        waiting = kafka_waiting(kafka, lake, table, topics, pattern)
        return _result(freshness_evaluation(key, waiting))

    return _check


def landing_freshness_check(source: str) -> dg.AssetChecksDefinition:
    """The freshness check of ``bronze/<source>`` against its landing folder."""
    key = asset_key(BRONZE, source)

    @dg.asset_check(asset=key, name=FRESHNESS, description=_description("landing file"))
    def _check(lake: LakeResource) -> dg.AssetCheckResult:
        return _result(freshness_evaluation(key, landing_waiting(lake, source)))

    return _check
