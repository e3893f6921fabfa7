"""Pure silver transforms of the fitness pipeline (rules: ``docs/fitness_pipeline.md``)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakehouse_assets.validation import JsonField, parse_csv, parse_json

USER_INFO_FIELDS = (
    JsonField("user_id", "integer"),
    JsonField("update_type", "string", allowed=("new", "update", "delete")),
    JsonField("timestamp", "number"),
    JsonField("dob", "string", required=False),
    JsonField("sex", "string", required=False),
    JsonField("gender", "string", required=False),
    JsonField("first_name", "string", required=False),
    JsonField("last_name", "string", required=False),
    JsonField("street_address", "string", required=False, path="$.address.street_address"),
    JsonField("city", "string", required=False, path="$.address.city"),
    JsonField("state", "string", required=False, path="$.address.state"),
    JsonField("zip", "integer", required=False, path="$.address.zip"),
)
WORKOUT_FIELDS = (
    JsonField("user_id", "integer"),
    JsonField("workout_id", "integer"),
    JsonField("session_id", "integer"),
    JsonField("action", "string", allowed=("start", "stop")),
    JsonField("timestamp", "number"),
)
BPM_FIELDS = (
    JsonField("device_id", "integer"),
    JsonField("time", "integer"),
    JsonField("heartrate", "number", required=False),
)
DOB_FORMAT = "MM/dd/yyyy"


def _later_record_first() -> list[Column]:
    """Among records of one key, the later Kafka record wins (partition, then offset)."""
    return [F.col("partition").desc(), F.col("offset").desc()]


def _epoch_to_timestamp(seconds: Column) -> Column:
    """Epoch seconds (integer or decimal) as a timestamp, to the microsecond (no float rounding)."""
    return F.timestamp_micros((seconds * 1_000_000).cast("bigint"))


def _dob(text: Column) -> Column:
    return F.to_date(F.try_to_timestamp(text, F.lit(DOB_FORMAT)))


def _earlier_record_first() -> list[Column]:
    """Among records of one key, the earlier Kafka record wins (partition, then offset)."""
    return [F.col("partition").asc(), F.col("offset").asc()]


def _latest(rows: DataFrame, keys: Sequence[str], order: Sequence[Column]) -> DataFrame:
    """One row per ``keys``: the first in ``order``."""
    window = Window.partitionBy(*keys).orderBy(*order)
    return rows.withColumn("_rank", F.row_number().over(window)).where("_rank = 1").drop("_rank")


def parse_user_info(records: DataFrame) -> DataFrame:
    """``user_info`` bronze records, typed, with a rejection ``reason``."""
    bad_dob = F.col("dob").isNotNull() & _dob(F.col("dob")).isNull()
    return parse_json(records, USER_INFO_FIELDS, extra=[(bad_dob, "bad dob")])


def parse_workout(records: DataFrame) -> DataFrame:
    """``workout`` bronze records, typed, with a rejection ``reason``."""
    return parse_json(records, WORKOUT_FIELDS)


def parse_bpm(records: DataFrame) -> DataFrame:
    """``bpm`` bronze records, typed, with a rejection ``reason``."""
    return parse_json(records, BPM_FIELDS)


def parse_registered_users(rows: DataFrame) -> DataFrame:
    """``registered_users`` landing rows, typed, with a rejection ``reason``."""
    columns = ("user_id", "device_id", "mac_address", "registration_timestamp")
    return parse_csv(rows, columns, numeric={"user_id", "device_id", "registration_timestamp"})


def parse_gym_logins(rows: DataFrame) -> DataFrame:
    """``gym_logins`` landing rows, typed, with a rejection ``reason``."""
    return parse_csv(rows, ("mac_address", "gym", "login", "logout"), {"login", "logout"})


def users(registrations: DataFrame) -> DataFrame:
    """Every registration (valid ``registered_users`` rows): one row per ``(user_id,
    registration_timestamp)``; of one registration given twice, the later ingested wins."""
    order = [F.col("ingested_at").desc(), F.col("source_file").desc(), F.col("device_id").desc()]
    latest = _latest(registrations, ["user_id", "registration_timestamp"], order)
    return latest.select(
        "user_id",
        "device_id",
        "mac_address",
        F.timestamp_seconds("registration_timestamp").alias("registration_timestamp"),
    )


def in_force(users: DataFrame, held: str) -> DataFrame:
    """When each registration holds ``held`` (``device_id`` or ``mac_address``) for its user:
    ``user_id``, ``held``, ``since`` (its ``registration_timestamp``) and ``until``, the user's
    next registration or the next registration of the same ``held`` value by anyone (the device
    handed on), whichever is first; null while it is in force. A tie on the timestamp goes to
    the higher user id. Nothing holds a value before its first registration."""
    ts = F.col("registration_timestamp")
    by_user = Window.partitionBy("user_id").orderBy(ts)
    by_held = Window.partitionBy(held).orderBy(ts, F.col("user_id"))
    return users.select(
        "user_id",
        held,
        ts.alias("since"),
        F.least(F.lead(ts).over(by_user), F.lead(ts).over(by_held)).alias("until"),
    )


def held_at(rows: DataFrame, holders: DataFrame, on: str, time: str) -> DataFrame:
    """``rows`` joined on ``on`` (``user_id``, or the held column) to the registrations of
    ``holders`` (``in_force``) in force at the rows' ``time``; rows without one are left out."""
    at = F.col(time)
    holding = (F.col("since") <= at) & (F.col("until").isNull() | (at < F.col("until")))
    return rows.join(holders, on).where(holding).drop("since", "until")


