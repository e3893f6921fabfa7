"""Reaching a Spark Connect server: its URL checked, a connection tried (waiting a while for a
server that is starting), and the URL as logs and errors show it, its token hidden."""

from __future__ import annotations

import itertools
import logging
import socket
import time
from urllib.parse import urlparse

CONNECT_TIMEOUT_S = 10.0
LOG = logging.getLogger(__name__)


class SparkConnectUnreachable(RuntimeError):
    """No Spark Connect server answers at the configured URL."""


def shown_url(url: str) -> str:
    """``url`` as logs and errors show it: a Spark Connect URL's ``token`` parameter (a bearer
    credential, ``sc://host:15002/;token=...``) hidden, the other parameters as given."""
    base, *parameters = url.split(";")
    hidden = [
        f"{name}=<hidden>" if name.strip().lower() == "token" else f"{name}={value}"
        for name, _, value in (parameter.partition("=") for parameter in parameters)
    ]
    return ";".join([base, *hidden])


def check_reachable(url: str, wait_s: float = 0.0, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Return once a Spark Connect server accepts connections at ``url``, waiting up to
    ``wait_s`` for one that does not yet (it is starting); fail naming ``url`` after that.

    Raises:
        SparkConnectUnreachable: not a Connect URL, or nothing accepted a connection in time.
    """
    parsed = urlparse(url.split(";")[0])
    shown = shown_url(url)
    if parsed.scheme != "sc" or not parsed.hostname:
        raise SparkConnectUnreachable(
            f"SPARK_REMOTE must be a Spark Connect URL like sc://host:15002, got {shown!r}"
        )
    deadline = time.monotonic() + wait_s
    for attempt in itertools.count():
        try:
            with socket.create_connection((parsed.hostname, parsed.port or 15002), timeout_s):
                return
        except OSError as error:
            if time.monotonic() >= deadline:
                waited = f" (waited {wait_s:.0f} s)" if wait_s else ""
                raise SparkConnectUnreachable(
                    f"Cannot reach the Spark Connect server at {shown}{waited}: {error}. Start one "
                    "with `lakehouse spark-server`, or unset SPARK_REMOTE to run a local Spark."
                ) from error
            if attempt == 0:
                LOG.warning(f"Waiting up to {wait_s:.0f} s for the Spark Connect server at {shown}")
            time.sleep(1.0)
