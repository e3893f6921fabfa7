"""What a table's materialization tells the Dagster UI beyond its rows: the column schema with a
description of every column, each column's nulls and bounds from the Delta log
(``profiling.file_stats``), the column lineage, and where the code that computes it lives.

The descriptions and lineage are the pipeline's, given by each asset; the column types come
from the Delta table itself, so they are always the table's own.
"""

import inspect
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dagster as dg
import pyarrow as pa
from deltalake import DeltaTable

from lakehouse_assets.constants import BRONZE, GOLD, SILVER, asset_key
from lakehouse_assets.profiling.file_stats import statistics_metadata
from resources import LakeResource
from resources.catalog import schema_name

# Code references are a beta API of Dagster's, warned about at every use: known and chosen.
warnings.filterwarnings("ignore", message=r".*CodeReference", category=dg.BetaWarning)

Column = tuple[str, str, str]  # layer, table, column
LAYERS = (BRONZE, SILVER, GOLD)  # the layers whose tables are registered in the catalog


def type_name(data_type: Any) -> str:
    """A Delta type as Spark SQL writes it: ``long``, ``array<struct<key:string>>``, ..."""
    kind = getattr(data_type, "type", None)
    if isinstance(kind, str) and kind not in ("array", "map", "struct"):
        return kind
    if hasattr(data_type, "element_type"):
        return f"array<{type_name(data_type.element_type)}>"
    if hasattr(data_type, "key_type"):
        return f"map<{type_name(data_type.key_type)},{type_name(data_type.value_type)}>"
    fields = ",".join(f"{f.name}:{type_name(f.type)}" for f in data_type.fields)
    return f"struct<{fields}>"


def column_schema(
    snapshot: DeltaTable, descriptions: Mapping[str, str], otherwise: str | None = None
) -> dg.TableSchema:
    """The table's columns with their Delta types, nullability and ``descriptions`` (else
    ``otherwise``)."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=field.name,
                type=type_name(field.type),
                description=descriptions.get(field.name, otherwise),
                constraints=dg.TableColumnConstraints(nullable=field.nullable),
            )
            for field in snapshot.schema().fields
        ]
    )


def column_lineage(lineage: Mapping[str, tuple[Column, ...]]) -> dg.TableColumnLineage:
    """Dagster's column lineage from ``{column: ((layer, table, upstream column), ...)}``."""
    return dg.TableColumnLineage(
        deps_by_column={
            column: [
                dg.TableColumnDep(asset_key=asset_key(layer, table), column_name=name)
                for layer, table, name in upstream
            ]
            for column, upstream in lineage.items()
        }
    )


def table_metadata(
    lake: LakeResource,
    layer: str,
    table: str,
    descriptions: Mapping[str, str],
    otherwise: str | None = None,
    lineage: Mapping[str, tuple[Column, ...]] | None = None,
) -> dict[str, Any]:
    """A materialization's table metadata: row count, location and Delta version (the lake's),
    the column schema with ``descriptions`` (``otherwise`` for the columns they do not name),
    the columns' statistics from the log and, where given, the column ``lineage``."""
    snapshot = lake.find(layer, table)  # one read of the Delta log for all of the metadata
    metadata = lake.table_metadata(layer, table, snapshot)
    if snapshot is None:
        return metadata
    metadata["dagster/column_schema"] = column_schema(snapshot, descriptions, otherwise)
    metadata.update(statistics_metadata(pa.table(snapshot.get_add_actions(flatten=True))))
    if lineage:
        metadata["dagster/column_lineage"] = column_lineage(lineage)
    return metadata


def code_references(**functions: Callable[..., Any]) -> dict[str, Any]:
    """Asset metadata linking the UI to the functions that compute a table, by label (e.g.
    ``transform=transforms.gym_summary``)."""
    references: list[dg.LocalFileCodeReference | dg.UrlCodeReference] = [
        dg.LocalFileCodeReference(
            file_path=str(inspect.getsourcefile(fn)),
            line_number=inspect.getsourcelines(fn)[1],
            label=label,
        )
        for label, fn in functions.items()
    ]
    return {"dagster/code_references": dg.CodeReferencesMetadataValue(code_references=references)}


def with_table_names(
    assets: Sequence[dg.AssetsDefinition | dg.AssetSpec], schema_prefix: str
) -> list[dg.AssetsDefinition | dg.AssetSpec]:
    """``assets`` with each table's name in the catalog as ``dagster/table_name`` (what the SQL
    endpoint answers to), so the asset page shows it before any run. A dynamically partitioned
    asset (one table per partition) names its tables in each partition's materialization."""

    def named(spec: dg.AssetSpec) -> dg.AssetSpec:
        path = spec.key.path
        if len(path) != 2 or path[0] not in LAYERS:
            return spec
        if isinstance(spec.partitions_def, dg.DynamicPartitionsDefinition):
            return spec
        name = f"{schema_name(schema_prefix, path[0])}.{path[1]}"
        return spec.merge_attributes(metadata={"dagster/table_name": name})

    return list(dg.map_asset_specs(named, assets))
