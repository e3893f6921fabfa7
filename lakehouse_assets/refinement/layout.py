"""How the silver tables that grow with time are laid out (partitioned by ``date``, the UTC date
of one of their columns, which their pipeline names) and read by days."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from datetime import date, timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.constants import DATE, SILVER
from resources import LakeResource


def layout(dated_by: str | None) -> list[str]:
    """The partition columns of a table whose rows are dated by the column ``dated_by`` (None:
    a table not laid out by days)."""
    return [DATE] if dated_by else []


def dated(rows: DataFrame, dated_by: str | None) -> DataFrame:
    """``rows`` with the partition column, the UTC date of ``dated_by`` (as they are, if None)."""
    return rows.withColumn(DATE, F.to_date(dated_by)) if dated_by else rows


def days_of(rows: DataFrame, before: int = 0, after: int = 0) -> list[str]:
    """The days of ``rows``' ``date`` column, each with ``before`` days before it and ``after``
    days after it (ISO dates, for partition filters). Collects one value per day."""
    return spread(days_of_each(rows)[0], before, after)


def days_of_each(*frames: DataFrame) -> list[list[str]]:
    """The days of each of ``frames``' ``date`` column (ISO dates), in one query."""
    tagged = [
        frame.select(F.lit(n).alias("_frame"), DATE).distinct() for n, frame in enumerate(frames)
    ]
    days: list[set[str]] = [set() for _ in frames]
    for row in functools.reduce(DataFrame.unionByName, tagged).collect():
        if row[DATE]:
            days[row["_frame"]].add(row[DATE].isoformat())
    return [sorted(found) for found in days]


def spread(days: Iterable[str], before: int = 0, after: int = 0) -> list[str]:
    """``days`` (ISO dates), each with ``before`` days before it and ``after`` days after it."""
    dates = [date.fromisoformat(day) for day in days]
    shifted = {day + timedelta(days=n) for day in dates for n in range(-before, after + 1)}
    return sorted(day.isoformat() for day in shifted)


def read_days(
    lake: LakeResource,
    spark: SparkSession,
    table: str,
    days: list[str],
    version: int | None = None,
) -> DataFrame:
    """The rows of ``silver.<table>`` on ``days`` (read from those partitions' files only), at
    ``version`` (else its latest)."""
    return lake.read(spark, SILVER, table, partitions=[(DATE, "in", days)], version=version)
