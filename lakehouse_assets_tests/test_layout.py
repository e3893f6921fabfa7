"""The layout's dependency rules (docs/how_it_works.md, "Layout"): every part of
``lakehouse_assets`` is the platform, a pipeline or an entry point, and ``lakehouse_tools`` is the
tooling; imports point from pipelines to the platform and from entry points and the tooling to
both, never back; no two packages import each other, directly or round a circle."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).parents[1]
PACKAGE = REPO_ROOT / "lakehouse_assets"

# What every source uses: streams into bronze, validation and quarantine, the silver step, table
# metadata, checks, profiles, sensors, schedules, the run's executor; and the resources beneath.
PLATFORM = {
    "resources", "constants", "partitions", "automation", "executor", "run_launcher",
    "table_metadata", "migrations", "lake_migrations", "validation", "refinement", "pipeline",
    "bronze", "checks", "profiling", "sensors", "schedules",
}  # fmt: skip
# The pipelines built on it, which never import one another: the fitness reference pipeline and
# the engine of declared sources.
PIPELINES = {"fitness": "fitness", "sources": "declared"}
# The tooling, outside the code location: the `lakehouse` command, embedded services, sample
# data, the demos, the install's steps (the package lakehouse_tools).
TOOLING = {"lakehouse_tools"}
# What Dagster loads: the one Definitions, its defs tree and the component types its files name.
ENTRY_POINTS = {"definitions", "defs", "components"}


def part(module: str) -> str | None:
    """The part a module of the project belongs to (None: not the project's)."""
    names = module.split(".")
    if names[0] in ("resources", "lakehouse_tools"):
        return names[0]
    if names[0] != "lakehouse_assets" or len(names) == 1:
        return None
    return names[1]


def imported(path: Path, module: str) -> Iterator[str]:
    """The modules ``path`` (module ``module``) imports, wherever in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *filter(None, [node.module])])
            # ``from lakehouse_assets import migrations`` imports the module it names.
            yield from (f"{base}.{alias.name}" for alias in node.names)


def part_imports() -> dict[str, set[str]]:
    """Each part -> the other parts its modules import."""
    graph: dict[str, set[str]] = {}
    packages = [PACKAGE, REPO_ROOT / "resources", REPO_ROOT / "lakehouse_tools"]
    for path in [p for package in packages for p in package.rglob("*.py")]:
        module = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        source = part(module)
        if source is None:
            continue
        targets = {part(name) for name in imported(path, module)}
        graph.setdefault(source, set()).update(t for t in targets if t not in (None, source))
    return graph


GRAPH = part_imports()


def test_every_part_has_its_place() -> None:
    placed = PLATFORM | set(PIPELINES) | TOOLING | ENTRY_POINTS
    assert set(GRAPH) - placed == set(), "a new part: name its place in test_layout.py and docs"


def test_the_platform_imports_no_pipeline_tooling_or_entry_point() -> None:
    for source in PLATFORM & set(GRAPH):
        assert GRAPH[source] <= PLATFORM, (source, GRAPH[source] - PLATFORM)


def test_a_pipeline_imports_the_platform_and_its_own_parts_only() -> None:
    for source, pipeline in PIPELINES.items():
        own = {name for name, of in PIPELINES.items() if of == pipeline}
        assert GRAPH[source] <= PLATFORM | own, (source, GRAPH[source] - PLATFORM - own)


def test_nothing_the_code_location_loads_imports_the_tooling() -> None:
    for source, targets in GRAPH.items():
        if source not in TOOLING:
            assert not targets & TOOLING, source


def test_no_two_parts_import_each_other_round_a_circle() -> None:
    reach = {source: set(targets) for source, targets in GRAPH.items()}
    for _ in range(len(reach)):  # the transitive closure, a step at a time
        for targets in reach.values():
            targets |= set(itertools.chain.from_iterable(reach.get(t, ()) for t in targets))
    circles = sorted(source for source, targets in reach.items() if source in targets)
    assert circles == []
