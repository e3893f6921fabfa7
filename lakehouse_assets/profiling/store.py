"""Taking a table's profile: computed from its current snapshot, appended to the Delta table
``<root>/profiles/<layer>__<table>`` (one row per column per profile, so drift can be queried),
and returned as Dagster metadata. Nightly for every table by default (``schedules/profiles.py``);
after every write of a silver or gold table with ``LAKEHOUSE_PROFILE=materialization``. (Every
write shows its columns' nulls and bounds from the Delta log whatever the mode:
``profiling.file_stats``.)

A table partitioned by one column, of ``STATES_FROM_ROWS`` rows or more, keeps each partition's
profile state (``profiling.passes``) in ``<root>/profiles/<layer>__<table>__partitions``, beside
the fingerprint of the partition's data files (from the table's log). A profile reads only the
partitions whose files changed since the last one (a write's days: a merge, an append, a replaced
or vacuumed day alike) and merges their new states with the others', so its cost follows the
data written, not the table's size.
A new schema of the table or new profile options start the states afresh.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import dagster as dg
import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.profiling.model import ProfileOptions, TableProfile
from lakehouse_assets.profiling.passes import GROUP
from lakehouse_assets.profiling.report import profile_metadata, profile_rows
from lakehouse_assets.profiling.transforms import profile, profile_of_states, states
from resources import LakeResource, delta, delta_log
from resources.settings import profile_mode

PROFILES = "profiles"  # the profiles' folder under the lake root
STATES_SUFFIX = "__partitions"  # of the table of a partitioned table's profile states
FILES, SIGNATURE = "_files", "_signature"  # a state's partition fingerprint, schema and options
NULL_PARTITION = "\0null"  # the group of the rows whose partition value is null
# Below this many rows a table is profiled whole in one query, with no states written: keeping
# them (a Delta commit and a second query) costs more than reading a table this small again.
STATES_FROM_ROWS = 100_000


def profiles_table(layer: str, table: str) -> str:
    """The name of the table's profiles table, under ``<root>/profiles``."""
    return f"{layer}__{table}"


def take_profile(
    lake: LakeResource,
    spark: SparkSession,
    layer: str,
    table: str,
    options: ProfileOptions | None = None,
    states_from_rows: int = STATES_FROM_ROWS,
) -> TableProfile:
    """Profile ``<layer>.<table>`` and append the profile to its profiles table (from its
    partitions' states when it has ``states_from_rows`` rows or more; see the module).

    Raises:
        FileNotFoundError: the table does not exist.
    """
    options = options or ProfileOptions()
    snapshot = lake.table(layer, table)
    # the version whose files the partitions' fingerprints name, whatever is committed meanwhile
    rows = delta.read(spark, lake.table_uri(layer, table), version=snapshot.version())
    columns = snapshot.metadata().partition_columns
    if len(columns) == 1 and delta_log.row_count(snapshot) >= max(states_from_rows, 1):
        states_name = profiles_table(layer, table) + STATES_SUFFIX
        taken = _by_partitions(lake, spark, snapshot, states_name, rows, columns[0], options)
    else:
        taken = profile(rows, options)
    stored = profile_rows(taken, datetime.now(UTC), snapshot.version())
    lake.append(PROFILES, profiles_table(layer, table), spark.createDataFrame(stored))
    return taken


def profile_after_write(
    lake: LakeResource, spark: SparkSession, layer: str, table: str
) -> dict[str, dg.MetadataValue]:
    """The profile's metadata for the materialization that just wrote the table (none when
    profiling is off or the table does not exist)."""
    if profile_mode() != "materialization" or not lake.exists(layer, table):
        return {}
    return profile_metadata(take_profile(lake, spark, layer, table))


def partition_files(snapshot: DeltaTable, column: str) -> dict[str, str]:
    """Each partition's value (as text, ``NULL_PARTITION`` for null) -> a fingerprint of its
    data files (their paths, and their deletion vectors if any), from the table's log."""
    actions = pa.table(snapshot.get_add_actions(flatten=True))
    names = ["path", *(n for n in actions.column_names if n.startswith("deletionVector"))]
    files: dict[str, list[str]] = {}
    values = actions[f"partition.{column}"].to_pylist()
    described = zip(*(actions[name].to_pylist() for name in names), strict=True)
    for value, described_file in zip(values, described, strict=True):
        key = NULL_PARTITION if value is None else str(value)
        files.setdefault(key, []).append(repr(described_file))
    return {key: _digest(sorted(paths)) for key, paths in files.items()}


def _digest(parts: list[str]) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _stored_files(lake: LakeResource, name: str, signature: str) -> dict[str, str]:
    """The partitions whose states are kept for the table, with their files' fingerprints (of
    the states taken with this ``signature`` only); read from the log and data of the states'
    table without Spark (it is small)."""
    states_table = lake.find(PROFILES, name)
    if states_table is None or SIGNATURE not in [f.name for f in states_table.schema().fields]:
        return {}
    kept = states_table.to_pyarrow_table(columns=[GROUP, FILES, SIGNATURE]).to_pylist()
    return {row[GROUP]: row[FILES] for row in kept if row[SIGNATURE] == signature}


def _by_partitions(
    lake: LakeResource,
    spark: SparkSession,
    snapshot: DeltaTable,
    states_name: str,
    rows: DataFrame,
    column: str,
    options: ProfileOptions,
) -> TableProfile:
    """The profile of ``rows``, the ``snapshot`` of a table partitioned by ``column``, from the
    states of its partitions (kept in ``profiles/<states_name>``): those whose files changed
    since the last profile taken anew, the others' kept (see the module)."""
    signature = _digest([rows.schema.json(), repr(options)])
    current = partition_files(snapshot, column)
    stored = _stored_files(lake, states_name, signature)
    kept = sorted(key for key, files in current.items() if stored.get(key) == files)
    changed = sorted(set(current) - set(kept))
    if changed or set(stored) != set(kept):
        value = F.col(f"`{column}`")
        group = F.coalesce(value.cast("string"), F.lit(NULL_PARTITION))
        fingerprints = F.create_map(*(F.lit(x) for key in changed for x in (key, current[key])))
        files = fingerprints[F.col(GROUP)] if changed else F.lit(None).cast("string")
        changed_rows = rows.where(group.isin(changed)) if changed else rows.limit(0)
        fresh = states(changed_rows, options, group).select(
            "*", files.alias(FILES), F.lit(signature).alias(SIGNATURE)
        )
        if kept:
            previous = lake.read(spark, PROFILES, states_name)
            fresh = fresh.unionByName(previous.where(F.col(GROUP).isin(kept)))
        lake.replace(PROFILES, states_name, fresh)
    partitions = lake.read(spark, PROFILES, states_name).drop(FILES, SIGNATURE)
    return profile_of_states(rows, partitions, options)
