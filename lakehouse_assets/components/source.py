"""A declared source as a Dagster Component: a folder of the project's defs tree whose
``defs.yaml`` names this type and holds a declaration's fields as its ``attributes`` (the folder's
name is the source's). docs/sources.md shows ``dg scaffold defs`` making one and ``dg check``
checking it."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
from dagster.components.scaffold.scaffold import ScaffoldRequest
from dagster_shared.yaml_utils.source_position import SourcePositionTree
from pydantic import BaseModel, Field

from lakehouse_assets.pipeline import Pipeline
from lakehouse_assets.sources.assets import source_pipeline
from lakehouse_assets.sources.declaration.fields import Name
from lakehouse_assets.sources.declaration.files import DeclaredSource, declared
from lakehouse_assets.sources.declaration.model import CDC_MODES, Mode, SourceDeclaration
from lakehouse_assets.table_metadata import with_table_names
from resources import sensor_settings
from resources.settings import schema_prefix

ATTRIBUTES = "attributes"  # the key of a defs.yaml holding the component's fields


class SourceAttributes(SourceDeclaration):
    """A declaration's fields as a ``defs.yaml`` gives them: its name is the folder's unless set."""

    name: Name | None = Field(  # pyright: ignore[reportIncompatibleVariableOverride]
        default=None, description="Tables bronze/<name> and silver/<name>: the folder's name."
    )


class SourceScaffoldParams(BaseModel):
    """What ``dg scaffold defs lakehouse_assets.components.Source <name>`` takes as options
    (dg's own ``--format`` is the file's: a ``defs.yaml`` gets ``format: json``, or
    ``debezium-json`` for a cdc mode, to edit there)."""

    topic: str | None = Field(default=None, description="The topic to read.")
    topic_pattern: str | None = Field(
        default=None, description="A regular expression: every topic whose whole name matches."
    )
    mode: Mode = Field(default="append", description="What the silver table keeps.")


class SourceScaffolder(dg.Scaffolder[SourceScaffoldParams]):
    """Writes a ``defs.yaml`` declaring the source the options describe."""

    @classmethod
    def get_scaffold_params(cls) -> type[SourceScaffoldParams]:
        return SourceScaffoldParams

    def scaffold(self, request: ScaffoldRequest[SourceScaffoldParams]) -> None:
        params = request.params or SourceScaffoldParams()
        topic = params.model_dump(include={"topic", "topic_pattern"}, exclude_none=True)
        encoding = "debezium-json" if params.mode in CDC_MODES else "json"
        dg.scaffold_component(request, {**topic, "format": encoding, "mode": params.mode})


@dg.scaffold_with(SourceScaffolder)
class Source(dg.Component):
    """A declared source: a Kafka topic, or a landing folder of CSV files, into a bronze table
    and a silver table kept as its mode says, with its quarantine, checks and expectations, and
    the sensor that starts its stream. Its attributes are a declaration's fields
    (docs/sources.md); the folder's name is the source's."""

    def __init__(self, source: DeclaredSource) -> None:
        self.source = source

    @classmethod
    def of(cls, declaration: SourceDeclaration) -> Source:
        """The source of a declaration read elsewhere (a ``LAKEHOUSE_SOURCES`` folder's file)."""
        return cls(DeclaredSource(declaration, Path(f"{declaration.name}.yaml"), {}))

    @property
    def declaration(self) -> SourceDeclaration:
        return self.source.declaration

    @functools.cached_property
    def pipeline(self) -> Pipeline:
        """Its assets, sensors and freshness checks, and its tables for maintenance."""
        return source_pipeline(self.declaration, sensor_settings())

    @classmethod
    def get_model_cls(cls) -> type[BaseModel]:
        return SourceAttributes

    @classmethod
    def load(cls, attributes: BaseModel | None, context: dg.ComponentLoadContext) -> Source:
        """The source a ``defs.yaml`` declares: its fields (valid each by itself: Dagster has
        checked them), then the rules across them.

        Raises:
            InvalidDeclaration: a rule across the fields is broken (the file, line and field).
        """
        fields = attributes.model_dump(exclude_unset=True) if attributes else {}
        tree = context.resolution_context.source_position_tree
        path = Path(tree.position.filename) if tree else context.path / "defs.yaml"
        attributes_tree = tree.children.get(ATTRIBUTES) if tree else None
        lines = dict(_attribute_lines(attributes_tree))
        if attributes_tree is not None:  # a field left out: the line of ``attributes``
            lines[()] = attributes_tree.position.start.line
        if fields.get("name") is None:
            fields["name"] = context.path.name
        return cls(declared(fields, path, lines))

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        return self.definitions()

    def definitions(self) -> dg.Definitions:
        """Its assets, named in the catalog, their freshness checks and its sensors."""
        return dg.Definitions(
            assets=with_table_names(self.pipeline.assets, schema_prefix()),
            asset_checks=self.pipeline.freshness_checks,
            sensors=self.pipeline.sensors,
        )


def _attribute_lines(
    tree: SourcePositionTree | None, loc: tuple[Any, ...] = ()
) -> Iterator[tuple[tuple[Any, ...], int]]:
    """``(field path, line)`` of every value under a ``defs.yaml``'s attributes."""
    if tree is None:
        return
    for key, child in tree.children.items():
        yield (*loc, key), child.position.start.line
        yield from _attribute_lines(child, (*loc, key))
