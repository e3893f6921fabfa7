"""Every setting the project reads from the environment, in one place: the variables' names,
their defaults, and the functions that read and check them (README, "Configuration", lists them
all; ``build_resources`` in ``resources/__init__.py`` gives the resources theirs). Each function
takes the variables to read (the process environment when None) and names the variable in its
error when a value is bad.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Final

ENV_LAKEHOUSE_ROOT: Final = "LAKEHOUSE_ROOT"
ENV_KAFKA_BOOTSTRAP_SERVERS: Final = "KAFKA_BOOTSTRAP_SERVERS"
ENV_SPARK_MASTER: Final = "SPARK_MASTER"
ENV_SPARK_REMOTE: Final = "SPARK_REMOTE"  # Spark's own: the Spark Connect server to use
ENV_SPARK_CONF: Final = "LAKEHOUSE_SPARK_CONF"
ENV_AS_OF_DATE: Final = "LAKEHOUSE_AS_OF_DATE"
ENV_GOLD_START_DATE: Final = "LAKEHOUSE_GOLD_START_DATE"
ENV_SENSOR_INTERVAL_S: Final = "LAKEHOUSE_SENSOR_INTERVAL_S"
ENV_FAIL_ON_DATA_LOSS: Final = "LAKEHOUSE_KAFKA_FAIL_ON_DATA_LOSS"
ENV_LAG_THRESHOLD: Final = "LAKEHOUSE_LAG_THRESHOLD"
ENV_LAG_MAX_WAIT_S: Final = "LAKEHOUSE_LAG_MAX_WAIT_S"
ENV_DOCUMENTS_URL: Final = "LAKEHOUSE_DOCUMENTS_URL"  # route-by-type sources' document store
ENV_MAX_CONCURRENT_STEPS: Final = "LAKEHOUSE_MAX_CONCURRENT_STEPS"
ENV_MAX_CONCURRENT_RUNS: Final = "LAKEHOUSE_MAX_CONCURRENT_RUNS"  # ``lakehouse up``'s instance
ENV_PROFILE: Final = "LAKEHOUSE_PROFILE"
ENV_FRESHNESS_S: Final = "LAKEHOUSE_FRESHNESS_S"
ENV_QUARANTINE_WARN_RATE: Final = "LAKEHOUSE_QUARANTINE_WARN_RATE"
ENV_SOURCES_DIR: Final = "LAKEHOUSE_SOURCES"
ENV_METASTORE: Final = "LAKEHOUSE_METASTORE"  # the catalog's Hive metastore: a folder or a URL
ENV_SCHEMA_PREFIX: Final = "LAKEHOUSE_SCHEMA_PREFIX"  # the lake's schemas: <prefix>_<layer>
# The SQL endpoint's one user and password (read by its authentication class, in Java).
ENV_SQL_USER: Final = "LAKEHOUSE_SQL_USER"
ENV_SQL_PASSWORD: Final = "LAKEHOUSE_SQL_PASSWORD"

DEFAULT_LAKEHOUSE_ROOT: Final = "lake"  # relative to the working directory
DEFAULT_KAFKA_BOOTSTRAP_SERVERS: Final = "127.0.0.1:9092"
DEFAULT_SPARK_MASTER: Final = "local[*]"
DEFAULT_GOLD_START_DATE: Final = "2025-01-01"
DEFAULT_MAX_CONCURRENT_STEPS: Final = 4
PROFILE_MODES: Final = ("materialization", "schedule", "off")
# A profile reads the table (a few Spark queries): off the write path unless asked for.
DEFAULT_PROFILE_MODE: Final = "schedule"
DEFAULT_FRESHNESS_S: Final = 900
DEFAULT_SOURCES_DIR: Final = "sources"
# An embedded Derby metastore beside the project's other local state (the broker's, `up`'s).
DEFAULT_METASTORE: Final = ".lakehouse/metastore"


def spark_conf(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The extra Spark settings of ``LAKEHOUSE_SPARK_CONF`` (a JSON object) in an environment: a
    run's session, a local application, and the Spark Connect server the project starts.

    Raises:
        ValueError: the variable is not a JSON object.
    """
    return parse_spark_conf((os.environ if environ is None else environ).get(ENV_SPARK_CONF))


