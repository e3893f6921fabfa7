"""The column profile of a table, computed with Spark in two aggregations over the data.

Neither pass groups or sorts the rows: per column, the statistics that need more than a sum are
kept in mergeable sketches (Apache DataSketches, built into Spark), which are exact while a
column is small and estimates with known error above that.

Pass 1, one aggregation: per column the count, missing values, min and max, mean, standard
deviation, string lengths; the distinct count (a theta sketch: exact below
``exact_distinct_below`` distinct values); the most frequent values (a frequent-items sketch,
``approx_top_k``: exact counts for every value while a column has at most
``exact_frequencies_below`` distinct values, so the patterns of such a column are counted from
them on the driver); the quartiles (a KLL sketch); and the Pearson correlation of every pair of
numeric columns.

Pass 2, one aggregation with pass 1's results: the histogram bins (between min and max) and the
outliers (beyond 1.5 IQR from the quartiles) of each numeric column, counted exactly; the
distinct count of candidate key pairs; and the patterns of string columns with too many values
for pass 1's exact counts.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from pyspark.sql import DataFrame
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
    exact_frequencies,
    key_pairs,
    pass_one,
    pass_two,
    prepared_one,
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


def _histogram(
    second: dict[str, Any], i: int, low: float, high: float, bins: int
) -> list[tuple[float, float, int]]:
    """Every bin's (lower edge, upper edge, count), empty bins included."""
    counts = [int(second[f"{i}_bin_{b}"]) for b in range(bins)]
    if high <= low:
        return [(low, high, sum(counts))]
    width = (high - low) / bins
    return [(low + b * width, low + (b + 1) * width, counts[b]) for b in range(bins)]


def _column(
    i: int,
    name: str,
    data_type: DataType,
    first: dict[str, Any],
    second: dict[str, Any],
    options: ProfileOptions,
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
        q1, median, q3 = first[f"{i}_quartiles"] or (None, None, None)
        stats.update(mean=first[f"{i}_mean"], stddev=first[f"{i}_sd"], q1=q1, median=median, q3=q3)
        if stats["minimum"] is not None:
            low, high = float(stats["minimum"]), float(stats["maximum"])
            stats["histogram"] = _histogram(second, i, low, high, options.bins)
            stats["outliers"] = int(second[f"{i}_outliers"])
    elif kind == "string":
        stats.update(min_length=first[f"{i}_minlen"], max_length=first[f"{i}_maxlen"])
        stats["avg_length"] = first[f"{i}_avglen"]
        if exact:
            stats["patterns"] = _patterns(first[f"{i}_top"], options.top_n)
        elif rows:
            stats["patterns"] = _ranked(second[f"{i}_patterns"], options.top_n)
    return ColumnProfile(name, data_type.simpleString(), count, missing, density, **stats)


def profile(df: DataFrame, options: ProfileOptions | None = None) -> TableProfile:
    """The profile of ``df`` in two aggregations (see the module)."""
    options = options or ProfileOptions()
    fields = df.schema.fields
    kinds = {f.name: _kind(f.dataType) for f in fields}
    result = prepared_one(df, kinds, options).agg(*pass_one(kinds, options)).first()
    assert result is not None  # a global aggregation has one row
    first = result.asDict()
    rows = int(first["_rows"])
    pairs = key_pairs(kinds, first, rows) if rows else []
    second_pass = pass_two(df, kinds, first, pairs, options) if rows else None
    second_row = second_pass.first() if second_pass is not None else None
    second = second_row.asDict() if second_row is not None else {}
    columns = [_column(i, f.name, f.dataType, first, second, options) for i, f in enumerate(fields)]
    numeric = [name for name, kind in kinds.items() if kind == "numeric"]
    correlations = {
        (a, b): first[f"corr_{numeric.index(a)}_{numeric.index(b)}"]
        for a, b in itertools.combinations(numeric, 2)
    }
    keys: list[tuple[str, ...]] = [(c.name,) for c in columns if c.unique]
    keys += [
        pair for j, pair in enumerate(pairs) if _is_key(int(second[f"pair_{j}"]), rows, options)
    ]
    return TableProfile(rows, columns, correlations, keys, rows < options.exact_distinct_below)
