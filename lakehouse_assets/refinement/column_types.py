"""A table whose columns' types a user declares (``fields``) follows its declaration when it
changes: a column declared wider than it is stored (``integer`` to ``number``) is rewritten in
the wider type before the step writes, a column stored wider than declared takes the declared
values in its type, and any other change stops the step with what to do (a full refresh
rebuilds the table from bronze in the declared types). A value is never cast into a narrower
column, which would cut it silently."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dagster as dg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.constants import SILVER
from resources import LakeResource
from resources.delta_log import spark_schema

# The changes of a column's type a rewrite makes without losing a value (a value beyond the
# wider type fails the cast: ANSI mode).
WIDENINGS = {("bigint", "decimal(20,6)")}


def follow_declared_types(
    lake: LakeResource,
    spark: SparkSession,
    table: str,
    declared: Mapping[str, str],
    partition_by: Sequence[str] = (),
) -> dict[str, str]:
    """Bring the columns of ``silver.<table>`` to their ``declared`` Spark SQL types (a table
    not made yet is made in them); returns the columns stored wider than declared, with their
    type, which the rows written must be cast to (Delta merges no narrower type into them).

    Raises:
        dg.Failure: a column's declared type is not a widening of its stored one.
    """
    found = lake.find(SILVER, table)
    if found is None:
        return {}
    stored = {f.name: f.dataType.simpleString() for f in spark_schema(found).fields}
    changed = {c: (stored[c], t) for c, t in declared.items() if c in stored and stored[c] != t}
    wider = {c: was for c, (was, now) in changed.items() if (now, was) in WIDENINGS}
    changed = {c: types for c, types in changed.items() if c not in wider}
    if not changed:
        return wider
    refused = {c: types for c, types in changed.items() if types not in WIDENINGS}
    if refused:
        columns = "; ".join(f"{c} as {was}, declared {now}" for c, (was, now) in refused.items())
        raise dg.Failure(
            f"silver.{table} stores {columns}: casting its rows would change their values. "
            "Run the step with full_refresh (the silver_full_refresh job) to rebuild the table "
            "from bronze in the declared types."
        )
    rows = lake.read(spark, SILVER, table)
    rows = rows.select(
        *[F.col(c).cast(changed[c][1]).alias(c) if c in changed else F.col(c) for c in rows.columns]
    )
    lake.replace(SILVER, table, rows, partition_by=partition_by)
    return wider
