"""An S3 server on loopback: S3Proxy, a real S3 API server (a JVM, resolved by ``lakehouse jars``
into a folder of its own), keeping each bucket as a folder of a directory. The tests' object
store, and the one ``lakehouse up --s3`` starts to try the production shape on object storage.

It checks every request's signature against one access key (``lakehouse``, secret
``lakehouse``), and it makes a conditional write (``If-None-Match: *``) one atomic step with its
check, as S3 does: the Delta log store of ``s3a://`` lakes commits on that
(``resources.object_store``). Its buckets are folders: they outlive a restart of the server.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from lakehouse_tools import s3proxy
from lakehouse_tools.service import LOOPBACK, LocalService, free_port
from resources.object_store import ENV_ENDPOINT, ENV_REGION

REGION = "us-east-1"
ACCESS_KEY = SECRET_KEY = "lakehouse"


class S3EndpointError(RuntimeError):
    """The local S3 endpoint could not be started, or refused a bucket."""


class S3Endpoint(LocalService):
    """S3Proxy on a loopback port, started and stopped by this process::

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
        buckets: Sequence[str] = (),
        folder: Path | None = None,
    ) -> None:
        """Prepare an endpoint on ``port`` (a free one when None) holding ``buckets``, kept as
        folders of ``folder`` (a temporary directory, removed when the endpoint stops, when
        None)."""
        super().__init__(timeout_s, log_file=log_file)
        self.port = port if port is not None else free_port()
        self.buckets = tuple(buckets)
        self.folder = self._data_folder(folder, "lakehouse-s3-")

    @property
    def address(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> Self:
        java = shutil.which("java")
        if java is None or not s3proxy.installed():
            raise S3EndpointError(
                f"S3Proxy is not installed in {s3proxy.S3PROXY_JARS_DIR} with its fix "
                f"({s3proxy.FIX_JAR}): run `lakehouse jars` (`make install` does), with a JDK 17 "
                "on the PATH (its javac compiles the fix)."
            )
        for bucket in self.buckets:  # a folder of ``folder``, as S3Proxy's file store keeps it
            if not bucket or "/" in bucket or bucket.startswith("."):
                raise S3EndpointError(f"The {self.name} refused the bucket {bucket!r}: not a name")
            (self.folder / bucket).mkdir(parents=True, exist_ok=True)
        settings = self.folder.with_name(f"{self.folder.name}.properties")
        settings.write_text(
            f"s3proxy.endpoint={self.address}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={ACCESS_KEY}\n"
            f"s3proxy.credential={SECRET_KEY}\n"
            "jclouds.provider=filesystem-nio2\n"
            f"jclouds.filesystem.basedir={self.folder}\n"
        )
        command = [java, "-cp", s3proxy.classpath(), s3proxy.MAIN_CLASS]
        command += ["--properties", str(settings)]
        self._launch(command, self._answers)
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.address}/", timeout=1):
                return True
        except urllib.error.HTTPError:
            return True  # it answered (an unsigned request is refused)
        except OSError:
            return False

    def stop(self) -> None:
        super().stop()
        self.folder.with_name(f"{self.folder.name}.properties").unlink(missing_ok=True)

    def environment(self) -> dict[str, str]:
        """The variables that point every engine at this endpoint, with its access key."""
        return {
            ENV_ENDPOINT: self.address,
            ENV_REGION: REGION,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        }
