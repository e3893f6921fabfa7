"""The column schema, column lineage and code references a table's materialization carries."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pyarrow as pa
from deltalake import write_deltalake

from lakehouse_assets.constants import GOLD, SILVER, asset_key
from lakehouse_assets.definitions import defs
from lakehouse_assets.fitness.gold import transforms as gold_transforms
from lakehouse_assets.fitness.gold.columns import DESCRIPTIONS, LINEAGE
from lakehouse_assets.fitness.names import GYM_SUMMARY
from lakehouse_assets.table_metadata import code_references, table_metadata
from resources import LakeResource

GYM_SUMMARY_ROWS = pa.table(
    {
        "gym": pa.array(["downtown"]),
        "mac_address": pa.array(["a2:4e:00:00:00:01"]),
        "date": pa.array([None], pa.date32()),
        "minutes_in_gym": pa.array([61.5]),
        "minutes_exercising": pa.array([30.0]),
    }
)


def test_the_column_schema_has_the_tables_types_and_the_given_descriptions(
    tmp_path: Path,
) -> None:
    lake = LakeResource(root=str(tmp_path))
    write_deltalake(lake.table_uri(GOLD, GYM_SUMMARY), GYM_SUMMARY_ROWS)
    metadata = table_metadata(
        lake, GOLD, GYM_SUMMARY, DESCRIPTIONS[GYM_SUMMARY], lineage=LINEAGE[GYM_SUMMARY]
    )
    schema = metadata["dagster/column_schema"]
    assert [(c.name, c.type) for c in schema.columns] == [
        ("gym", "string"),
        ("mac_address", "string"),
        ("date", "date"),
        ("minutes_in_gym", "double"),
        ("minutes_exercising", "double"),
    ]
    assert schema.columns[0].description == "The gym."
    lineage = metadata["dagster/column_lineage"].deps_by_column
    assert lineage["minutes_in_gym"] == [
        dg.TableColumnDep(asset_key=asset_key(SILVER, "gym_logs"), column_name="login"),
        dg.TableColumnDep(asset_key=asset_key(SILVER, "gym_logs"), column_name="logout"),
    ]


def test_nested_types_and_columns_without_a_description(tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path))
    headers = pa.struct([("key", pa.string()), ("value", pa.binary())])
    rows = pa.table({"headers": pa.array([[]], pa.list_(headers)), "n": pa.array([1], pa.int32())})
    write_deltalake(lake.table_uri(SILVER, "clicks"), rows)
    schema = table_metadata(lake, SILVER, "clicks", {"n": "A number."}, otherwise="A field.")[
        "dagster/column_schema"
    ]
    assert [(c.name, c.type, c.description) for c in schema.columns] == [
        ("headers", "array<struct<key:string,value:binary>>", "A field."),
        ("n", "integer", "A number."),
    ]


def test_a_table_not_written_yet_has_no_column_schema(tmp_path: Path) -> None:
    metadata = table_metadata(LakeResource(root=str(tmp_path)), GOLD, GYM_SUMMARY, {})
    assert metadata["dagster/row_count"] == 0 and "dagster/column_schema" not in metadata


def test_code_references_point_at_the_transform() -> None:
    reference = code_references(transform=gold_transforms.gym_summary)["dagster/code_references"]
    [local] = reference.code_references
    source = Path(local.file_path).read_text().splitlines()
    assert source[local.line_number - 1].startswith("def gym_summary(")
    assert local.label == "transform"


def test_every_table_has_owners_tags_and_a_reference_to_its_code() -> None:
    for key in defs.resolve_all_asset_keys():
        spec = defs.get_assets_def(key).specs_by_key[key]
        assert spec.owners, key
        assert spec.tags["lakehouse/layer"] == key.path[0], key
        assert spec.metadata.get("dagster/code_references"), key
