"""Configuration is read in one module, ``resources/settings.py``, and every variable it reads is
a row of the README's configuration table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import dagster as dg
import pytest

from resources import build_resources, settings

REPO_ROOT = Path(__file__).parents[2]
# A variable's name as the project spells it: its own, Kafka's and Spark's.
VARIABLE = re.compile(r"LAKEHOUSE_[A-Z_]+|KAFKA_BOOTSTRAP_SERVERS|SPARK_REMOTE|SPARK_MASTER")
VARIABLES = {value for name, value in vars(settings).items() if name.startswith("ENV_")}


def test_every_variable_is_a_row_of_the_readme() -> None:
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `([A-Z_]+)` \|", section, re.MULTILINE))
    assert VARIABLES - rows == set()
    assert {row for row in rows if VARIABLE.fullmatch(row)} - VARIABLES == set()


def test_no_module_but_settings_names_a_variable() -> None:
    named = []
    for path in [
        *(REPO_ROOT / "lakehouse_assets").rglob("*.py"),
        *(REPO_ROOT / "lakehouse_tools").rglob("*.py"),
        *(REPO_ROOT / "resources").rglob("*.py"),
    ]:
        if path.name == "settings.py" and path.parent.name == "resources":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            value = node.value if isinstance(node, ast.Constant) else None
            if isinstance(value, str) and VARIABLE.fullmatch(value):
                named.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno}")
    assert named == []


@pytest.mark.parametrize(
    "read, variable, bad",
    [
        (settings.spark_conf, settings.ENV_SPARK_CONF, "[1]"),
        (settings.gold_start_date, settings.ENV_GOLD_START_DATE, "03/01/2023"),
        (settings.max_concurrent_steps, settings.ENV_MAX_CONCURRENT_STEPS, "0"),
        (settings.max_concurrent_runs, settings.ENV_MAX_CONCURRENT_RUNS, "two"),
        (settings.profile_mode, settings.ENV_PROFILE, "always"),
        (settings.freshness_limit_s, settings.ENV_FRESHNESS_S, "-1"),
        (settings.quarantine_warn_rate, settings.ENV_QUARANTINE_WARN_RATE, "1.5"),
        (settings.sensor_settings, settings.ENV_LAG_THRESHOLD, "many"),
    ],
)
def test_a_bad_value_is_refused_naming_its_variable(read, variable: str, bad: str) -> None:
    with pytest.raises(ValueError, match=variable):
        read({variable: bad})


def test_the_definitions_resources_read_their_variables_when_a_run_starts() -> None:
    environ = {settings.ENV_LAKEHOUSE_ROOT: "/data/lake", settings.ENV_AS_OF_DATE: "2026-11-21"}
    built = build_resources(environ, as_env_vars=True)
    assert isinstance(built["lake"].root, dg.EnvVar)
    assert built["lake"].root == settings.ENV_LAKEHOUSE_ROOT  # the UI shows the name
    assert built["spark"].master == "local[*]"  # unset: the default, as it is
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environ.items():
            patch.setenv(name, value)
        with dg.build_resources({"lake": built["lake"], "calendar": built["calendar"]}) as run:
            assert run.lake.root == "/data/lake"
            assert run.calendar.as_of_date == "2026-11-21"
    assert build_resources(environ)["lake"].root == "/data/lake"  # outside Dagster: the value


def test_a_bad_as_of_date_is_refused_when_the_definitions_load() -> None:
    with pytest.raises(ValueError, match=settings.ENV_AS_OF_DATE):
        build_resources({settings.ENV_AS_OF_DATE: "21/11/2026"}, as_env_vars=True)
