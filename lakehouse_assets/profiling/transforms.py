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
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
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

QUANTILE_K = 1_000  # the KLL sketch's size: quartiles within about 0.3% of the rows in rank
MAX_KEY_PAIRS = 3  # column pairs tested as candidate keys, those of most distinct values first
NEARLY_UNIQUE = 0.95  # a column whose estimated distinct count is this share of the rows or more
# is left out of the pairs (if it is a key, it is one alone)
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


def _missing(column: Column, kind: str | None, sentinels: Sequence[str]) -> Column:
    if kind != "string":
        return column.isNull()
    return column.isNull() | column.isin("", *sentinels)


def _theta_entries(exact_below: int) -> int:
    """The theta sketch's log2 of nominal entries: room for ``exact_below`` values (4 to 26)."""
    return min(max(math.ceil(math.log2(max(exact_below, 2))), 4), 26)


def _distinct(hashed: Column, options: ProfileOptions) -> Column:
    """The distinct count of the non-null values hashed to longs (the theta sketch takes longs,
    not every type)."""
    sketch = F.theta_sketch_agg(hashed, _theta_entries(options.exact_distinct_below))
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


def _prepared_one(
    df: DataFrame, kinds: dict[str, str | None], options: ProfileOptions
) -> DataFrame:
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


def _pass_one(kinds: dict[str, str | None], options: ProfileOptions) -> list[Column]:
    """Pass 1's aggregations, over ``_prepared_one``."""
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


def _fences(first: dict[str, Any], i: int) -> tuple[float, float]:
    q1, _, q3 = first[f"{i}_quartiles"]
    return q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)


def _exact_frequencies(first: dict[str, Any], i: int, options: ProfileOptions) -> bool:
    distinct = first[f"{i}_distinct"]
    return distinct < options.exact_distinct_below and distinct <= options.exact_frequencies_below


def _pass_two(
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
            below, above = _fences(first, i)
            number = col.cast("double")
            prepared.append(_bin(col, low, high, options.bins).alias(f"b{i}"))
            prepared.append(((number < below) | (number > above)).alias(f"o{i}"))
            binned = F.col(f"b{i}")
            aggs += [F.count_if(binned == b).alias(f"{i}_bin_{b}") for b in range(options.bins)]
            aggs.append(F.count_if(f"o{i}").alias(f"{i}_outliers"))
        elif kind == "string" and not _exact_frequencies(first, i, options):
            prepared.append(pattern(col).alias(f"p{i}"))
            aggs.append(_frequent(F.col(f"p{i}"), options).alias(f"{i}_patterns"))
    for j, (a, b) in enumerate(pairs):
        prepared.append(_hash(F.col(f"`{a}`"), F.col(f"`{b}`")).alias(f"k{j}"))
        aggs.append(_distinct(F.col(f"k{j}"), options).alias(f"pair_{j}"))
    return df.select(*prepared).agg(*aggs) if aggs else None


def _key_pairs(
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


def _is_key(distinct: int, rows: int, options: ProfileOptions) -> bool:
    """Whether a column or pair without nulls and with ``distinct`` values is a key: exactly
    when the count is exact, within the estimate's error otherwise."""
    if rows < options.exact_distinct_below:
        return distinct == rows
    error = KEY_TOLERANCE / math.sqrt(2 ** _theta_entries(options.exact_distinct_below))
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
    distinct, exact = int(first[f"{i}_distinct"]), _exact_frequencies(first, i, options)
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
    result = _prepared_one(df, kinds, options).agg(*_pass_one(kinds, options)).first()
    assert result is not None  # a global aggregation has one row
    first = result.asDict()
    rows = int(first["_rows"])
    pairs = _key_pairs(kinds, first, rows) if rows else []
    second_pass = _pass_two(df, kinds, first, pairs, options) if rows else None
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
