"""The two aggregations of a column profile (see ``lakehouse_assets.profiling.transforms``): the
columns they compute, named ``<column index>_<statistic>``, and what pass 2 needs of pass 1."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.profiling.model import ProfileOptions

QUANTILE_K = 1_000  # the KLL sketch's size: quartiles within about 0.3% of the rows in rank
MAX_KEY_PAIRS = 3  # column pairs tested as candidate keys, those of most distinct values first
NEARLY_UNIQUE = 0.95  # a column whose estimated distinct count is this share of the rows or more
# is left out of the pairs (if it is a key, it is one alone)


def _missing(column: Column, kind: str | None, sentinels: Sequence[str]) -> Column:
    if kind != "string":
        return column.isNull()
    return column.isNull() | column.isin("", *sentinels)


def theta_entries(exact_below: int) -> int:
    """The theta sketch's log2 of nominal entries: room for ``exact_below`` values (4 to 26)."""
    return min(max(math.ceil(math.log2(max(exact_below, 2))), 4), 26)


def _distinct(hashed: Column, options: ProfileOptions) -> Column:
    """The distinct count of the non-null values hashed to longs (the theta sketch takes longs,
    not every type)."""
    sketch = F.theta_sketch_agg(hashed, theta_entries(options.exact_distinct_below))
    return F.theta_sketch_estimate(sketch)


def _hash(*columns: Column) -> Column:
    present = F.lit(True)
    for column in columns:
        present = present & column.isNotNull()
    return F.when(present, F.xxhash64(*columns))


def _frequent(values: Column, options: ProfileOptions) -> Column:
    """The values with their counts: all of them while there are at most
    ``exact_frequencies_below``, the heavy hitters beyond."""
    tracked = F.lit(options.exact_frequencies_below)
    return F.call_function("approx_top_k", values, tracked, tracked)


def prepared_one(df: DataFrame, kinds: dict[str, str | None], options: ProfileOptions) -> DataFrame:
    """The columns pass 1 aggregates, each value computed once per row: the column itself
    (``c{i}``), whether it is missing (``m{i}``), its hash (``h{i}``), as a double (``n{i}``)
    or its length (``l{i}``). (Computed inside the aggregate functions, Spark evaluates an
    expression once per function using it.)"""
    columns: list[Column] = []
    for i, (name, kind) in enumerate(kinds.items()):
        col = F.col(f"`{name}`")
        columns += [col.alias(f"c{i}"), _missing(col, kind, options.sentinels).alias(f"m{i}")]
        if kind is not None:
            columns.append(_hash(col).alias(f"h{i}"))
        if kind == "numeric":
            columns.append(col.cast("double").alias(f"n{i}"))
        elif kind == "string":
            columns.append(F.length(col).alias(f"l{i}"))
    return df.select(*columns)


def pass_one(kinds: dict[str, str | None], options: ProfileOptions) -> list[Column]:
    """Pass 1's aggregations, over ``prepared_one``."""
    aggs: list[Column] = [F.count(F.lit(1)).alias("_rows")]
    for i, kind in enumerate(kinds.values()):
        col = F.col(f"c{i}")
        aggs += [F.count(col).alias(f"{i}_count"), F.count_if(f"m{i}").alias(f"{i}_missing")]
        if kind is None:
            continue
        aggs += [F.min(col).alias(f"{i}_min"), F.max(col).alias(f"{i}_max")]
        aggs.append(_distinct(F.col(f"h{i}"), options).alias(f"{i}_distinct"))
        aggs.append(_frequent(col, options).alias(f"{i}_top"))
        if kind == "numeric":
            number = F.col(f"n{i}")
            sketch = F.kll_sketch_agg_double(number, QUANTILE_K)
            ranks = F.array(F.lit(0.25), F.lit(0.5), F.lit(0.75))
            # an empty sketch has no quantiles (an error): none for a column without values
            quartiles = F.when(F.count(number) > 0, F.kll_sketch_get_quantile_double(sketch, ranks))
            aggs += [F.avg(number).alias(f"{i}_mean"), F.stddev_samp(number).alias(f"{i}_sd")]
            aggs.append(quartiles.alias(f"{i}_quartiles"))
        elif kind == "string":
            length = F.col(f"l{i}")
            aggs += [F.min(length).alias(f"{i}_minlen"), F.max(length).alias(f"{i}_maxlen")]
            aggs.append(F.avg(length).alias(f"{i}_avglen"))
    numeric = [i for i, kind in enumerate(kinds.values()) if kind == "numeric"]
    for a, b in itertools.combinations(numeric, 2):
        corr = _pearson(F.col(f"n{a}"), F.col(f"n{b}"))
        aggs.append(corr.alias(f"corr_{numeric.index(a)}_{numeric.index(b)}"))
    return aggs


