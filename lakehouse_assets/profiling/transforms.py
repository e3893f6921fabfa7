"""The column profile of a table, computed with Spark from mergeable states
(``lakehouse_assets.profiling.passes``): a state per group of rows (a partition of a table, or
all of a DataFrame), merged into one row in one aggregation; then, only when some column pairs may
be a key together, one more aggregation counting their distinct combinations.

Nothing groups or sorts the rows: the statistics that need more than a sum are kept in sketches
(Apache DataSketches, built into Spark), which are exact while a column is small and estimates
with known error above that. The distinct count is a theta sketch's (exact below
``exact_distinct_below`` distinct values); the most frequent values and patterns a frequent-items
sketch's (exact counts for every value while a column has at most ``exact_frequencies_below``
distinct values); the quartiles a KLL sketch's. A numeric column's histogram (between its min and
max) and outliers (beyond 1.5 IQR from the quartiles) are counted from its exact frequencies when
it has them, else estimated from the KLL sketch's ranks (within about 0.3% of the rows per edge;
``frequencies_exact`` says which). Mean, standard deviation and Pearson correlations are merged
from each group's moments (Chan's formula).
"""

from __future__ import annotations

import bisect
import itertools
import math
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    NumericType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

from lakehouse_assets.profiling.model import ColumnProfile, ProfileOptions, TableProfile
from lakehouse_assets.profiling.passes import (
    GROUP,
    QUANTILE_STEPS,
    exact_frequencies,
    key_pairs,
    merged,
    numeric_pairs,
    pair_counts,
    prepared,
    state,
    text_pattern,
    theta_entries,
)

KEY_TOLERANCE = 3  # standard errors an estimated distinct count may be under the rows (a key)


def _kind(data_type: DataType) -> str | None:
    """How a column is profiled: numeric, string, ordered (min and max only), or not at all."""
    if isinstance(data_type, NumericType):
        return "numeric"
    if isinstance(data_type, StringType):
        return "string"
    if isinstance(data_type, DateType | TimestampType | TimestampNTZType | BooleanType):
        return "ordered"
    return None


def _is_key(distinct: int, rows: int, options: ProfileOptions) -> bool:
    """Whether a column or pair without nulls and with ``distinct`` values is a key: exactly
    when the count is exact, within the estimate's error otherwise."""
    if rows < options.exact_distinct_below:
        return distinct == rows
    error = KEY_TOLERANCE / math.sqrt(2 ** theta_entries(options.exact_distinct_below))
    return distinct >= rows * (1 - error)


def value_text(value: Any) -> str:
    """A value as a profile shows it (booleans as SQL writes them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _entries(items: list[Any]) -> list[tuple[Any, int]]:
    """``approx_top_k``'s (item, count) entries, without its count of nulls (``missing``)."""
    return [(row["item"], int(row["count"])) for row in items if row["item"] is not None]


def _ranked(items: list[Any], top_n: int) -> list[tuple[str, int]]:
    """Most frequent first, ties by value."""
    ordered = sorted(_entries(items), key=_by_count)
    return [(value_text(value), count) for value, count in ordered[:top_n]]


def _by_count(entry: tuple[Any, int]) -> tuple[int, Any]:
    return -entry[1], entry[0]


def _patterns(items: list[Any], top_n: int) -> list[tuple[str, int]]:
    """The patterns of all of a column's values, counted from their exact frequencies."""
    counts: dict[str, int] = {}
    for value, count in _entries(items):
        shape = text_pattern(value)
        counts[shape] = counts.get(shape, 0) + count
    return sorted(counts.items(), key=_by_count)[:top_n]


def merge_moments(parts: list[Any]) -> tuple[int, float | None, float]:
    """The count, mean and sum of squared deviations of the union of groups, each given as its
    ``(n, mean, m2)`` (Chan et al.'s pairwise update; groups without values are skipped)."""
    n, mean, m2 = 0, 0.0, 0.0
    for part in parts:
        if not part["n"]:
            continue
        count, delta = n + part["n"], part["mean"] - mean
        m2 += part["m2"] + delta * delta * n * part["n"] / count
        mean += delta * part["n"] / count
        n = count
    return n, (mean if n else None), m2


