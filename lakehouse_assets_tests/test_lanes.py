"""`make test`'s lanes, as the Makefile writes their marker expressions, run every test once
whatever its markers (docs/testing.md)."""

from __future__ import annotations

import itertools
import re
import tomllib
from pathlib import Path

from _pytest.mark.expression import Expression  # pytest's own parser of `-m`

REPO_ROOT = Path(__file__).parents[1]
MAKEFILE = (REPO_ROOT / "Makefile").read_text()
# The markers pyproject.toml declares (--strict-markers refuses any other).
MARKERS = tuple(
    line.split(":", 1)[0]
    for line in tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"
    ]["markers"]
)


def selection(target: str) -> Expression:
    """The `-m` expression of the pytest command in ``target``'s recipe (its last one)."""
    recipe = re.search(rf"^{target}:.*\n((?:\t.*\n)+)", MAKEFILE, re.MULTILINE)
    assert recipe, f"no target {target} in the Makefile"
    expression = re.findall(r"pytest -m '([^']+)'", recipe.group(1))[-1]
    for name, value in re.findall(r"^(\w+) := (.+)$", MAKEFILE, re.MULTILINE):
        expression = expression.replace(f"$({name})", value)
    return Expression.compile(expression)


def test_the_lanes_run_every_test_once_whatever_its_markers() -> None:
    lanes = [selection(t) for t in ("test-first-lane", "test-second-lane", "test-own-stacks")]
    for count in range(len(MARKERS) + 1):
        for marks in itertools.combinations(MARKERS, count):
            runs = [lane.evaluate(lambda name, marks=marks: name in marks) for lane in lanes]
            assert sum(runs) == 1, f"a test marked {marks or 'nothing'} runs in lanes {runs}"


def test_the_quick_lane_is_the_tests_that_need_no_service() -> None:
    quick = selection("test-quick")
    assert not quick.evaluate(lambda name: name == "services")
    assert quick.evaluate(lambda name: False)
