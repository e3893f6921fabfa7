"""Pure gold transforms: the Workout BPM Summary and the Gym Summary, per UTC day."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakehouse_assets.constants import DATE
from lakehouse_assets.fitness.silver.transforms import WORKOUT_KEYS, held_at, in_force

GOLD_PARTITION = DATE
GYM_KEYS = ["gym", "mac_address", GOLD_PARTITION]


def _minutes(start: Column, end: Column) -> Column:
    return (F.unix_micros(end) - F.unix_micros(start)) / 60_000_000


def workout_bpm_summary(workout_bpm: DataFrame, user_bins: DataFrame) -> DataFrame:
    """One row per completed workout with at least one valid reading, dated by its start.

    Args:
        workout_bpm: the valid readings of each completed workout (silver ``workout_bpm``).
        user_bins: age bin, gender, city and state per user; users without one get nulls.
    """
    stats = workout_bpm.groupBy(*WORKOUT_KEYS, "start_time").agg(
        F.min("heartrate").alias("min_bpm"),
        F.avg("heartrate").alias("avg_bpm"),
        F.max("heartrate").alias("max_bpm"),
        F.count("*").alias("num_recordings"),
    )
    profiles = user_bins.select("user_id", "age", "gender", "city", "state")
    return stats.join(profiles, "user_id", "left").select(
        "user_id",
        F.to_date("start_time").alias(GOLD_PARTITION),
        "workout_id",
        "session_id",
        "age",
        "gender",
        "city",
        "state",
        "min_bpm",
        "avg_bpm",
        "max_bpm",
        "num_recordings",
    )


def gym_summary(gym_logs: DataFrame, completed: DataFrame, users: DataFrame) -> DataFrame:
    """Per ``(gym, mac_address, day of login)``: minutes in the gym over that day's visits, and
    minutes of the completed workouts that start within one of those visits, of the user whose
    phone the mac was at the workout's start (each workout once, even if visits overlap); both
    rounded to 2 decimals."""
    visits = gym_logs.withColumn(GOLD_PARTITION, F.to_date("login"))
    in_gym = visits.groupBy(*GYM_KEYS).agg(
        F.sum(_minutes(F.col("login"), F.col("logout"))).alias("minutes_in_gym")
    )
    workouts = completed.select(*WORKOUT_KEYS, "start_time", "end_time")
    # The mac of the phone the workout's user had registered at its start.
    phones = held_at(workouts, in_force(users, "mac_address"), "user_id", "start_time")
    inside = visits.join(phones, "mac_address").where(
        "login <= start_time AND start_time <= logout"
    )
    exercising = (
        inside.select(*GYM_KEYS, *WORKOUT_KEYS, "start_time", "end_time")
        .distinct()
        .groupBy(*GYM_KEYS)
        .agg(F.sum(_minutes(F.col("start_time"), F.col("end_time"))).alias("minutes_exercising"))
    )
    return in_gym.join(exercising, GYM_KEYS, "left").select(
        *GYM_KEYS,
        F.round("minutes_in_gym", 2).alias("minutes_in_gym"),
        F.round(F.coalesce("minutes_exercising", F.lit(0.0)), 2).alias("minutes_exercising"),
    )
