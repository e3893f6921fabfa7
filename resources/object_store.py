"""The lake on object storage: what each engine that touches it needs, from the standard variables.

Three engines read or write under the lake root: Spark's S3A connector (every table and
checkpoint), delta-rs (table logs, read by the sensors and checks) and pyarrow (schema files, the
landing zone, checkpoints read by the sensors). Each finds the credentials itself, in
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN`` or the machine's role.
They part on an S3-compatible endpoint: S3A takes it only from its own settings, and delta-rs
refuses a plain-http one unless told. So ``AWS_ENDPOINT_URL`` and ``AWS_REGION`` are mapped
here, once, into each engine's terms. ``LAKEHOUSE_SPARK_CONF`` overrides any of Spark's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pyarrow import fs

ENV_ENDPOINT = "AWS_ENDPOINT_URL"  # the SDKs' variable for an S3-compatible endpoint
ENV_REGION = "AWS_REGION"
ENV_DEFAULT_REGION = "AWS_DEFAULT_REGION"


class LakeRootUnreachable(RuntimeError):
    """The lake root's object store cannot be used: no answer, no bucket, or access refused."""


def endpoint(environ: Mapping[str, str] | None = None) -> str | None:
    """The S3 endpoint the variables name, or None for AWS's own."""
    env = os.environ if environ is None else environ
    return env.get(ENV_ENDPOINT) or None


def region(environ: Mapping[str, str] | None = None) -> str | None:
    """The region the variables name, or None."""
    env = os.environ if environ is None else environ
    return env.get(ENV_REGION) or env.get(ENV_DEFAULT_REGION) or None


def spark_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """S3A's settings for the endpoint and region of the variables (none for AWS's defaults).

    A custom endpoint is addressed path-style (``host/bucket/key``), as delta-rs and pyarrow do:
    S3-compatible stores rarely serve a bucket as a host name.
    """
    settings: dict[str, str] = {}
    url = endpoint(environ)
    if url:
        settings["spark.hadoop.fs.s3a.endpoint"] = url
        settings["spark.hadoop.fs.s3a.path.style.access"] = "true"
        settings["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
            not url.startswith("http://")
        ).lower()
    name = region(environ)
    if name:
        settings["spark.hadoop.fs.s3a.endpoint.region"] = name
    return settings


def delta_rs_options(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """delta-rs's storage options beyond what it reads from the variables: a plain-http endpoint
    allowed (delta-rs alone refuses one unless told)."""
    url = endpoint(environ)
    return {"AWS_ALLOW_HTTP": "true"} if url and url.startswith("http://") else {}


def absolute(root: str) -> str:
    """``root`` as an absolute path (a local folder, relative to the working directory) or a URI
    without a trailing slash (an object store's)."""
    return root.rstrip("/") if "://" in root else os.path.abspath(root)


def hadoop_uri(uri: str) -> str:
    """A URI as Spark (Hadoop) names it: ``s3://`` is ``s3a://``."""
    return "s3a://" + uri[len("s3://") :] if uri.startswith("s3://") else uri


def filesystem(uri: str) -> tuple[fs.FileSystem, str]:
    """pyarrow's file system for ``uri`` (a local path, or ``s3://``, ``s3a://``, ``gs://``...),
    and the path there. The one place the project tells a local root from an object store."""
    if "://" not in uri:
        return fs.LocalFileSystem(), os.path.abspath(uri)
    return fs.FileSystem.from_uri(uri.replace("s3a://", "s3://", 1))


def check_root(uri: str) -> None:
    """Fail, naming ``uri``, when the lake root's object store cannot be used: the endpoint does
    not answer, the bucket does not exist, or the credentials are refused. A local root passes.

    Raises:
        LakeRootUnreachable: the store, its bucket or access to it is missing.
    """
    if "://" not in uri:
        return
    where = f" at {endpoint()}" if endpoint() else ""
    bucket = uri.split("://", 1)[1].split("/", 1)[0]
    try:
        store, path = filesystem(uri)
        info = store.get_file_info(bucket)
        store.get_file_info(fs.FileSelector(path, allow_not_found=True))  # listing allowed
    except OSError as error:  # pyarrow's error names the store's reply
        raise LakeRootUnreachable(
            f"The lake root {uri} cannot be used: {error}. Check the endpoint{where} "
            f"({ENV_ENDPOINT}), the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) and "
            f"the region ({ENV_REGION})."
        ) from error
    if info.type == fs.FileType.NotFound:
        raise LakeRootUnreachable(
            f"The lake root {uri} cannot be used: its bucket {bucket!r} does not exist{where}. "
            "Create it, or point LAKEHOUSE_ROOT at one that does."
        )
