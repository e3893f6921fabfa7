"""The column profile of a table, computed with Spark in two passes over the data.

Pass 1 is one aggregation: per column the count, missing values, min and max, mean, standard
deviation, quartiles (``percentile_approx``), string lengths and distinct count, and the Pearson
correlation of every pair of numeric columns. Pass 2 is one grouped aggregation over the rows
turned into (kind, column, value) entries: the values, their patterns, their histogram bins
(with pass 1's min and max), the outliers (with pass 1's quartiles) and the values of candidate
key pairs, counted and ranked so that only the ``top_n`` of each kind and column reach the driver.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
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

QUARTILE_ACCURACY = 10_000  # percentile_approx: relative error at most 1/10,000 of the rows
APPROX_DISTINCT_RSD = 0.02  # approx_count_distinct's relative standard deviation
MAX_KEY_PAIRS = 3  # column pairs tested as candidate keys, those of most distinct values first
NEARLY_UNIQUE = 0.95  # a column whose estimated distinct count is this share of the rows or more
# is left out of the pairs (if it is a key, it is one alone)
VALUE, PATTERN, BIN, OUTLIER, PAIR = "value", "pattern", "bin", "outlier", "pair"


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


def _pass_one(df: DataFrame, kinds: dict[str, str | None], options: ProfileOptions) -> list[Column]:
    aggs: list[Column] = [F.count(F.lit(1)).alias("_rows")]
    for i, (name, kind) in enumerate(kinds.items()):
        col = F.col(f"`{name}`")
        missing = F.sum(_missing(col, kind, options.sentinels).cast("long"))
        aggs += [F.count(col).alias(f"{i}_count"), missing.alias(f"{i}_missing")]
        if kind is None:
            continue
        # The estimate: the exact count comes with pass 2's grouped values.
        distinct = F.approx_count_distinct(col, APPROX_DISTINCT_RSD)
        aggs += [F.min(col).alias(f"{i}_min"), F.max(col).alias(f"{i}_max")]
        aggs.append(distinct.alias(f"{i}_distinct"))
        if kind == "numeric":
            number = col.cast("double")
            quartiles = F.percentile_approx(number, [0.25, 0.5, 0.75], QUARTILE_ACCURACY)
            aggs += [F.avg(number).alias(f"{i}_mean"), F.stddev_samp(number).alias(f"{i}_sd")]
            aggs.append(quartiles.alias(f"{i}_quartiles"))
        elif kind == "string":
            length = F.length(col)
            aggs += [F.min(length).alias(f"{i}_minlen"), F.max(length).alias(f"{i}_maxlen")]
            aggs.append(F.avg(length).alias(f"{i}_avglen"))
    numeric = [name for name, kind in kinds.items() if kind == "numeric"]
    for a, b in itertools.combinations(numeric, 2):
        corr = _pearson(F.col(f"`{a}`").cast("double"), F.col(f"`{b}`").cast("double"))
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


def _entry(kind: str, index: int, value: Column, when: Column) -> Column:
    entry = F.struct(F.lit(kind).alias("k"), F.lit(index).alias("i"), value.alias("v"))
    return F.when(when, entry)


def _bin(col: Column, low: float, high: float, bins: int) -> Column:
    if high <= low:
        return F.lit(0)
    width = (high - low) / bins
    return F.least(F.floor((col.cast("double") - F.lit(low)) / F.lit(width)), F.lit(bins - 1))


def _pass_two_entries(
    kinds: dict[str, str | None],
    first: dict[str, Any],
    pairs: list[tuple[str, str]],
    options: ProfileOptions,
) -> list[Column]:
    entries: list[Column] = []
    for i, (name, kind) in enumerate(kinds.items()):
        if kind is None:
            continue
        col = F.col(f"`{name}`")
        present = col.isNotNull()
        entries.append(_entry(VALUE, i, col.cast("string"), present))
        if kind == "string":
            entries.append(_entry(PATTERN, i, pattern(col), present))
        if kind == "numeric" and first[f"{i}_min"] is not None:
            low, high = float(first[f"{i}_min"]), float(first[f"{i}_max"])
            entries.append(
                _entry(BIN, i, _bin(col, low, high, options.bins).cast("string"), present)
            )
            q1, _, q3 = first[f"{i}_quartiles"]
            fence = 1.5 * (q3 - q1)
            number = col.cast("double")
            outside = (number < q1 - fence) | (number > q3 + fence)
            entries.append(_entry(OUTLIER, i, F.lit(""), present & outside))
    for j, (a, b) in enumerate(pairs):
        both = F.col(f"`{a}`").isNotNull() & F.col(f"`{b}`").isNotNull()
        joined = F.to_json(F.array(F.col(f"`{a}`").cast("string"), F.col(f"`{b}`").cast("string")))
        entries.append(_entry(PAIR, j, joined, both))
    return entries


def _pass_two(
    df: DataFrame,
    kinds: dict[str, str | None],
    first: dict[str, Any],
    pairs: list[tuple[str, str]],
    options: ProfileOptions,
) -> tuple[dict[tuple[str, int], list[tuple[str, int]]], dict[int, int]]:
    """(kind, column index or pair number) -> its top ``top_n`` (value, count), most first; and
    column index -> its exact distinct count."""
    entries = _pass_two_entries(kinds, first, pairs, options)
    if not entries:
        return {}, {}
    # explode, then drop the nulls: filtering the array first (a lambda) costs 4x as much
    exploded = df.select(F.explode(F.array(*entries)).alias("e")).where(F.col("e").isNotNull())
    counted = exploded.groupBy("e.k", "e.i", "e.v").count()
    groups = F.count(F.lit(1)).over(Window.partitionBy("k", "i"))  # distinct values
    counted = counted.withColumn("_groups", groups)
    ranking = Window.partitionBy("k", "i").orderBy(F.desc("count"), F.asc("v"))
    # Bins: all of them (at most ``bins``); the rest: the top ``top_n``.
    limit = F.when(F.col("k") == BIN, F.lit(options.bins)).otherwise(F.lit(options.top_n))
    top = counted.withColumn("_rank", F.row_number().over(ranking)).where(F.col("_rank") <= limit)
    result: dict[tuple[str, int], list[tuple[str, int]]] = {}
    distinct: dict[int, int] = {}
    for row in top.orderBy("k", "i", "_rank").collect():
        result.setdefault((row["k"], row["i"]), []).append((row["v"], int(row["count"])))
        if row["k"] == VALUE:
            distinct[row["i"]] = int(row["_groups"])
    return result, distinct


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


def _histogram(
    counts: list[tuple[str, int]], low: float, high: float, bins: int
) -> list[tuple[float, float, int]]:
    """Every bin's (lower edge, upper edge, count), empty bins included."""
    if high <= low:
        return [(low, high, sum(count for _, count in counts))]
    width = (high - low) / bins
    found = {int(float(value)): count for value, count in counts}
    return [(low + b * width, low + (b + 1) * width, found.get(b, 0)) for b in range(bins)]


