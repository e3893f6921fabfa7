"""Typed Dagster resources: Spark, Kafka and the Delta lake, built for an environment.

The resource classes are imported lazily: a process that needs one resource (a Spark Python
worker importing a module of the package, a sensor) does not pay for the others' imports.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from resources.calendar import CalendarResource
    from resources.documents import DocumentStoreResource
    from resources.kafka import KafkaResource
    from resources.lake import LakeResource
    from resources.spark import SparkResource

__all__ = [
    "ENV_AS_OF_DATE",
    "ENV_DOCUMENTS_URL",
    "ENV_FAIL_ON_DATA_LOSS",
    "ENV_GOLD_START_DATE",
    "ENV_KAFKA_BOOTSTRAP_SERVERS",
    "ENV_LAG_MAX_WAIT_S",
    "ENV_LAG_THRESHOLD",
    "ENV_LAKEHOUSE_ROOT",
    "ENV_SENSOR_INTERVAL_S",
    "ENV_SPARK_CONF",
    "ENV_SPARK_MASTER",
    "ENV_SPARK_REMOTE",
    "CalendarResource",
    "DocumentStoreResource",
    "KafkaResource",
    "LakeResource",
    "SensorSettings",
    "SparkResource",
    "build_resources",
    "sensor_settings",
    "spark_conf",
]

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

_MODULE_OF = {
    "CalendarResource": "calendar",
    "DocumentStoreResource": "documents",
    "KafkaResource": "kafka",
    "LakeResource": "lake",
    "SparkResource": "spark",
}


def __getattr__(name: str) -> Any:
    if name in _MODULE_OF:
        return getattr(importlib.import_module(f"resources.{_MODULE_OF[name]}"), name)
    raise AttributeError(f"module 'resources' has no attribute {name!r}")


def spark_conf(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The extra Spark settings of ``LAKEHOUSE_SPARK_CONF`` (a JSON object) in an environment: a
    run's session, a local application, and the Spark Connect server the project starts.

    Raises:
        ValueError: the variable is not a JSON object.
    """
    raw = (os.environ if environ is None else environ).get(ENV_SPARK_CONF) or "{}"
    try:
        conf = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{ENV_SPARK_CONF} must be a JSON object of Spark settings: {error}"
        ) from error
    if not isinstance(conf, dict):
        raise ValueError(f"{ENV_SPARK_CONF} must be a JSON object, got {raw!r}")
    return {str(key): str(value) for key, value in conf.items()}


def build_resources(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The resources for an environment, configured from its variables. A variable that may hold
    a credential is passed on as ``dg.EnvVar`` when it is the process's own (``_secret``).

    Args:
        environ: the variables to read; the process environment when None.
    """
    from resources.calendar import CalendarResource
    from resources.documents import DocumentStoreResource
    from resources.kafka import KafkaResource
    from resources.lake import LakeResource
    from resources.spark import SparkResource

    env = os.environ if environ is None else environ
    return {
        "spark": SparkResource(
            remote=env.get(ENV_SPARK_REMOTE) or None,
            master=env.get(ENV_SPARK_MASTER, "local[*]"),
            spark_config=spark_conf(env),
        ),
        "kafka": KafkaResource(
            bootstrap_servers=env.get(ENV_KAFKA_BOOTSTRAP_SERVERS, "127.0.0.1:9092"),
            fail_on_data_loss=env.get(ENV_FAIL_ON_DATA_LOSS, "true").strip().lower() != "false",
        ),
        "lake": LakeResource(root=env.get(ENV_LAKEHOUSE_ROOT, "lake")),
        "calendar": CalendarResource(as_of_date=env.get(ENV_AS_OF_DATE) or None),
        "documents": DocumentStoreResource(url=_secret(env, environ is None, ENV_DOCUMENTS_URL)),
    }


def _secret(env: Mapping[str, str], from_process: bool, name: str) -> str | None:
    """The value of variable ``name``, which may hold a credential (a URL's password): as
    ``dg.EnvVar`` when it is the process's own, so that Dagster reads it when a run starts and
    its UI shows the variable's name, never the value; None when unset."""
    import dagster as dg

    if not env.get(name):
        return None
    return dg.EnvVar(name) if from_process else env[name]


@dataclass(frozen=True)
class SensorSettings:
    """When the stream sensors look, and when lag is worth a run."""

    interval_s: int = 30  # minimum seconds between two evaluations of a sensor
    lag_threshold: int = 0  # launch when more records than this wait...
    lag_max_wait_s: int = 300  # ...or when any record has waited this long


def sensor_settings(environ: dict[str, str] | None = None) -> SensorSettings:
    """The sensor settings of an environment (defaults where a variable is unset)."""
    env = os.environ if environ is None else environ
    defaults = SensorSettings()
    try:
        return SensorSettings(
            interval_s=int(env.get(ENV_SENSOR_INTERVAL_S, defaults.interval_s)),
            lag_threshold=int(env.get(ENV_LAG_THRESHOLD, defaults.lag_threshold)),
            lag_max_wait_s=int(env.get(ENV_LAG_MAX_WAIT_S, defaults.lag_max_wait_s)),
        )
    except ValueError as error:
        raise ValueError(f"Sensor settings must be whole numbers: {error}") from error
