"""``silver.workout_bpm``: each completed workout's valid readings, of the device its user had
registered at the time; new workouts, late readings and new registrations each bring their rows."""

import dataclasses
from collections.abc import Mapping

import dagster as dg
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lakehouse_assets.checks.outcome import Outcome
from lakehouse_assets.checks.reconciliation import table_reconciliation
from lakehouse_assets.checks.results import (
    checked_days,
    reconciliation_result,
    reconciliation_spec,
    require_upstream_checks_passed,
    written_rows,
)
from lakehouse_assets.constants import DATE, SILVER, asset_key, consumer_app_id
from lakehouse_assets.fitness.names import (
    COMPLETED_WORKOUTS,
    DATED_BY,
    HEART_RATE,
    USERS,
    WORKOUT_BPM,
)
from lakehouse_assets.fitness.silver import transforms
from lakehouse_assets.fitness.silver.tables import derived_asset, derived_result
from lakehouse_assets.refinement.changes import SilverConfig, read_changes
from lakehouse_assets.refinement.layout import (
    dated,
    days_of,
    days_of_each,
    layout,
    read_days,
    spread,
)
from resources import LakeResource, SparkResource
from resources.codegen import fit_code_generation

UPSTREAM = (COMPLETED_WORKOUTS, HEART_RATE, USERS)
DAY_OF = DATED_BY[WORKOUT_BPM]  # the column a row's day (its partition) is the date of
READINGS_IN_WORKOUT_BPM = "readings_in_workout_bpm"
READINGS_RECONCILIATION = (
    "Every valid reading of a user's device inside a completed workout of the user (computed "
    "afresh from completed_workouts, heart_rate and users) is in this table: of the workouts "
    "that started on the days the run may have changed; every day's on a run that changed "
    "nothing and on a full refresh."
)


@dataclasses.dataclass(frozen=True)
class Upstream:
    """The step's three upstream tables at the versions it consumes (its markers' versions).

    Every read of a run sees the same rows whatever other runs commit meanwhile (a heart-rate
    run writes readings while a workout run's step runs), so what it merges, the versions its
    markers record and what its reconciliation expects agree; later rows are the next run's.
    """

    lake: LakeResource
    session: SparkSession
    versions: Mapping[str, int]  # silver table -> version

    def read(self, table: str, days: list[str] | None = None) -> DataFrame:
        """``silver.<table>`` at its consumed version (of ``days`` only, when given)."""
        version = self.versions[table]
        if days is None:
            return self.lake.read(self.session, SILVER, table, version=version)
        return read_days(self.lake, self.session, table, days, version)


def _redone_by_registrations(
    upstream: Upstream, changed: DataFrame
) -> tuple[DataFrame, Column] | None:
    """The workouts whose readings registrations ``changed`` (``(user_id, device_id,
    registration_timestamp)`` taken or left) may give or take, and the condition of their
    ``workout_bpm`` rows, which they replace; None when nothing changed.

    A registration decides whose a device's readings are from its time on: of its user's
    readings, and of every user who registered the same device (before it, the device handed
    on). Their workouts ending after the earliest changed registration are computed again.
    """
    micros = F.unix_micros("registration_timestamp").alias("micros")
    touched = changed.select("user_id", "device_id", micros).collect()  # a few registrations
    if not touched:
        return None
    since = min(row.micros for row in touched)
    devices = [row.device_id for row in touched]
    users = upstream.read(USERS)
    holders = users.where(F.col("device_id").isin(devices)).select("user_id").distinct().collect()
    affected = sorted({row.user_id for row in touched} | {row.user_id for row in holders})
    # The same condition picks the workouts to redo and their rows in workout_bpm.
    condition = F.col("user_id").isin(affected) & (
        F.col("end_time") > F.timestamp_micros(F.lit(since))
    )
    return upstream.read(COMPLETED_WORKOUTS).where(condition), condition


def _changed_rows(
    upstream: Upstream,
    new_workouts: DataFrame,
    new_readings: DataFrame,
    users: DataFrame,
    changed: DataFrame,
) -> tuple[DataFrame, Column | None, list[str]]:
    """The ``workout_bpm`` rows that new workouts, new (late) readings and ``changed``
    registrations bring, the condition of the rows they replace (None: they replace none), and
    the start days of the workouts they are of."""
    # A workout lasts at most 3 hours: its readings are on its start day or the next one.
    new_days, reading_days = days_of_each(new_workouts, new_readings)
    their_readings = upstream.read(HEART_RATE, spread(new_days, after=1))
    rows = transforms.workout_bpm(new_workouts, their_readings, users)
    late_days = spread(reading_days, before=1)  # the start days of their workouts
    old_workouts = upstream.read(COMPLETED_WORKOUTS, late_days)
    rows = rows.unionByName(transforms.workout_bpm(old_workouts, new_readings, users))
    redo = _redone_by_registrations(upstream, changed)
    replace, redo_days = None, []
    if redo is not None:
        workouts, replace = redo
        redo_days = days_of(workouts)
        readings = upstream.read(HEART_RATE, spread(redo_days, after=1))
        rows = rows.unionByName(transforms.workout_bpm(workouts, readings, users))
    return rows, replace, sorted({*new_days, *late_days, *redo_days})


