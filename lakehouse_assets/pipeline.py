"""What a pipeline gives the definitions, the same for the fitness reference pipeline
(``fitness``) and for each declared source (``sources.assets.source_pipeline``): its assets, the
sensors starting its streams, the freshness checks of its bronze tables, and the tables that
maintenance keeps and the profile job profiles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import dagster as dg

from lakehouse_assets.schedules.maintenance import TableLister


@dataclass(frozen=True)
class Pipeline:
    """One pipeline's part of the definitions.

    ``tables``: its tables per layer; ``listers``: what lists, when maintenance runs, the silver
    tables it adds as it runs (a route-by-type source's, one per type met); ``z_order``: the
    columns OPTIMIZE Z-orders a table by (the columns its readers filter on; others are
    bin-packed)."""

    assets: Sequence[dg.AssetsDefinition | dg.AssetSpec]
    sensors: Sequence[dg.SensorDefinition] = ()
    freshness_checks: Sequence[dg.AssetChecksDefinition] = ()
    tables: Mapping[str, Sequence[str]] = field(default_factory=dict)
    listers: Sequence[TableLister] = ()
    z_order: Mapping[str, Sequence[str]] = field(default_factory=dict)


def tables_by_layer(pipelines: Sequence[Pipeline]) -> dict[str, list[str]]:
    """Every table of ``pipelines``, per layer, in their order."""
    tables: dict[str, list[str]] = {}
    for pipeline in pipelines:
        for layer, names in pipeline.tables.items():
            tables.setdefault(layer, []).extend(names)
    return tables
