"""An S3 API server on loopback (moto's standalone server, a dev dependency): the tests' object
store, and the one ``lakehouse up --s3`` starts to try the production shape on object storage.

It keeps its buckets in memory, so they last as long as the process. Any access key is accepted.
"""

from __future__ import annotations

import os
import shutil
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from lakehouse_assets.devtools.service import LOOPBACK, LocalService, free_port
from resources.object_store import ENV_ENDPOINT, ENV_REGION

REGION = "us-east-1"


class S3EndpointError(RuntimeError):
    """The local S3 endpoint could not be started, or refused a bucket."""


class S3Endpoint(LocalService):
    """``moto_server`` on a loopback port, started and stopped by this process::

    with S3Endpoint(buckets=["lake"]) as s3:
        os.environ.update(s3.environment())
    """

    name = "S3 endpoint"
    error = S3EndpointError

    def __init__(
        self,
        port: int | None = None,
        timeout_s: float = 60.0,
        log_file: Path | None = None,
        env: Mapping[str, str] | None = None,
        buckets: Sequence[str] = (),
    ) -> None:
        """Prepare an endpoint on ``port`` (a free one when None) that holds ``buckets`` once
        started (again after a restart: it keeps nothing); ``env`` adds to the server's
        variables (moto's own settings)."""
        super().__init__(timeout_s, log_file=log_file)
        self.port = port if port is not None else free_port()
        self.env = {**os.environ, **(env or {})}
        self.buckets = tuple(buckets)

    @property
    def address(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> Self:
        server = shutil.which("moto_server", path=str(Path(sys.executable).parent))
        if server is None:
            raise S3EndpointError(
                "moto_server is not installed: the local S3 endpoint is a dev dependency "
                "(pip install -e '.[dev]', as `make install` does)."
            )
        self._launch([server, "-H", LOOPBACK, "-p", str(self.port)], self._answers, self.env)
        for bucket in self.buckets:
            try:
                self.create_bucket(bucket)
            except S3EndpointError as error:
                self._fail(str(error))  # stops the server
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.address}/moto-api/", timeout=1):
                return True
        except (OSError, urllib.error.URLError):
            return False

    def environment(self) -> dict[str, str]:
        """The variables that point every engine at this endpoint (any key is accepted)."""
        return {
            ENV_ENDPOINT: self.address,
            ENV_REGION: REGION,
            "AWS_ACCESS_KEY_ID": "lakehouse",
            "AWS_SECRET_ACCESS_KEY": "lakehouse",
        }

    def create_bucket(self, bucket: str) -> None:
        """Create ``bucket`` (an S3 ``CreateBucket``: a PUT on its path)."""
        request = urllib.request.Request(f"{self.address}/{bucket}", method="PUT")
        try:
            with urllib.request.urlopen(request, timeout=10):
                pass
        except urllib.error.HTTPError as error:
            message = f"The {self.name} refused the bucket {bucket!r}: {error}"
            raise S3EndpointError(message) from error