def _reconcile_readings(upstream: Upstream, days: list[str] | None) -> Outcome:
    """Whether ``workout_bpm`` holds every reading of the workouts that started on ``days``, as
    computed afresh from its three upstream tables at the versions the run consumed (every
    workout's when None): an incremental
    run checks the days it may have changed, so its cost follows them, not the table's history;
    a run that changed nothing, and a full refresh, check every day."""
    if days == []:
        return Outcome(READINGS_IN_WORKOUT_BPM, 0, [])
    lake, session = upstream.lake, upstream.session
    if days is None:
        completed, readings = upstream.read(COMPLETED_WORKOUTS), upstream.read(HEART_RATE)
        held = lake.read(session, SILVER, WORKOUT_BPM)
    else:
        completed = upstream.read(COMPLETED_WORKOUTS, days)
        readings = upstream.read(HEART_RATE, spread(days, after=1))
        held = read_days(lake, session, WORKOUT_BPM, days)
    expected = transforms.workout_bpm(completed, readings, upstream.read(USERS))
    keys = [*transforms.WORKOUT_KEYS, "time"]
    return table_reconciliation(READINGS_IN_WORKOUT_BPM, WORKOUT_BPM, expected, held, keys)


@dg.asset(
    **derived_asset(
        WORKOUT_BPM,
        UPSTREAM,
        transforms.workout_bpm,
        reconciliation_spec(
            asset_key(SILVER, WORKOUT_BPM), READINGS_IN_WORKOUT_BPM, READINGS_RECONCILIATION
        ),
    )
)
def workout_bpm(
    context: dg.AssetExecutionContext,
    config: SilverConfig,
    spark: SparkResource,
    lake: LakeResource,
) -> dg.MaterializeResult:
    """The valid readings of each completed workout, of the device its user had registered at
    the reading's time; new workouts, late readings and new registrations each bring their rows
    (a registration changes only what follows it)."""
    require_upstream_checks_passed(context)
    session = spark.get_session()
    apps = [consumer_app_id(WORKOUT_BPM, (SILVER, t)) for t in UPSTREAM]
    held = lake.committed_versions(SILVER, WORKOUT_BPM, apps)
    workouts = read_changes(lake, session, WORKOUT_BPM, (SILVER, COMPLETED_WORKOUTS), held=held)
    readings = read_changes(lake, session, WORKOUT_BPM, (SILVER, HEART_RATE), held=held)
    new_workouts, new_readings = workouts.rows, readings.rows
    fit_code_generation(session, workouts.size + readings.size)
    registrations_app, consumed = apps[2], held[apps[2]]
    changed, users_version = lake.changed_values(
        session, SILVER, USERS, consumed, ["user_id", "device_id", "registration_timestamp"]
    )
    fresh = workouts.fresh or readings.fresh or users_version != consumed
    markers = {**workouts.markers, **readings.markers, registrations_app: users_version}
    upstream = Upstream(
        lake,
        session,
        {
            COMPLETED_WORKOUTS: workouts.upstream_version,
            HEART_RATE: readings.upstream_version,
            USERS: users_version,
        },
    )
    changed_days = None  # the start days of the workouts the run may change; None: every day
    key, batch = asset_key(SILVER, WORKOUT_BPM), None
    if config.full_refresh:
        completed, readings = upstream.read(COMPLETED_WORKOUTS), upstream.read(HEART_RATE)
        rows = transforms.workout_bpm(completed, readings, upstream.read(USERS))
        lake.replace(
            SILVER, WORKOUT_BPM, dated(rows, DAY_OF), markers, layout(DAY_OF)
        )  # fmt: skip
    elif fresh or not lake.exists(SILVER, WORKOUT_BPM):
        users = upstream.read(USERS)
        created = not lake.exists(SILVER, WORKOUT_BPM)
        replace = None
        if created:  # nothing consumed yet: the changes read are both tables whole
            rows = transforms.workout_bpm(new_workouts, new_readings, users)
        else:
            rows, replace, changed_days = _changed_rows(
                upstream, new_workouts, new_readings, users, changed
            )
        keys = [*transforms.WORKOUT_KEYS, "time"]
        merged = dated(rows.distinct(), DAY_OF).localCheckpoint()
        lake.merge(
            SILVER, WORKOUT_BPM, merged, keys, markers=markers, partition_by=layout(DAY_OF),
            replace=replace,
        )  # fmt: skip
        batch = written_rows(context, key, merged, created)  # merged by the rules' key
    reconciled = _reconcile_readings(upstream, changed_days)
    written = [(DATE, "in", changed_days)] if changed_days is not None else None
    days = checked_days(context, key, written)
    checks = [reconciliation_result(key, reconciled)]
    return derived_result(lake, session, WORKOUT_BPM, UPSTREAM, batch, days, checks)