def _pearson(x: Column, y: Column) -> Column:
    """Pearson's correlation over the rows holding both; null for a constant column (``corr``
    divides by its zero deviation, an error under ANSI SQL)."""
    both = x.isNotNull() & y.isNotNull()
    deviations = F.stddev_samp(F.when(both, x)) * F.stddev_samp(F.when(both, y))
    return F.try_divide(F.covar_samp(x, y), deviations)


def pattern(column: Column) -> Column:
    """A string's shape: each digit as ``9``, each letter (any script) as ``A``, the rest kept."""
    return F.regexp_replace(F.regexp_replace(column, r"\p{Nd}", "9"), r"\p{L}", "A")


def text_pattern(text: str) -> str:
    """``pattern`` on the driver: decimal digits (Unicode Nd) as ``9``, letters (L) as ``A``."""
    return "".join("9" if c.isdecimal() else "A" if c.isalpha() else c for c in text)


def _bin(col: Column, low: float, high: float, bins: int) -> Column:
    """The histogram bin of a value (null for null: ``least`` alone would skip it)."""
    if high <= low:
        return F.when(col.isNotNull(), F.lit(0))
    width = (high - low) / bins
    binned = F.least(F.floor((col.cast("double") - F.lit(low)) / F.lit(width)), F.lit(bins - 1))
    return F.when(col.isNotNull(), binned)


def fences(first: dict[str, Any], i: int) -> tuple[float, float]:
    q1, _, q3 = first[f"{i}_quartiles"]
    return q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)


def exact_frequencies(first: dict[str, Any], i: int, options: ProfileOptions) -> bool:
    distinct = first[f"{i}_distinct"]
    return distinct < options.exact_distinct_below and distinct <= options.exact_frequencies_below


def pass_two(
    df: DataFrame,
    kinds: dict[str, str | None],
    first: dict[str, Any],
    pairs: list[tuple[str, str]],
    options: ProfileOptions,
) -> DataFrame | None:
    """Pass 2 (one row; None when there is nothing to count), over the values it needs, each
    computed once per row: each numeric column's histogram bin (``b{i}``) and whether it is an
    outlier (``o{i}``), the pattern of a string column with too many values for exact
    frequencies (``p{i}``), each pair's hash (``k{j}``)."""
    prepared: list[Column] = []
    aggs: list[Column] = []
    for i, (name, kind) in enumerate(kinds.items()):
        col = F.col(f"`{name}`")
        if kind == "numeric" and first[f"{i}_min"] is not None:
            low, high = float(first[f"{i}_min"]), float(first[f"{i}_max"])
            below, above = fences(first, i)
            number = col.cast("double")
            prepared.append(_bin(col, low, high, options.bins).alias(f"b{i}"))
            prepared.append(((number < below) | (number > above)).alias(f"o{i}"))
            binned = F.col(f"b{i}")
            aggs += [F.count_if(binned == b).alias(f"{i}_bin_{b}") for b in range(options.bins)]
            aggs.append(F.count_if(f"o{i}").alias(f"{i}_outliers"))
        elif kind == "string" and not exact_frequencies(first, i, options):
            prepared.append(pattern(col).alias(f"p{i}"))
            aggs.append(_frequent(F.col(f"p{i}"), options).alias(f"{i}_patterns"))
    for j, (a, b) in enumerate(pairs):
        prepared.append(_hash(F.col(f"`{a}`"), F.col(f"`{b}`")).alias(f"k{j}"))
        aggs.append(_distinct(F.col(f"k{j}"), options).alias(f"pair_{j}"))
    return df.select(*prepared).agg(*aggs) if aggs else None


def key_pairs(
    kinds: dict[str, str | None], first: dict[str, Any], rows: int
) -> list[tuple[str, str]]:
    """Column pairs that may be a key together: no nulls in either, not a key alone, and as many
    distinct combinations possible as rows; those of most combinations first."""
    candidates = [
        (name, int(first[f"{i}_distinct"]))
        for i, (name, kind) in enumerate(kinds.items())
        if kind is not None
        and first[f"{i}_count"] == rows
        and first[f"{i}_distinct"] < NEARLY_UNIQUE * rows
    ]
    pairs = [
        (a, b, da * db)
        for (a, da), (b, db) in itertools.combinations(candidates, 2)
        if da * db >= rows
    ]
    pairs.sort(key=lambda pair: -pair[2])
    return [(a, b) for a, b, _ in pairs[:MAX_KEY_PAIRS]]
