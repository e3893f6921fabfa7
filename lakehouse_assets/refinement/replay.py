"""Replaying a source's quarantine: the records it holds open (not replayed yet), chosen by
reason and by when bronze ingested them, read again from bronze and refined by today's rules in
their table's silver step, as a run of that step with ``replay`` in its config.

Those that pass reach the table by the step's own writes, as if they had arrived in their order
(a replayed row never replaces a newer one of its key: ``ParsedTable.replay_when``,
``sources.writes.keep``); those that fail again stay open with their new reason. The quarantine
itself is never rewritten: each replay appends one row per record it read again to the
quarantine's replay log, ``<source>_quarantine_replays`` (its identity, ``replayed_by``: the
run's id, ``replayed_at``, and ``reason``: null when it passed, else its new one). A record is
open while its last replay row, if any, has a reason (``open_quarantine``).

The table's write comes first and takes a record once whatever the number of replays (inserted
by its coordinates, or merged in its order), and the replay rows follow in one append: a replay
stopped between the two and run again replays the same records to the same rows. A replay runs
in its step's pool, so neither the stream's own run nor another replay writes the tables
meanwhile.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import dagster as dg
from pydantic import Field
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.constants import BRONZE, QUARANTINE_SUFFIX, REPLAYS_SUFFIX, SILVER
from lakehouse_assets.validation import REASON
from resources import LakeResource

REPLAYED_BY, REPLAYED_AT = "replayed_by", "replayed_at"
# A quarantined record's identity: a Kafka record's coordinates, a landing line's file and bytes.
KAFKA_IDENTITY = ("source", "partition", "offset")
LANDING_IDENTITY = ("source", "raw")
# The bronze columns each identity column is (Kafka; landing).
BRONZE_COLUMNS = {"source": "topic", "partition": "partition", "offset": "offset"}
LANDING_BRONZE_COLUMNS = {"source": "source_file", "raw": "line"}


class ReplayConfig(dg.Config):
    """Which of a source's open quarantined records a replay reads again (all by default)."""

    reason: str | None = Field(
        default=None,
        description="Only the records whose reason matches this SQL LIKE pattern, e.g. "
        "`expectation kwh_not_negative` or `wrong type %`.",
    )
    since: str | None = Field(
        default=None,
        description="Only the records bronze ingested at or after this date-time (ISO 8601; "
        "UTC unless it names its offset), e.g. `2026-12-01` or `2026-12-01T08:00:00Z`.",
    )
    until: str | None = Field(
        default=None,
        description="Only the records bronze ingested before this date-time (ISO 8601; UTC "
        "unless it names its offset).",
    )


@dataclass(frozen=True)
class Replay:
    """A replay as a run does it: its ``run_id`` and time (``at``), logged with each record it
    reads again, and which records it reads (``ReplayConfig``)."""

    run_id: str
    at: datetime
    reason: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    @classmethod
    def of(cls, config: ReplayConfig, run_id: str) -> Replay:
        """The replay ``config`` asks for, in run ``run_id``.

        Raises:
            dg.Failure: a date-time is not ISO 8601, or the window is empty.
        """
        since, until = _instant(config.since, "since"), _instant(config.until, "until")
        if since and until and since >= until:
            raise dg.Failure(f"replay: since ({config.since}) is not before until ({config.until})")
        return cls(run_id, datetime.now(UTC), config.reason or None, since, until)


def _instant(text: str | None, name: str) -> datetime | None:
    if text is None or not text.strip():
        return None
    try:
        instant = datetime.fromisoformat(text.strip())
    except ValueError:
        raise dg.Failure(
            f"replay {name}: {text!r} is not an ISO 8601 date-time (e.g. 2026-12-01 or "
            "2026-12-01T08:00:00Z)"
        ) from None
    return instant.astimezone(UTC) if instant.tzinfo else instant.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Replaying:
    """The records a replay reads again: the identities (``identity`` columns) and reasons of
    the open quarantine rows it chose (``opened``, checkpointed, one row per Kafka record or
    per landing line's bytes; ``size`` of them), how many rows there are per reason
    (``reasons``), their bronze rows (``records``), and the version of the replay log they were
    chosen at (``replays_before``; None: no replay has run yet)."""

    replay: Replay
    source: str
    identity: tuple[str, ...]
    opened: DataFrame
    records: DataFrame
    size: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    replays_before: int | None = None

    def open_change(self, parsed: int, rejected: dict[str, int]) -> dict[str, int] | None:
        """How the quarantine's open records per reason change when the replay's rows are
        logged, given the records it ``parsed`` and those ``rejected`` again per new reason: the
        chosen rows leave their reasons, the rejected join theirs. None when that cannot be told
        from the counts (a record not parsed, or one of several rows): then they are counted."""
        if not self.size == sum(self.reasons.values()) == parsed:
            return None
        change = {reason: -count for reason, count in self.reasons.items()}
        for reason, count in rejected.items():
            change[reason] = change.get(reason, 0) + count
        return change

    @property
    def identities(self) -> DataFrame:
        """The identities of the records chosen."""
        return self.opened.select(*self.identity)


