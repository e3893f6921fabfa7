"""The aggregations of a column profile (see ``lakehouse_assets.profiling.transforms``), named
``<column index>_<statistic>``:

- ``state``: what a group of rows (a partition of a table, or all of a DataFrame) contributes,
  in a form that merges with other groups': counts, sums and extremes, the moments of each
  numeric column and pair, and the sketches (theta for distinct counts, KLL for quantiles,
  frequent items for the most frequent values and patterns);
- ``merged``: the states of all groups merged into one row, with quantiles read from the merged
  quantile sketch at ranks 0.001 apart (the quartiles, and the ranks of the histogram's edges and
  of the outlier fences when they are estimated);
- ``pair_counts``: the distinct count of candidate key pairs, chosen from the merged row.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.profiling.model import ProfileOptions

QUANTILE_K = 1_000  # the KLL sketch's size: quartiles within about 0.3% of the rows in rank
QUANTILE_STEPS = 1_000  # quantiles read from a merged sketch: at ranks 0.001, 0.002, ..., 0.999
MAX_KEY_PAIRS = 3  # column pairs tested as candidate keys, those of most distinct values first
NEARLY_UNIQUE = 0.95  # a column whose estimated distinct count is this share of the rows or more
# is left out of the pairs (if it is a key, it is one alone)
GROUP = "_partition"  # the group of rows a state is of


def _missing(column: Column, kind: str | None, sentinels: Sequence[str]) -> Column:
    if kind != "string":
        return column.isNull()
    return column.isNull() | column.isin("", *sentinels)


def theta_entries(exact_below: int) -> int:
    """The theta sketch's log2 of nominal entries: room for ``exact_below`` values (4 to 26)."""
    return min(max(math.ceil(math.log2(max(exact_below, 2))), 4), 26)


def _hash(*columns: Column) -> Column:
    """The columns' values hashed to a long (the theta sketch takes longs, not every type);
    null when any is null."""
    present = F.lit(True)
    for column in columns:
        present = present & column.isNotNull()
    return F.when(present, F.xxhash64(*columns))


def _accumulated(values: Column, options: ProfileOptions) -> Column:
    """A frequent-items sketch of the values: every value counted exactly while there are at
    most ``exact_frequencies_below``, the heavy hitters beyond."""
    tracked = F.lit(options.exact_frequencies_below)
    return F.call_function("approx_top_k_accumulate", values, tracked)


def _frequent(sketches: Column, options: ProfileOptions) -> Column:
    """The values with their counts, from the frequent-items sketches of every group."""
    tracked = F.lit(options.exact_frequencies_below)
    combined = F.call_function("approx_top_k_combine", sketches, tracked)
    return F.call_function("approx_top_k_estimate", combined, tracked)


def numeric_pairs(kinds: dict[str, str | None]) -> list[tuple[int, int]]:
    """The index pairs of numeric columns whose correlation a profile gives."""
    numeric = [i for i, kind in enumerate(kinds.values()) if kind == "numeric"]
    return list(itertools.combinations(numeric, 2))


def prepared(
    df: DataFrame, kinds: dict[str, str | None], options: ProfileOptions, group: Column
) -> DataFrame:
    """The values ``state`` aggregates, each computed once per row (inside the aggregate
    functions, Spark would evaluate an expression once per function using it): the group
    (``_partition``), the column itself (``c{i}``), whether it is missing (``m{i}``), its hash
    (``h{i}``), as a double (``n{i}``), or its length (``l{i}``) and pattern (``p{i}``)."""
    columns: list[Column] = [group.alias(GROUP)]
    for i, (name, kind) in enumerate(kinds.items()):
        col = F.col(f"`{name}`")
        columns += [col.alias(f"c{i}"), _missing(col, kind, options.sentinels).alias(f"m{i}")]
        if kind is not None:
            columns.append(_hash(col).alias(f"h{i}"))
        if kind == "numeric":
            columns.append(col.cast("double").alias(f"n{i}"))
        elif kind == "string":
            columns += [F.length(col).alias(f"l{i}"), pattern(col).alias(f"p{i}")]
    return df.select(*columns)


def _moments(x: Column) -> Column:
    """The count, mean and sum of squared deviations of the non-null values (merged with
    Chan's formula on the driver: ``transforms.merge_moments``)."""
    count = F.count(x)
    return F.struct(count.alias("n"), F.avg(x).alias("mean"), (F.var_pop(x) * count).alias("m2"))


def _co_moments(x: Column, y: Column) -> Column:
    """The moments of two columns over the rows holding both, and their co-moment."""
    both = x.isNotNull() & y.isNotNull()
    n = F.count_if(both)
    xs, ys = F.when(both, x), F.when(both, y)
    return F.struct(
        n.alias("n"), F.avg(xs).alias("mean_x"), F.avg(ys).alias("mean_y"),
        (F.var_pop(xs) * n).alias("m2_x"), (F.var_pop(ys) * n).alias("m2_y"),
        (F.covar_pop(x, y) * n).alias("c"),
    )  # fmt: skip


