"""Configuration is read in one module, ``resources/settings.py``, and every variable it reads is
a row of the README's configuration table."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from resources import settings

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
    ],
)
def test_a_bad_value_is_refused_naming_its_variable(read, variable: str, bad: str) -> None:
    with pytest.raises(ValueError, match=variable):
        read({variable: bad})
