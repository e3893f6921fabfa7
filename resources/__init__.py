"""Typed Dagster resources: Spark, Kafka and the Delta lake, built for an environment.

The resource classes are imported lazily: a process that needs one resource (a Spark Python
worker importing a module of the package, a sensor) does not pay for the others' imports.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

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

from resources.settings import (
    ENV_AS_OF_DATE,
    ENV_DOCUMENTS_URL,
    ENV_FAIL_ON_DATA_LOSS,
    ENV_GOLD_START_DATE,
    ENV_KAFKA_BOOTSTRAP_SERVERS,
    ENV_LAG_MAX_WAIT_S,
    ENV_LAG_THRESHOLD,
    ENV_LAKEHOUSE_ROOT,
    ENV_SENSOR_INTERVAL_S,
    ENV_SPARK_CONF,
    ENV_SPARK_MASTER,
    ENV_SPARK_REMOTE,
    SensorSettings,
    sensor_settings,
    spark_conf,
)

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