def parse_spark_conf(raw: str | None) -> dict[str, str]:
    """The Spark settings of ``raw``, the text of ``LAKEHOUSE_SPARK_CONF`` (None or empty: none).

    Raises:
        ValueError: it is not a JSON object.
    """
    raw = raw or "{}"
    try:
        conf = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{ENV_SPARK_CONF} must be a JSON object of Spark settings: {error}"
        ) from error
    if not isinstance(conf, dict):
        raise ValueError(f"{ENV_SPARK_CONF} must be a JSON object, got {raw!r}")
    return {str(key): str(value) for key, value in conf.items()}


def fail_on_data_loss(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a stream whose checkpoint lies outside its topic's log fails
    (``LAKEHOUSE_KAFKA_FAIL_ON_DATA_LOSS``: anything but ``false``, the default ``true``)."""
    value = (os.environ if environ is None else environ).get(ENV_FAIL_ON_DATA_LOSS, "true")
    return value.strip().lower() != "false"


def gold_start_date(environ: Mapping[str, str] | None = None) -> str:
    """The first day a gold partition exists for (``LAKEHOUSE_GOLD_START_DATE``, ISO date);
    data of earlier days is not reported."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_GOLD_START_DATE) or DEFAULT_GOLD_START_DATE
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError as error:
        raise ValueError(
            f"{ENV_GOLD_START_DATE} must be an ISO date like 2023-03-01, got {value!r}"
        ) from error


def max_concurrent_steps(environ: Mapping[str, str] | None = None) -> int:
    """Steps run at once in a run: ``LAKEHOUSE_MAX_CONCURRENT_STEPS``, by default 4.

    Raises:
        ValueError: the variable is not a positive integer.
    """
    env = os.environ if environ is None else environ
    value = env.get(ENV_MAX_CONCURRENT_STEPS, str(DEFAULT_MAX_CONCURRENT_STEPS))
    if not value.strip().isdigit() or int(value) < 1:
        raise ValueError(f"{ENV_MAX_CONCURRENT_STEPS} must be a positive integer, not {value!r}")
    return int(value)


def max_concurrent_runs(environ: Mapping[str, str] | None = None) -> int | None:
    """The limit on runs in progress at once that ``lakehouse up`` writes into the instance
    (``LAKEHOUSE_MAX_CONCURRENT_RUNS``); None, when unset, keeps the instance file's.

    Raises:
        ValueError: the variable is not a whole number of at least 1.
    """
    limit = (os.environ if environ is None else environ).get(ENV_MAX_CONCURRENT_RUNS)
    if not limit:
        return None
    if not limit.isdigit() or int(limit) < 1:
        raise ValueError(
            f"{ENV_MAX_CONCURRENT_RUNS} must be a whole number of at least 1, got {limit!r}"
        )
    return int(limit)


def profile_mode(environ: Mapping[str, str] | None = None) -> str:
    """When tables are profiled: ``materialization`` (silver and gold after each write, bronze
    nightly), ``schedule`` (every table nightly: the default) or ``off``."""
    mode = (os.environ if environ is None else environ).get(ENV_PROFILE) or DEFAULT_PROFILE_MODE
    if mode not in PROFILE_MODES:
        raise ValueError(f"{ENV_PROFILE} must be one of {', '.join(PROFILE_MODES)}, got {mode!r}")
    return mode


def freshness_limit_s(environ: Mapping[str, str] | None = None) -> float:
    """How long a record or file may wait for bronze (``LAKEHOUSE_FRESHNESS_S``, seconds)."""
    raw = (os.environ if environ is None else environ).get(ENV_FRESHNESS_S) or ""
    try:
        limit = float(raw) if raw else DEFAULT_FRESHNESS_S
    except ValueError:
        raise ValueError(f"{ENV_FRESHNESS_S} must be a number of seconds, got {raw!r}") from None
    if limit <= 0:
        raise ValueError(f"{ENV_FRESHNESS_S} must be positive, got {raw!r}")
    return limit


def quarantine_warn_rate(environ: Mapping[str, str] | None = None) -> float:
    """The share of a run's records sent to quarantine above which its check warns
    (``LAKEHOUSE_QUARANTINE_WARN_RATE``, default 0.05)."""
    value = (os.environ if environ is None else environ).get(ENV_QUARANTINE_WARN_RATE) or "0.05"
    try:
        rate = float(value)
    except ValueError:
        rate = -1.0
    if not 0 <= rate <= 1:
        raise ValueError(f"{ENV_QUARANTINE_WARN_RATE} must be a number from 0 to 1, got {value!r}")
    return rate


def sources_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder of the declarations: ``LAKEHOUSE_SOURCES``, default ``sources``."""
    env = os.environ if environ is None else environ
    return Path(env.get(ENV_SOURCES_DIR) or DEFAULT_SOURCES_DIR)


def lake_root(environ: Mapping[str, str] | None = None) -> str:
    """The lake root (``LAKEHOUSE_ROOT``): a folder, default ``lake``, or an object store's URI."""
    return (os.environ if environ is None else environ).get(
        ENV_LAKEHOUSE_ROOT
    ) or DEFAULT_LAKEHOUSE_ROOT


def metastore(environ: Mapping[str, str] | None = None) -> str:
    """The catalog's metastore (``LAKEHOUSE_METASTORE``): a folder holding an embedded Derby
    database (default ``.lakehouse/metastore``) or a PostgreSQL URL (``resources.metastore``)."""
    return (os.environ if environ is None else environ).get(ENV_METASTORE) or DEFAULT_METASTORE


def schema_prefix(environ: Mapping[str, str] | None = None) -> str:
    """The prefix of the lake's schemas in the catalog (``LAKEHOUSE_SCHEMA_PREFIX``): with
    ``acme``, ``acme_bronze``, ``acme_silver`` and ``acme_gold``; none by default.

    Raises:
        ValueError: the prefix is not a lower-case identifier.
    """
    prefix = (os.environ if environ is None else environ).get(ENV_SCHEMA_PREFIX) or ""
    check_schema_prefix(prefix, ENV_SCHEMA_PREFIX)
    return prefix


def check_schema_prefix(prefix: str, name: str) -> None:
    """Refuse a schema prefix other than lower-case letters, digits and ``_`` after a letter
    (the names every metastore and BI tool takes unquoted), naming the setting ``name``.

    Raises:
        ValueError: naming ``name`` and the value.
    """
    if prefix and not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", prefix):
        raise ValueError(
            f"{name} must be lower-case letters, digits and _ after a letter (at most 64), "
            f"got {prefix!r}"
        )


@dataclass(frozen=True)
class SensorSettings:
    """When the stream sensors look, and when lag is worth a run."""

    interval_s: int = 30  # minimum seconds between two evaluations of a sensor
    lag_threshold: int = 0  # launch when more records than this wait...
    lag_max_wait_s: int = 300  # ...or when any record has waited this long


def sensor_settings(environ: Mapping[str, str] | None = None) -> SensorSettings:
    """The sensor settings of an environment (defaults where a variable is unset)."""
    env = os.environ if environ is None else environ
    defaults = SensorSettings()

    def whole(name: str, default: int) -> int:
        value = env.get(name, str(default))
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"{name} must be a whole number, got {value!r}") from None

    return SensorSettings(
        interval_s=whole(ENV_SENSOR_INTERVAL_S, defaults.interval_s),
        lag_threshold=whole(ENV_LAG_THRESHOLD, defaults.lag_threshold),
        lag_max_wait_s=whole(ENV_LAG_MAX_WAIT_S, defaults.lag_max_wait_s),
    )
