"""What a profile holds: the options it is taken with, and each column's and the table's
statistics (plain data, computed by ``profiling.transforms``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ProfileOptions:
    """How a table is profiled.

    Attributes:
        top_n: most frequent values (and patterns) kept per column.
        exact_distinct_below: a column with fewer distinct values gets their exact count; one
            with more, an estimate (a theta sketch of this many entries, rounded up to a power
            of two: relative standard error 1/sqrt of it, 0.4% by default).
        exact_frequencies_below: a column with at most this many distinct values gets exact
            counts of its most frequent values and patterns; one with more, the estimates of
            a frequent-items sketch tracking this many (only values frequent enough to stand
            out of its error are listed), flagged ``frequencies_exact=False``.
        sentinels: string values counted as missing, besides null and the empty string.
        bins: histogram bins of a numeric column, of equal width from its min to its max.
    """

    top_n: int = 100
    exact_distinct_below: int = 65_536
    exact_frequencies_below: int = 10_000
    sentinels: tuple[str, ...] = ()
    bins: int = 10


@dataclass(frozen=True)
class ColumnProfile:
    """The statistics of one column; None where a statistic does not apply to its type."""

    name: str
    data_type: str
    count: int
    missing: int
    density: float | None
    minimum: Any = None
    maximum: Any = None
    mean: float | None = None
    stddev: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    avg_length: float | None = None
    distinct: int | None = None
    distinct_exact: bool = True
    frequencies_exact: bool = True
    q1: float | None = None
    median: float | None = None
    q3: float | None = None
    outliers: int | None = None
    top_values: list[tuple[str, int]] = field(default_factory=list)
    patterns: list[tuple[str, int]] = field(default_factory=list)
    histogram: list[tuple[float, float, int]] = field(default_factory=list)
    unique: bool = False


@dataclass(frozen=True)
class TableProfile:
    """A table's profile: its rows, each column's, correlations and candidate keys (exact when
    the table has fewer rows than ``exact_distinct_below``, estimated from the distinct counts'
    sketches otherwise)."""

    rows: int
    columns: list[ColumnProfile]
    correlations: dict[tuple[str, str], float | None]
    candidate_keys: list[tuple[str, ...]]
    keys_exact: bool = True
