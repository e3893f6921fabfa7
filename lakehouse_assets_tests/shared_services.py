"""The services a test session uses, shared by several pytest processes: one S3 endpoint and one
Spark Connect server, started here for as long as a command runs, their addresses exported to it.

`make test` runs its two lanes under it (``python -m lakehouse_assets_tests.shared_services make
...``), so the tests of both lanes that are clients of a server use one warm server: a second one,
started beside the first lane's, took about 1.6x the time for the same tests (its JIT compiling
again what the first had compiled; docs/benchmarks.md). Without it (``pytest`` alone, or one lane's
target), a session starts both services itself (conftest.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from lakehouse_assets.devtools.s3_endpoint import S3Endpoint
from lakehouse_assets.devtools.spark_server import SparkConnectServer

# The shared services' addresses, for the sessions of the command (conftest.py reads them).
ENV_SHARED_SPARK = "LAKEHOUSE_TEST_SPARK_REMOTE"
ENV_SHARED_S3 = "LAKEHOUSE_TEST_S3_ENDPOINT"
S3_BUCKET = "lake"  # the S3 endpoint's bucket: each test's lake under a prefix of its own
# The tests' server computes expressions interpreted instead of compiling code for each query:
# the tests' tables hold a few hundred rows, where generating and compiling a query's code costs
# more than running it (the sample graph in 0.78x the time on a new server and on a warm one,
# benchmarks/spark_settings.py with these settings). They are Spark's internal settings, not
# meant for real volumes. The fault matrix and the UI path use them too; the standalone cluster
# (the demo's and the Dagster CLI's graphs, gold against the oracle), the local lane and
# `make run` keep generated code, so CI runs both.
INTERPRETED: dict[str, str] = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
# The tests' server (and the UI path's) collects garbage with the parallel collector instead of
# G1, the JDK's default, whose concurrent marking the server's growing heap keeps busy: the tests
# of sources/ and silver/ took 0.93x and 0.96x the time, 0.87x and 0.91x the CPU (two pairs, one
# in each order; docs/benchmarks.md).
TEST_SERVER_JAVA = "-XX:+UseParallelGC"


def connect_server() -> SparkConnectServer:
    """A Spark Connect server as the tests run theirs: interpreted, the parallel collector."""
    return SparkConnectServer(conf=INTERPRETED, java_options=TEST_SERVER_JAVA)


def run_sharing(command: list[str]) -> int:
    """Run ``command`` with the shared services; returns its exit code.

    The S3 endpoint's variables are exported before the server starts, so that its S3A reaches
    the endpoint. The command starts at once, beside the server's start: its sessions wait for a
    server that does not answer yet (``resources.spark.CONNECT_WAIT_S``), and its tests that need
    no server do not wait at all. A SIGTERM is passed on to the command; the services stop once
    it ends.
    """
    with S3Endpoint(buckets=[S3_BUCKET]) as endpoint:
        os.environ.update(endpoint.environment())
        os.environ[ENV_SHARED_S3] = endpoint.address
        server = connect_server()
        os.environ[ENV_SHARED_SPARK] = server.url
        child = subprocess.Popen(command)
        signal.signal(signal.SIGTERM, lambda signum, _: child.send_signal(signum))
        try:
            with server:
                print(f"Shared by the tests: the S3 endpoint {endpoint.address} and the Spark "
                      f"Connect server {server.url}", flush=True)  # fmt: skip
                return child.wait()
        except KeyboardInterrupt:  # the terminal sent it to the command as well
            return child.wait()
        finally:
            if child.poll() is None:  # the server did not start: the command cannot pass
                child.terminate()
                child.wait()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("Usage: python -m lakehouse_assets_tests.shared_services COMMAND [ARGUMENT...]")
    sys.exit(run_sharing(sys.argv[1:]))