def state(kinds: dict[str, str | None], options: ProfileOptions) -> list[Column]:
    """The aggregations of one group's state, over ``prepared``."""
    entries = theta_entries(options.exact_distinct_below)
    aggs: list[Column] = [F.count(F.lit(1)).alias("_rows")]
    for i, kind in enumerate(kinds.values()):
        col = F.col(f"c{i}")
        aggs += [F.count(col).alias(f"{i}_count"), F.count_if(f"m{i}").alias(f"{i}_missing")]
        if kind is None:
            continue
        aggs += [F.min(col).alias(f"{i}_min"), F.max(col).alias(f"{i}_max")]
        aggs.append(F.theta_sketch_agg(F.col(f"h{i}"), entries).alias(f"{i}_theta"))
        aggs.append(_accumulated(col, options).alias(f"{i}_top"))
        if kind == "numeric":
            number = F.col(f"n{i}")
            aggs.append(F.kll_sketch_agg_double(number, QUANTILE_K).alias(f"{i}_kll"))
            aggs.append(_moments(number).alias(f"{i}_moments"))
        elif kind == "string":
            length = F.col(f"l{i}")
            aggs += [F.min(length).alias(f"{i}_minlen"), F.max(length).alias(f"{i}_maxlen")]
            aggs.append(F.sum(length).alias(f"{i}_sumlen"))
            aggs.append(_accumulated(F.col(f"p{i}"), options).alias(f"{i}_patterns"))
    for a, b in numeric_pairs(kinds):
        aggs.append(_co_moments(F.col(f"n{a}"), F.col(f"n{b}")).alias(f"corr_{a}_{b}"))
    return aggs


def merged(states: DataFrame, kinds: dict[str, str | None], options: ProfileOptions) -> DataFrame:
    """One row: the ``states`` (at least one) of every group merged; for each numeric column,
    the values at ranks 1/``QUANTILE_STEPS`` apart (``{i}_quantiles``) from its merged quantile
    sketch (the quartiles among them)."""
    entries = theta_entries(options.exact_distinct_below)
    aggs: list[Column] = [F.sum("_rows").alias("_rows")]
    finals: list[Column] = []
    for i, kind in enumerate(kinds.values()):
        aggs += [F.sum(f"{i}_count").alias(f"{i}_count")]
        aggs += [F.sum(f"{i}_missing").alias(f"{i}_missing")]
        if kind is None:
            continue
        aggs += [F.min(f"{i}_min").alias(f"{i}_min"), F.max(f"{i}_max").alias(f"{i}_max")]
        union = F.theta_union_agg(f"{i}_theta", entries)
        aggs.append(F.theta_sketch_estimate(union).alias(f"{i}_distinct"))
        aggs.append(_frequent(F.col(f"{i}_top"), options).alias(f"{i}_top"))
        if kind == "numeric":
            aggs.append(F.kll_merge_agg_double(f"{i}_kll").alias(f"{i}_kll"))
            aggs.append(F.collect_list(f"{i}_moments").alias(f"{i}_moments"))
            sketch = F.col(f"{i}_kll")
            # an empty sketch has no quantiles (an error): none for a column without values
            found = F.kll_sketch_get_n_double(sketch) > 0
            steps = F.array(*(F.lit(j / QUANTILE_STEPS) for j in range(1, QUANTILE_STEPS)))
            quantiles = F.kll_sketch_get_quantile_double(sketch, steps)
            finals.append(F.when(found, quantiles).alias(f"{i}_quantiles"))
        elif kind == "string":
            aggs += [F.min(f"{i}_minlen").alias(f"{i}_minlen")]
            aggs += [F.max(f"{i}_maxlen").alias(f"{i}_maxlen")]
            aggs += [F.sum(f"{i}_sumlen").alias(f"{i}_sumlen")]
            aggs.append(_frequent(F.col(f"{i}_patterns"), options).alias(f"{i}_patterns"))
    for a, b in numeric_pairs(kinds):
        aggs.append(F.collect_list(f"corr_{a}_{b}").alias(f"corr_{a}_{b}"))
    sketches = [f"{i}_kll" for i, kind in enumerate(kinds.values()) if kind == "numeric"]
    return states.agg(*aggs).select("*", *finals).drop(*sketches)


def pattern(column: Column) -> Column:
    """A string's shape: each digit as ``9``, each letter (any script) as ``A``, the rest kept."""
    return F.regexp_replace(F.regexp_replace(column, r"\p{Nd}", "9"), r"\p{L}", "A")


def text_pattern(text: str) -> str:
    """``pattern`` on the driver: decimal digits (Unicode Nd) as ``9``, letters (L) as ``A``."""
    return "".join("9" if c.isdecimal() else "A" if c.isalpha() else c for c in text)


def exact_frequencies(first: dict[str, Any], i: int, options: ProfileOptions) -> bool:
    """Whether the merged frequent-items sketch of column ``i`` counted every value exactly."""
    distinct = first[f"{i}_distinct"]
    return distinct < options.exact_distinct_below and distinct <= options.exact_frequencies_below


def pair_counts(df: DataFrame, pairs: list[tuple[str, str]], options: ProfileOptions) -> DataFrame:
    """One row: the distinct count of each pair's combinations (``pair_{j}``)."""
    entries = theta_entries(options.exact_distinct_below)
    hashed = [
        _hash(F.col(f"`{a}`"), F.col(f"`{b}`")).alias(f"k{j}") for j, (a, b) in enumerate(pairs)
    ]
    counts = [
        F.theta_sketch_estimate(F.theta_sketch_agg(f"k{j}", entries)).alias(f"pair_{j}")
        for j in range(len(pairs))
    ]
    return df.select(*hashed).agg(*counts)


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
