"""What a replay writes (``replay``): the quarantine's replay log, a row per record read again
with the replay's run and time and its new reason when it failed again, written after the
table's own writes; the counts its materialization shows; the log emptied by a rebuild."""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.constants import SILVER
from lakehouse_assets.refinement.replay import REPLAYED_AT, REPLAYED_BY, Replaying, replays_table
from lakehouse_assets.validation import REASON
from resources import LakeResource

# A replay's counts in its quarantine's metadata: records that passed, records rejected again.
REPLAY_COUNTS = ("records_replayed", "replayed_still_rejected")


def clear_replays(lake: LakeResource, spark: SparkSession, source: str) -> None:
    """Empty the replay log of the quarantine of ``source`` (a rebuild quarantines anew)."""
    table = replays_table(source)
    if lake.exists(SILVER, table):
        lake.replace(SILVER, table, lake.read(spark, SILVER, table).limit(0))


PASSED = ""  # the reason of a record read again that passes (no reason is empty)


def read_again(records: DataFrame) -> DataFrame:
    """Records a replay parsed (with a ``reason`` when rejected), each with a reason for
    ``log_replayed``: ``PASSED`` when it has none. Put them in the quarantine's shape after."""
    return records.withColumn(REASON, F.coalesce(F.col(REASON), F.lit(PASSED)))


def log_replayed(
    lake: LakeResource,
    replayed: Replaying,
    parsed: DataFrame,
    counts: tuple[int, int] | None = None,
) -> tuple[int, int]:
    """Log the quarantined records ``replayed`` read again, in one append to the quarantine's
    replay log: each record ``parsed`` (every record the replay parsed, in the quarantine's
    shape, ``read_again``) with the replay's run and time, and its new reason when it failed
    again; a record not parsed (not in bronze, now a header line) stays open as it was. Call it
    after the table's writes. Returns how many records were replayed and how many stay open:
    ``counts``, when the caller counted them, else counted here (one query)."""
    identity = list(replayed.identity)
    if counts is not None and counts == (replayed.size, 0):  # each record parsed, and passed
        marks = replayed.identities.withColumn(REASON, F.lit(None).cast("string"))
    else:
        again = parsed.select(*identity, F.col(REASON).alias("_again")).dropDuplicates(identity)
        marks = replayed.identities.join(again, identity).select(
            *identity, F.when(F.col("_again") != PASSED, F.col("_again")).alias(REASON)
        )
    replay = replayed.replay
    marks = marks.select(
        *identity,
        REASON,
        F.lit(replay.run_id).alias(REPLAYED_BY),
        F.lit(replay.at).alias(REPLAYED_AT),
    )
    if counts is None:
        marks = marks.localCheckpoint(eager=True)  # counted, then appended
        row = marks.agg(F.count(F.lit(1)), F.count(REASON)).first()
        assert row is not None  # an aggregate without grouping has one row
        counts = (row[0] - row[1], row[1])
    if any(counts):
        lake.append(SILVER, replays_table(replayed.source), marks)
    return counts


def replay_metadata(replayed: int | None, rejected: int) -> dict[str, int]:
    """A replay's counts as its quarantine's materialization shows them (none for a run that
    did not replay: ``replayed`` None)."""
    if replayed is None:
        return {}
    return dict(zip(REPLAY_COUNTS, (replayed, rejected), strict=True))
