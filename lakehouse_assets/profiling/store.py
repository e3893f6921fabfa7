"""Taking a table's profile: computed from its current snapshot, appended to the Delta table
``<root>/profiles/<layer>__<table>`` (one row per column per profile, so drift can be queried),
and returned as Dagster metadata. After every write of a silver or gold table, and nightly for
bronze (``schedules/profiles.py``), as ``LAKEHOUSE_PROFILE`` says."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.profiling.model import ProfileOptions, TableProfile
from lakehouse_assets.profiling.report import profile_metadata, profile_rows
from lakehouse_assets.profiling.transforms import profile
from resources import LakeResource

ENV_PROFILE = "LAKEHOUSE_PROFILE"
PROFILE_MODES = ("materialization", "schedule", "off")
PROFILES = "profiles"  # the profiles' folder under the lake root


def profile_mode(environ: Mapping[str, str] | None = None) -> str:
    """When tables are profiled: ``materialization`` (silver and gold after each write, bronze
    nightly: the default), ``schedule`` (every table nightly) or ``off``."""
    mode = (os.environ if environ is None else environ).get(ENV_PROFILE) or PROFILE_MODES[0]
    if mode not in PROFILE_MODES:
        raise ValueError(f"{ENV_PROFILE} must be one of {', '.join(PROFILE_MODES)}, got {mode!r}")
    return mode


def profiles_table(layer: str, table: str) -> str:
    """The name of the table's profiles table, under ``<root>/profiles``."""
    return f"{layer}__{table}"


def take_profile(
    lake: LakeResource,
    spark: SparkSession,
    layer: str,
    table: str,
    options: ProfileOptions | None = None,
) -> TableProfile:
    """Profile ``<layer>.<table>`` and append the profile to its profiles table.

    Raises:
        FileNotFoundError: the table does not exist.
    """
    rows = lake.read(spark, layer, table)
    taken = profile(rows, options)
    stored = profile_rows(taken, datetime.now(UTC), lake.version(layer, table))
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