def _correlation(parts: list[Any]) -> float | None:
    """Pearson's correlation of two columns over the rows holding both, from each group's
    co-moments; None for fewer than two such rows or a constant column."""
    n, mean_x, mean_y, m2_x, m2_y, c = 0, 0.0, 0.0, 0.0, 0.0, 0.0
    for part in parts:
        if not part["n"]:
            continue
        count = n + part["n"]
        dx, dy = part["mean_x"] - mean_x, part["mean_y"] - mean_y
        weight = n * part["n"] / count
        m2_x += part["m2_x"] + dx * dx * weight
        m2_y += part["m2_y"] + dy * dy * weight
        c += part["c"] + dx * dy * weight
        mean_x += dx * part["n"] / count
        mean_y += dy * part["n"] / count
        n = count
    if n < 2 or m2_x <= 0 or m2_y <= 0:
        return None
    return c / math.sqrt(m2_x * m2_y)


def _bin(value: float, low: float, high: float, bins: int) -> int:
    """The histogram bin of a value: bins of equal width from ``low``, the last one closed."""
    if high <= low:
        return 0
    return min(math.floor((value - low) / ((high - low) / bins)), bins - 1)


def _edges(low: float, high: float, bins: int) -> list[tuple[float, float]]:
    if high <= low:
        return [(low, high)]
    width = (high - low) / bins
    return [(low + b * width, low + (b + 1) * width) for b in range(bins)]


def _counted(
    first: dict[str, Any], i: int, low: float, high: float, options: ProfileOptions
) -> tuple[list[int], int]:
    """The histogram's counts and the outliers of numeric column ``i``: exact from its
    frequencies."""
    below, above = _fences(_quartiles(first[f"{i}_quantiles"]))
    counts = [0] * (options.bins if high > low else 1)
    outliers = 0
    for value, count in _entries(first[f"{i}_top"]):
        counts[_bin(float(value), low, high, options.bins)] += count
        outliers += count if float(value) < below or float(value) > above else 0
    return counts, outliers


def _estimated(
    first: dict[str, Any], i: int, low: float, high: float, options: ProfileOptions
) -> tuple[list[int], int]:
    """The histogram's counts and the outliers of numeric column ``i``: estimated from the share
    of its quantiles (``QUANTILE_STEPS`` of them, evenly spaced in rank) below each edge."""
    values, quantiles = int(first[f"{i}_count"]), first[f"{i}_quantiles"]

    def rank(value: float) -> float:  # the estimated share of the values below ``value``
        return bisect.bisect_left(quantiles, value) / QUANTILE_STEPS

    if high <= low:
        return [values], 0
    edges = [rank(lower) for lower, _ in _edges(low, high, options.bins)[1:]]
    ranks = [0.0, *edges, 1.0]
    counts = [round(values * (b - a)) for a, b in itertools.pairwise(ranks)]
    below, above = _fences(_quartiles(quantiles))
    beyond = rank(below) + 1.0 - bisect.bisect_right(quantiles, above) / QUANTILE_STEPS
    return counts, round(values * beyond)


def _quartiles(quantiles: list[float]) -> tuple[float, float, float]:
    """The values at ranks 0.25, 0.5 and 0.75 among quantiles at ranks 1/QUANTILE_STEPS apart."""
    quarter = QUANTILE_STEPS // 4
    return quantiles[quarter - 1], quantiles[2 * quarter - 1], quantiles[3 * quarter - 1]


def _fences(quartiles: tuple[float, float, float]) -> tuple[float, float]:
    q1, _, q3 = quartiles
    return q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)