def gym_logs(logins: DataFrame) -> DataFrame:
    """One row per visit ``(mac_address, gym, login)`` with the latest logout seen."""
    visits = logins.groupBy("mac_address", "gym", "login").agg(F.max("logout").alias("logout"))
    return visits.select(
        "mac_address",
        "gym",
        F.timestamp_seconds("login").alias("login"),
        F.timestamp_seconds("logout").alias("logout"),
    )


def latest_profiles(events: DataFrame) -> DataFrame:
    """Per user, the newest profile event (by ``timestamp``, then the later Kafka record), with
    ``deleted`` true when that event is a delete (SCD type 1)."""
    newest = _latest(events, ["user_id"], [F.col("timestamp").desc(), *_later_record_first()])
    return newest.select(
        "user_id",
        _dob(F.col("dob")).alias("dob"),
        "sex",
        "gender",
        "first_name",
        "last_name",
        "street_address",
        "city",
        "state",
        "zip",
        _epoch_to_timestamp(F.col("timestamp")).alias("updated"),
        (F.col("update_type") == "delete").alias("deleted"),
    )


def heart_rate(readings: DataFrame) -> DataFrame:
    """One row per ``(device_id, time)``, of its first record (a reading is recorded once: a
    later record of it is a re-delivery); ``valid`` when the heart rate is present and
    positive."""
    latest = _latest(readings, ["device_id", "time"], _earlier_record_first())
    rate = F.col("heartrate").cast("double")
    return latest.select(
        "device_id",
        F.timestamp_seconds("time").alias("time"),
        rate.alias("heartrate"),
        F.coalesce(rate > 0, F.lit(False)).alias("valid"),
    )


def workouts(actions: DataFrame) -> DataFrame:
    """One row per ``(user_id, workout_id, session_id, action)`` with its time."""
    keys = ["user_id", "workout_id", "session_id", "action"]
    latest = _latest(actions, keys, _later_record_first())
    return latest.select(*keys, _epoch_to_timestamp(F.col("timestamp")).alias("time"))


WORKOUT_KEYS = ["user_id", "workout_id", "session_id"]
MAX_WORKOUT = "INTERVAL 3 HOURS"
AGE_BINS = ((18, "under 18"), (25, "18-25"), (35, "25-35"), (45, "35-45"), (55, "45-55"),
            (65, "55-65"), (75, "65-75"), (85, "75-85"), (95, "85-95"))  # fmt: skip


def completed_workouts(actions: DataFrame) -> DataFrame:
    """A start and its stop, per ``(user_id, workout_id, session_id)``, when
    ``start < stop <= start + 3 hours``."""
    starts = actions.where("action = 'start'").select(
        *WORKOUT_KEYS, F.col("time").alias("start_time")
    )
    stops = actions.where("action = 'stop'").select(*WORKOUT_KEYS, F.col("time").alias("end_time"))
    paired = starts.join(stops, WORKOUT_KEYS)
    return paired.where(f"start_time < end_time AND end_time <= start_time + {MAX_WORKOUT}").select(
        *WORKOUT_KEYS, "start_time", "end_time"
    )


def workout_bpm(completed: DataFrame, readings: DataFrame, users: DataFrame) -> DataFrame:
    """The valid readings within ``(start_time, end_time]`` of each workout, of the device its
    user had registered at the reading's time (``in_force``)."""
    valid = readings.where("valid").select("device_id", "time", "heartrate")
    owned = held_at(valid, in_force(users, "device_id"), "device_id", "time")
    joined = completed.join(owned, "user_id").where("start_time < time AND time <= end_time")
    return joined.select(*WORKOUT_KEYS, "start_time", "end_time", "time", "heartrate")


def age_bin(age: Column) -> Column:
    """The age bin of whole years ``age`` (null: ``invalid age``)."""
    binned = F.when(age.isNull(), F.lit("invalid age"))
    for upper, label in AGE_BINS:
        binned = binned.when(age < upper, F.lit(label))
    return binned.otherwise(F.lit("95+"))


def user_bins(profiles: DataFrame, as_of: Column) -> DataFrame:
    """Per profile: the age bin at ``as_of`` (whole years since ``dob``), gender, city, state."""
    dob = F.col("dob")
    before_birthday = (F.month(as_of) < F.month(dob)) | (
        (F.month(as_of) == F.month(dob)) & (F.dayofmonth(as_of) < F.dayofmonth(dob))
    )
    age = F.year(as_of) - F.year(dob) - before_birthday.cast("int")
    return profiles.select("user_id", age_bin(age).alias("age"), "gender", "city", "state")