def replays_table(source: str) -> str:
    """The replay log of the quarantine of bronze table ``source``."""
    return f"{source}{QUARANTINE_SUFFIX}{REPLAYS_SUFFIX}"


def open_quarantine(lake: LakeResource, spark: SparkSession, source: str) -> DataFrame | None:
    """The rows of the quarantine of bronze table ``source`` that no replay has brought into
    the table, each with its reason now: that of the last replay that read it again, else the
    one it was quarantined with (None: the source has no quarantine yet). A row is identified by
    its record's coordinates (Kafka), or its file and bytes (landing)."""
    quarantine = f"{source}{QUARANTINE_SUFFIX}"
    if not lake.exists(SILVER, quarantine):
        return None
    rows = lake.read(spark, SILVER, quarantine)
    if REPLAYED_BY in rows.columns:  # marked in place by an earlier version, which kept them
        rows = rows.where(F.col(REPLAYED_BY).isNull()).drop(REPLAYED_BY, REPLAYED_AT)
    if not lake.exists(SILVER, replays_table(source)):
        return rows
    replays = lake.read(spark, SILVER, replays_table(source))
    identity = [name for name in replays.columns if name not in (REASON, REPLAYED_BY, REPLAYED_AT)]
    last = replays.groupBy(*identity).agg(
        F.max_by(REASON, REPLAYED_AT).alias("_again"), F.lit(True).alias("_replayed")
    )
    rows = rows.join(last, identity, "left").where(
        F.col("_replayed").isNull() | F.col("_again").isNotNull()
    )
    return rows.withColumn(REASON, F.coalesce("_again", REASON)).drop("_again", "_replayed")


def replaying(
    lake: LakeResource,
    spark: SparkSession,
    source: str,
    replay: Replay,
    tombstones: bool = False,
) -> Replaying:
    """The open quarantined records of bronze table ``source`` that ``replay`` chooses, with
    their bronze rows (none when the source has no quarantine yet). With ``tombstones`` (a
    latest-per-key mirror's), the rows come with the tombstones bronze holds of their keys at a
    higher offset: a key deleted after a replayed record stays deleted, as in the stream.

    Raises:
        dg.Failure: bronze holds no table ``source``.
    """
    if not lake.exists(BRONZE, source):
        raise dg.Failure(f"bronze.{source} does not exist yet: there is nothing to replay.")
    bronze = lake.read(spark, BRONZE, source)
    landing = "line" in bronze.columns
    identity, columns = (
        (LANDING_IDENTITY, LANDING_BRONZE_COLUMNS) if landing else (KAFKA_IDENTITY, BRONZE_COLUMNS)
    )
    replays_before = lake.version(SILVER, replays_table(source))
    rows = open_quarantine(lake, spark, source)
    if rows is None:
        return Replaying(replay, source, identity, bronze.limit(0), bronze.limit(0))
    chosen = [F.lit(True)]
    if replay.reason is not None:
        chosen.append(F.col(REASON).like(replay.reason))
    if replay.since is not None:
        chosen.append(F.col("ingested_at") >= F.lit(replay.since))
    if replay.until is not None:
        chosen.append(F.col("ingested_at") < F.lit(replay.until))
    rows = rows.where(functools.reduce(operator.and_, chosen))
    if landing:  # a file may hold a line twice: its bytes once, with their rows and reason
        rows = rows.groupBy(*identity).agg(F.max(REASON).alias(REASON), F.count(F.lit(1)))
    else:  # a Kafka record's row is its own (no shuffle)
        rows = rows.select(*identity, REASON, F.lit(1))
    # Checkpointed: the bronze rows and the replay log's rows are chosen by the same.
    opened = rows.toDF(*identity, REASON, ROWS).localCheckpoint(eager=True)
    per_reason = opened.groupBy(REASON).agg(F.sum(ROWS).alias(ROWS), F.count(F.lit(1)).alias("n"))
    counted = per_reason.collect()
    wanted = opened.select(*[F.col(name).alias(columns[name]) for name in identity])
    records = bronze.join(wanted, list(wanted.columns), "left_semi")
    if tombstones and not landing:
        records = records.unionByName(_later_tombstones(bronze, records))
    size, reasons = sum(r["n"] for r in counted), {r[REASON]: r[ROWS] for r in counted}
    return Replaying(replay, source, identity, opened, records, size, reasons, replays_before)


ROWS = "_rows"  # how many quarantine rows an opened identity stands for


def _later_tombstones(bronze: DataFrame, records: DataFrame) -> DataFrame:
    """The tombstones (records without a value) ``bronze`` holds of the keys of ``records``, each
    after the first of its key's records there (offsets are ordered within a partition, where
    Kafka keeps a key's records)."""
    where = ["topic", "partition", "key"]
    first = records.groupBy(*where).agg(F.min("offset").alias("_first"))
    later = bronze.where(F.col("value").isNull()).join(first, where)
    return later.where(F.col("offset") > F.col("_first")).drop("_first")