def _column(
    i: int, name: str, data_type: DataType, first: dict[str, Any], options: ProfileOptions
) -> ColumnProfile:
    rows, kind = first["_rows"], _kind(data_type)
    count, missing = int(first[f"{i}_count"]), int(first[f"{i}_missing"] or 0)
    density = (rows - missing) / rows if rows else None
    if kind is None:
        return ColumnProfile(name, data_type.simpleString(), count, missing, density)
    distinct, exact = int(first[f"{i}_distinct"]), exact_frequencies(first, i, options)
    stats: dict[str, Any] = {
        "minimum": first[f"{i}_min"], "maximum": first[f"{i}_max"], "distinct": distinct,
        "distinct_exact": distinct < options.exact_distinct_below, "frequencies_exact": exact,
        "top_values": _ranked(first[f"{i}_top"], options.top_n),
        "unique": rows > 0 and count == rows and _is_key(distinct, rows, options),
    }  # fmt: skip
    if kind == "numeric":
        _, mean, m2 = merge_moments(first[f"{i}_moments"])
        quantiles = first[f"{i}_quantiles"]
        q1, median, q3 = _quartiles(quantiles) if quantiles else (None, None, None)
        stddev = math.sqrt(m2 / (count - 1)) if count > 1 else None
        stats.update(mean=mean, stddev=stddev, q1=q1, median=median, q3=q3)
        if stats["minimum"] is not None:
            low, high = float(stats["minimum"]), float(stats["maximum"])
            if exact:
                counts, outliers = _counted(first, i, low, high, options)
            else:
                counts, outliers = _estimated(first, i, low, high, options)
            edges = _edges(low, high, options.bins)
            stats["histogram"] = [(a, b, n) for (a, b), n in zip(edges, counts, strict=True)]
            stats["outliers"] = outliers
    elif kind == "string":
        stats.update(min_length=first[f"{i}_minlen"], max_length=first[f"{i}_maxlen"])
        stats["avg_length"] = first[f"{i}_sumlen"] / count if count else None
        if exact:
            stats["patterns"] = _patterns(first[f"{i}_top"], options.top_n)
        elif rows:
            stats["patterns"] = _ranked(first[f"{i}_patterns"], options.top_n)
    return ColumnProfile(name, data_type.simpleString(), count, missing, density, **stats)


def kinds_of(df: DataFrame) -> dict[str, str | None]:
    """How each of ``df``'s columns is profiled (see ``_kind``)."""
    return {f.name: _kind(f.dataType) for f in df.schema.fields}


def states(df: DataFrame, options: ProfileOptions, group: Any = None) -> DataFrame:
    """The profile states of ``df``'s rows: one per value of the ``group`` column (a partition
    column, as text), or one for all of them when None (an empty ``df`` has one too)."""
    kinds = kinds_of(df)
    values = prepared(df, kinds, options, F.lit("") if group is None else group)
    aggregations = state(kinds, options)
    return values.agg(*aggregations) if group is None else values.groupBy(GROUP).agg(*aggregations)


def profile_of_states(
    df: DataFrame, merged_states: DataFrame, options: ProfileOptions
) -> TableProfile:
    """The profile of ``df`` from the states of all its rows (``merged_states``: at least one
    state), counting candidate key pairs over ``df`` if any pair may be one."""
    fields, kinds = df.schema.fields, kinds_of(df)
    result = merged(merged_states, kinds, options).first()
    assert result is not None  # a global aggregation has one row
    first = result.asDict()
    rows = int(first["_rows"] or 0)
    first["_rows"] = rows
    pairs = key_pairs(kinds, first, rows) if rows else []
    counted = pair_counts(df, pairs, options).first() if pairs else None
    second = counted.asDict() if counted is not None else {}
    columns = [_column(i, f.name, f.dataType, first, options) for i, f in enumerate(fields)]
    names = list(kinds)
    correlations = {
        (names[a], names[b]): _correlation(first[f"corr_{a}_{b}"]) for a, b in numeric_pairs(kinds)
    }
    keys: list[tuple[str, ...]] = [(c.name,) for c in columns if c.unique]
    keys += [
        pair for j, pair in enumerate(pairs) if _is_key(int(second[f"pair_{j}"]), rows, options)
    ]
    return TableProfile(rows, columns, correlations, keys, rows < options.exact_distinct_below)


def profile(df: DataFrame, options: ProfileOptions | None = None) -> TableProfile:
    """The profile of ``df`` (see the module): one aggregation, and one more for key pairs."""
    options = options or ProfileOptions()
    return profile_of_states(df, states(df, options), options)