def _column(
    i: int,
    name: str,
    data_type: DataType,
    first: dict[str, Any],
    second: dict[tuple[str, int], list[tuple[str, int]]],
    options: ProfileOptions,
    exact: dict[int, int] | None,
) -> ColumnProfile:
    rows, kind = first["_rows"], _kind(data_type)
    count, missing = int(first[f"{i}_count"]), int(first[f"{i}_missing"] or 0)
    density = (rows - missing) / rows if rows else None
    if kind is None:
        return ColumnProfile(name, data_type.simpleString(), count, missing, density)
    top = second.get((VALUE, i), [])
    stats: dict[str, Any] = {
        "minimum": first[f"{i}_min"], "maximum": first[f"{i}_max"],
        "distinct": exact.get(i, 0) if exact is not None else int(first[f"{i}_distinct"]),
        "distinct_exact": exact is not None, "top_values": top,
        "unique": rows > 0 and count == rows and bool(top) and top[0][1] == 1,
    }  # fmt: skip
    if kind == "numeric":
        q1, median, q3 = first[f"{i}_quartiles"] or (None, None, None)
        stats.update(mean=first[f"{i}_mean"], stddev=first[f"{i}_sd"], q1=q1, median=median, q3=q3)
        stats["outliers"] = sum(n for _, n in second.get((OUTLIER, i), []))
        if stats["minimum"] is not None:
            low, high = float(stats["minimum"]), float(stats["maximum"])
            stats["histogram"] = _histogram(second.get((BIN, i), []), low, high, options.bins)
    elif kind == "string":
        stats.update(min_length=first[f"{i}_minlen"], max_length=first[f"{i}_maxlen"])
        stats.update(avg_length=first[f"{i}_avglen"], patterns=second.get((PATTERN, i), []))
    return ColumnProfile(name, data_type.simpleString(), count, missing, density, **stats)


def profile(df: DataFrame, options: ProfileOptions | None = None) -> TableProfile:
    """The profile of ``df`` in two passes (see the module)."""
    options = options or ProfileOptions()
    fields = df.schema.fields
    kinds = {f.name: _kind(f.dataType) for f in fields}
    result = df.agg(*_pass_one(df, kinds, options)).first()
    assert result is not None  # a global aggregation has one row
    first = result.asDict()
    rows = int(first["_rows"])
    pairs = _key_pairs(kinds, first, rows) if rows else []
    second, counted = _pass_two(df, kinds, first, pairs, options) if rows else ({}, {})
    exact = counted if rows < options.exact_distinct_below else None
    columns = [
        _column(i, f.name, f.dataType, first, second, options, exact) for i, f in enumerate(fields)
    ]
    numeric = [name for name, kind in kinds.items() if kind == "numeric"]
    correlations = {
        (a, b): first[f"corr_{numeric.index(a)}_{numeric.index(b)}"]
        for a, b in itertools.combinations(numeric, 2)
    }
    keys: list[tuple[str, ...]] = [(c.name,) for c in columns if c.unique]
    keys += [pair for j, pair in enumerate(pairs) if second.get((PAIR, j), [("", 2)])[0][1] == 1]
    return TableProfile(rows, columns, correlations, keys)
