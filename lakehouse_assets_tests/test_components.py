"""A source as a Dagster Component, on a user's path: ``dg scaffold defs`` writes its
``defs.yaml``, ``dg check yaml`` and ``dg check defs`` refuse a wrong one with its file and line,
``dg launch`` materializes it, and its tables answer by name in the catalog.

Each test works on a copy of the project (its ``pyproject.toml``, ``lakehouse_assets/`` and
``resources/``), imported ahead of the checkout's own, so that no other test's definitions see
the sources it scaffolds."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from lakehouse_assets_tests.conftest import produce
from lakehouse_tools.broker import EmbeddedBroker
from resources import ENV_SPARK_REMOTE
from resources.catalog import schema_name
from resources.settings import ENV_SCHEMA_PREFIX

REPO_ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = Path(sys.executable).parent
SOURCE_TYPE = "lakehouse_assets.components.Source"


def project(tmp_path: Path) -> Path:
    """A copy of the project, its defs tree empty."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copy(REPO_ROOT / "pyproject.toml", root)
    ignored = shutil.ignore_patterns("__pycache__")
    for package in ("lakehouse_assets", "resources"):
        shutil.copytree(REPO_ROOT / package, root / package, ignore=ignored)
    for entry in (root / "lakehouse_assets" / "defs").iterdir():
        if entry.is_dir():
            shutil.rmtree(entry)
    return root


def dg(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``dg`` with ``args`` in the project at ``root``, from the project's environment."""
    return run(root, "dg", *args, env=env)


def run(
    root: Path, command: str, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """The environment's ``command`` with ``args`` in the project at ``root``."""
    environ = {
        **os.environ,
        **(env or {}),
        "VIRTUAL_ENV": str(VENV_BIN.parent),
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(root),  # the copy, ahead of the checkout's editable install
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [str(VENV_BIN / command), *args],
        cwd=root,
        env=environ,
        capture_output=True,
        text=True,
        timeout=600,
    )


def scaffold(root: Path, name: str, *options: str) -> Path:
    """``dg scaffold defs`` of a source named ``name``; its ``defs.yaml``."""
    made = dg(root, "scaffold", "defs", SOURCE_TYPE, name, *options)
    assert made.returncode == 0, made.stdout + made.stderr
    return root / "lakehouse_assets" / "defs" / name / "defs.yaml"


def test_dg_scaffolds_a_source_definition_that_dg_checks(tmp_path: Path) -> None:
    root = project(tmp_path)
    defs_yaml = scaffold(root, "orders", "--topic", "shop.orders")
    assert defs_yaml.read_text().split() == [
        "type:", SOURCE_TYPE, "attributes:", "topic:", "shop.orders", "format:", "json",
        "mode:", "append",
    ]  # fmt: skip
    listed = dg(root, "list", "components")
    assert SOURCE_TYPE in listed.stdout, listed.stdout + listed.stderr
    for check in ("yaml", "defs"):
        checked = dg(root, "check", check)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    listed = run(root, "lakehouse", "sources")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "orders: shop.orders (json, append)\n1 sources declared in" in listed.stdout


def test_dg_check_yaml_refuses_a_wrong_field_naming_its_file_and_line(tmp_path: Path) -> None:
    root = project(tmp_path)
    defs_yaml = scaffold(root, "orders", "--topic", "shop.orders")
    defs_yaml.write_text(defs_yaml.read_text().replace("mode: append", "mode: apend"))
    checked = dg(root, "check", "yaml")
    assert checked.returncode != 0
    output = checked.stdout + checked.stderr
    assert f"{defs_yaml}:6" in output, output  # type, a blank line, attributes, topic, format
    assert "'apend' is not one of" in output, output


def test_dg_check_defs_refuses_what_the_fields_do_not_allow_together(tmp_path: Path) -> None:
    root = project(tmp_path)
    defs_yaml = scaffold(root, "orders", "--topic", "shop.orders", "--mode", "cdc-scd1")
    checked = dg(root, "check", "defs")
    assert checked.returncode != 0
    output = checked.stdout + checked.stderr
    # The keys are left out: the line of `attributes`.
    assert f"{defs_yaml}:3 (field 'keys'): mode cdc-scd1 needs the key columns" in output, output
    fixed = defs_yaml.read_text() + "  keys: [id]\n"
    defs_yaml.write_text(fixed)
    assert dg(root, "check", "defs").returncode == 0
    # A name the fitness pipeline's tables take.
    taken = scaffold(root, "workouts", "--topic", "gym.workouts")
    checked = dg(root, "check", "defs")
    assert checked.returncode != 0
    output = checked.stdout + checked.stderr
    assert f"{taken}:1 (field 'name'): the name 'workouts' is taken" in output, output


def test_a_scaffolded_source_is_materialized_by_dg_and_answers_by_name(
    tmp_path: Path, broker: EmbeddedBroker, spark: SparkSession, spark_remote: str | None
) -> None:
    root = project(tmp_path)
    scaffold(root, "orders", "--topic", "shop.orders")
    orders = [{"id": 1, "amount": 9.5}, {"id": 2, "amount": None}, {"id": 3, "amount": 0.25}]
    produce(broker.bootstrap_servers, "shop.orders", orders)
    env = {
        "LAKEHOUSE_ROOT": str(tmp_path / "lake"),
        "KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap_servers,
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        **({ENV_SPARK_REMOTE: spark_remote} if spark_remote else {}),
    }
    (tmp_path / "dagster_home").mkdir()
    launched = dg(root, "launch", "--assets", 'key:"bronze/orders"+', env=env)
    assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
    prefix = os.environ[ENV_SCHEMA_PREFIX]
    bronze = spark.sql(f"SELECT count(*) AS n FROM {schema_name(prefix, 'bronze')}.orders")
    assert bronze.collect()[0].n == 3
    silver = spark.sql(f"SELECT id, amount FROM {schema_name(prefix, 'silver')}.orders ORDER BY id")
    assert [tuple(row) for row in silver.collect()] == [(1, 9.5), (2, None), (3, 0.25)]
