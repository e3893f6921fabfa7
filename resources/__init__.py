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
    "ENV_KAFKA_BOOTSTRAP_SERVERS",
    "ENV_LAKEHOUSE_ROOT",
    "ENV_METASTORE",
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
    DEFAULT_KAFKA_BOOTSTRAP_SERVERS,
    DEFAULT_LAKEHOUSE_ROOT,
    DEFAULT_SPARK_MASTER,
    ENV_AS_OF_DATE,
    ENV_DOCUMENTS_URL,
    ENV_KAFKA_BOOTSTRAP_SERVERS,
    ENV_LAKEHOUSE_ROOT,
    ENV_METASTORE,
    ENV_SPARK_CONF,
    ENV_SPARK_MASTER,
    ENV_SPARK_REMOTE,
    SensorSettings,
    fail_on_data_loss,
    schema_prefix,
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


def build_resources(
    environ: Mapping[str, str] | None = None, *, as_env_vars: bool = False, quiet: bool = False
) -> dict[str, Any]:
    """The resources for an environment, configured from its variables.

    Args:
        environ: the variables to read; the process environment when None.
        as_env_vars: pass each text setting whose variable is set as ``dg.EnvVar`` (for the
            Definitions: Dagster reads the variable from the process environment when a run
            starts, and its UI shows the variable's name, never a value such as a URL's
            password). Resources used outside Dagster take the values themselves.
        quiet: discard what a local Spark's JVM prints (``SparkResource.quiet``): the
            `lakehouse` commands print only their answer.
    """
    import dagster as dg

    from resources.calendar import CalendarResource
    from resources.documents import DocumentStoreResource
    from resources.kafka import KafkaResource
    from resources.lake import LakeResource
    from resources.metastore import spark_settings as metastore_settings
    from resources.settings import metastore
    from resources.spark import SparkResource

    env = os.environ if environ is None else environ

    def setting(name: str, default: str = "") -> str:
        if name not in env:
            return default
        return dg.EnvVar(name) if as_env_vars and env[name] else env[name]

    # A bad as-of date, Spark settings or metastore are refused now, not only when a run reads
    # the variable.
    CalendarResource(as_of_date=env.get(ENV_AS_OF_DATE) or None)
    spark_conf(env)
    metastore_settings(metastore(env))
    return {
        "spark": SparkResource(
            remote=setting(ENV_SPARK_REMOTE) or None,
            master=setting(ENV_SPARK_MASTER, DEFAULT_SPARK_MASTER),
            extra_settings=setting(ENV_SPARK_CONF) or None,
            metastore=setting(ENV_METASTORE, metastore(env)),
            quiet=quiet,
        ),
        "kafka": KafkaResource(
            bootstrap_servers=setting(ENV_KAFKA_BOOTSTRAP_SERVERS, DEFAULT_KAFKA_BOOTSTRAP_SERVERS),
            fail_on_data_loss=fail_on_data_loss(env),
        ),
        "lake": LakeResource(
            root=setting(ENV_LAKEHOUSE_ROOT, DEFAULT_LAKEHOUSE_ROOT),
            schema_prefix=schema_prefix(env),  # the asset pages name tables with it
        ),
        "calendar": CalendarResource(as_of_date=setting(ENV_AS_OF_DATE) or None),
        "documents": DocumentStoreResource(url=setting(ENV_DOCUMENTS_URL) or None),
    }
