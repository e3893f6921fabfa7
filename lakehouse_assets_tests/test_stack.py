"""`lakehouse up` and the compose deployment describe the same services with the same settings
(lakehouse_tools/stack.py, docker-compose.yml): this test keeps them from drifting."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from lakehouse_tools.dagster_services import (
    DEFINITIONS_MODULE,
    ENV_CODE_SERVER_HOST,
    ENV_CODE_SERVER_PORT,
    WORKSPACE_FILE,
    code_server_command,
    daemon_command,
    webserver_command,
)
from lakehouse_tools.postgres import PostgresServer
from lakehouse_tools.stack import (
    AUTOMATION_SETTLE,
    INSTANCE_FILE,
    Stack,
)
from resources import ENV_KAFKA_BOOTSTRAP_SERVERS, ENV_LAKEHOUSE_ROOT, ENV_SPARK_REMOTE
from resources.settings import ENV_MAX_CONCURRENT_RUNS

REPO_ROOT = Path(__file__).parents[1]


def compose() -> dict[str, Any]:
    return yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())["services"]


def test_the_same_services_run_in_both_shapes() -> None:
    # One compose service per process `lakehouse up` starts, in the same roles.
    assert set(compose()) == {
        "postgres", "kafka", "spark", "dagster-code-server", "dagster-daemon", "dagster-webserver"
    }  # fmt: skip


def test_dagster_runs_with_the_same_commands() -> None:
    services = compose()
    assert services["dagster-code-server"]["command"] == code_server_command("0.0.0.0", 4000)
    assert services["dagster-daemon"]["command"] == daemon_command()
    assert services["dagster-webserver"]["command"] == webserver_command("0.0.0.0", 3000)
    assert services["spark"]["command"][:2] == ["lakehouse", "spark-server"]


def test_dagster_reads_the_same_instance_and_variables(tmp_path: Path) -> None:
    assert Path("docker") / "dagster.yaml" == INSTANCE_FILE
    dockerfile = (REPO_ROOT / "docker" / "Dockerfile").read_text()
    assert "COPY docker/dagster.yaml /opt/dagster/dagster_home/dagster.yaml" in dockerfile
    for service in ("dagster-code-server", "dagster-daemon", "dagster-webserver"):
        environment = compose()[service]["environment"]
        postgres = {name for name in environment if name.startswith("DAGSTER_POSTGRES_")}
        assert postgres == set(PostgresServer(data_dir=tmp_path).environment)
        for name in (ENV_LAKEHOUSE_ROOT, ENV_KAFKA_BOOTSTRAP_SERVERS, ENV_SPARK_REMOTE):
            assert name in environment
        # Automation waits for materializations in flight in both shapes.
        assert AUTOMATION_SETTLE.items() <= environment.items()
        # Step logs where the webserver reads them: $DAGSTER_HOME/storage, shared.
        assert "dagster-storage:/opt/dagster/dagster_home/storage" in compose()[service]["volumes"]
        assert (environment[ENV_CODE_SERVER_HOST], environment[ENV_CODE_SERVER_PORT]) == (
            "dagster-code-server", "4000"
        )  # fmt: skip


def test_the_daemon_and_webserver_connect_to_the_code_server_the_runs_run_in() -> None:
    # The workspace names the code server by the variables both shapes set, under the name a
    # `python_module` workspace gives it (the UI's addresses, the sensors' state).
    [location] = yaml.safe_load((REPO_ROOT / WORKSPACE_FILE).read_text())["load_from"]
    assert location == {
        "grpc_server": {
            "host": {"env": ENV_CODE_SERVER_HOST},
            "port": {"env": ENV_CODE_SERVER_PORT},
            "location_name": DEFINITIONS_MODULE,
        }
    }
    root_workspace = yaml.safe_load((REPO_ROOT / "workspace.yaml").read_text())
    assert root_workspace["load_from"][0]["python_module"]["module_name"] == DEFINITIONS_MODULE
    # Run monitoring finds a run's worker by its process id where the daemon runs.
    assert compose()["dagster-daemon"]["pid"] == "service:dagster-code-server"


def test_the_run_limit_can_be_lowered_for_a_small_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    stack, written = Stack(tmp_path), tmp_path / "dagster.yaml"
    stack.env = {}
    stack._write_instance(written)
    assert written.read_text() == INSTANCE_FILE.read_text()  # the compose deployment's, as it is
    stack.env = {ENV_MAX_CONCURRENT_RUNS: "2"}
    stack._write_instance(written)
    instance = yaml.safe_load(written.read_text())
    assert instance["concurrency"]["runs"]["max_concurrent_runs"] == 2
    assert instance["run_retries"] == yaml.safe_load(INSTANCE_FILE.read_text())["run_retries"]
    stack.env = {ENV_MAX_CONCURRENT_RUNS: "none"}
    with pytest.raises(SystemExit, match="LAKEHOUSE_MAX_CONCURRENT_RUNS must be a whole number"):
        stack._write_instance(written)


def test_the_lake_lives_as_long_as_the_embedded_brokers_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO_ROOT)
    stack = Stack(tmp_path)
    stack.env = {}
    assert stack._starts_new_broker()
    stack._prepare_home(stack._starts_new_broker())
    assert AUTOMATION_SETTLE.items() <= stack.env.items()
    table = Path(stack.env[ENV_LAKEHOUSE_ROOT]) / "bronze" / "bpm"
    table.mkdir(parents=True)
    stack.kafka_data.mkdir()  # the broker's records

    stack.env = {}  # `make up` again: the same broker, the same lake
    assert not stack._starts_new_broker()
    stack._prepare_home(stack._starts_new_broker())
    assert table.is_dir()

    shutil.rmtree(stack.kafka_data)  # a new cluster: the lake's offsets are not its offsets
    stack.env = {}
    stack._prepare_home(stack._starts_new_broker())
    assert not table.exists()

    stack.env = {ENV_KAFKA_BOOTSTRAP_SERVERS: "kafka:9092"}  # a user's Kafka: never reset
    assert not stack._starts_new_broker()


def test_dagster_reads_the_automation_settle_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    # The setting is Dagster's, read from the daemon's environment: a Dagster that renamed it
    # would skip upstream writes again without a word (an upgrade guard, on a private module).
    from dagster._core.definitions.declarative_automation.automation_condition_evaluator import (
        get_automation_tick_settle_delay_seconds,
    )

    for name, value in AUTOMATION_SETTLE.items():
        monkeypatch.setenv(name, value)
    assert get_automation_tick_settle_delay_seconds() == 2.0
