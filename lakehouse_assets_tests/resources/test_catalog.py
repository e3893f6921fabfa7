"""Every table by its name: a write registers its table in the Spark application's catalog, under
the lake's schemas, at its location; the metastore's copy of the columns follows the table; a
name registered for another location is refused, never taken over."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from lakehouse_assets.lake_migrations import register_tables
from lakehouse_assets.migrations import MigrationError
from lakehouse_tools.service import free_port
from resources import LakeResource, catalog
from resources.metastore import (
    MetastoreSettingError,
    MetastoreUnavailable,
    launcher_environment,
    prepare,
    spark_settings,
)


def test_schema_names_follow_the_layer_and_the_prefix() -> None:
    assert catalog.schema_name("", "gold") == "gold"
    assert catalog.schema_name("acme", "gold") == "acme_gold"
    assert LakeResource(root="/l", schema_prefix="").table_name("gold", "x") == "gold.x"


@pytest.mark.parametrize("name", ["Orders", "2orders", "orders-eu", "a" * 129, ""])
def test_a_name_the_catalog_cannot_hold_is_refused_naming_it(name: str) -> None:
    with pytest.raises(catalog.InvalidTableName, match="cannot be a table's name"):
        catalog.check_name(name)


def test_a_bad_schema_prefix_is_refused_naming_the_variable() -> None:
    from resources.settings import ENV_SCHEMA_PREFIX, schema_prefix

    with pytest.raises(ValueError, match=ENV_SCHEMA_PREFIX):
        schema_prefix({ENV_SCHEMA_PREFIX: "Acme-Lake"})
    assert schema_prefix({ENV_SCHEMA_PREFIX: "acme_2"}) == "acme_2"


def test_locations_compare_with_or_without_the_file_scheme() -> None:
    assert catalog.same_location("file:/data/lake/gold/x", "/data/lake/gold/x")
    assert catalog.same_location("file:///data/lake/gold/x/", "/data/lake/gold/x")
    assert catalog.same_location("s3a://b/lake/gold/x", "s3a://b/lake/gold/x")
    assert not catalog.same_location("file:/data/lake/gold/x", "/data/other/gold/x")
    assert not catalog.same_location("s3a://b/lake/gold/x", "s3a://c/lake/gold/x")


def test_the_columns_tree_is_sparks_own(tmp_path: Path) -> None:
    """What the catalog shows of a schema (Spark's ``treeString``), from delta-rs's fields."""
    spark_schema = T.StructType(
        [
            T.StructField("id", T.LongType(), False),
            T.StructField("s", T.StructType([T.StructField("a", T.IntegerType())])),
            T.StructField("tags", T.ArrayType(T.StringType())),
            T.StructField("m", T.MapType(T.StringType(), T.DecimalType(10, 2), False)),
            T.StructField("a b", T.TimestampType()),
            T.StructField("day", T.DateType()),
        ]
    )
    arrow = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            pa.field("s", pa.struct([pa.field("a", pa.int32())])),
            pa.field("tags", pa.list_(pa.string())),
            pa.field("m", pa.map_(pa.string(), pa.field("v", pa.decimal128(10, 2), False))),
            pa.field("a b", pa.timestamp("us", tz="UTC")),
            pa.field("day", pa.date32()),
        ]
    )
    write_deltalake(str(tmp_path), pa.Table.from_pylist([], schema=arrow))
    fields = DeltaTable(str(tmp_path)).schema().fields
    assert catalog.schema_tree(fields) == spark_schema.treeString().rstrip("\n")


def test_a_metastore_is_a_folder_or_a_postgresql_database(tmp_path: Path) -> None:
    derby = spark_settings("/data/metastore")
    assert derby["spark.sql.catalogImplementation"] == "hive"
    url = derby["spark.hadoop.javax.jdo.option.ConnectionURL"]
    assert url == "jdbc:derby:;databaseName=/data/metastore/metastore_db;create=true"
    driver = tmp_path / "org.postgresql_postgresql-42.7.14.jar"
    driver.touch()
    postgres = spark_settings("postgresql://hive:s%40cret@db/metastore", jars_dir=tmp_path)
    jdo = "spark.hadoop.javax.jdo.option."
    assert postgres[f"{jdo}ConnectionURL"] == "jdbc:postgresql://db:5432/metastore"
    assert postgres[f"{jdo}ConnectionUserName"] == "hive"
    assert postgres[f"{jdo}ConnectionPassword"] == "s@cret"
    launcher = launcher_environment("postgresql://db/m", {}, jars_dir=tmp_path)
    assert launcher == {
        "SPARK_DIST_CLASSPATH": str(tmp_path / "org.postgresql_postgresql-42.7.14.jar")
    }
    assert launcher_environment("postgresql://db/m", launcher, jars_dir=tmp_path) == {}
    assert launcher_environment("/data/metastore", {}, jars_dir=tmp_path) == {}


@pytest.mark.parametrize(
    ("metastore", "message"),
    [
        ("mysql://db/metastore", "not a mysql:// URL"),
        ("postgresql://hive:s3cret@db:5432/", "must name a host and a database"),
        ("postgresql://hive:s3cret@:5432/metastore", "must name a host and a database"),
    ],
)
def test_a_metastore_setting_that_names_no_database_is_refused_naming_it(
    metastore: str, message: str
) -> None:
    with pytest.raises(MetastoreSettingError, match=f"LAKEHOUSE_METASTORE .*{message}") as error:
        spark_settings(metastore)
    assert "s3cret" not in str(error.value)


def test_an_unreachable_metastore_database_is_a_clear_error_without_its_password() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(
        MetastoreUnavailable, match=r"LAKEHOUSE_METASTORE.*cannot be reached"
    ) as error:
        prepare(f"postgresql://hive:s3cret@127.0.0.1:{port}/metastore")
    assert "s3cret" not in str(error.value)


# ----- against the session's Spark ------------------------------------------------------------
def schema_folder(spark: SparkSession, schema: str) -> str:
    """The folder the catalog gives ``schema``, as Spark describes it."""
    rows = spark.sql(f"DESCRIBE SCHEMA EXTENDED {schema}").collect()
    return next(row["info_value"] for row in rows if row["info_name"] == "Location")


def test_a_write_registers_its_table_by_name(spark: SparkSession, tmp_path: Path) -> None:
    lake = LakeResource(root=str(tmp_path / "lake"))
    lake.append("silver", "users", spark.createDataFrame([(1, "a"), (2, "b")], "id long, n string"))
    name = lake.table_name("silver", "users")
    assert name == f"{lake.schema_prefix}_silver.users"
    assert spark.sql(f"SELECT sum(id) AS s FROM {name}").first()["s"] == 3  # type: ignore[index]
    shown = spark.sql(f"SHOW TABLES IN {lake.schema_prefix}_silver").collect()
    assert [row["tableName"] for row in shown] == ["users"]
    found = catalog.registered(spark, f"{lake.schema_prefix}_silver", "users")
    assert found is not None
    assert catalog.same_location(found.location, f"{tmp_path}/lake/silver/users")
    assert found.schema_tree.splitlines()[1:] == [
        " |-- id: long (nullable = true)",
        " |-- n: string (nullable = true)",
    ]
    # The schema's own folder is the lake's (never a layer's: DROP SCHEMA ... CASCADE deletes it).
    schema = f"{lake.schema_prefix}_silver"
    assert schema_folder(spark, schema) == f"file:{tmp_path}/lake/_warehouse/{schema}.db"


def test_a_table_its_first_writer_left_unregistered_is_registered_by_the_next_write(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A crash between a table's first commit and its registration: the next write mends it."""
    root = tmp_path / "lake"
    write_deltalake(str(root / "silver" / "late"), pa.table({"id": [1]}))  # version 0, no name
    lake = LakeResource(root=str(root))
    name = lake.table_name("silver", "late")
    assert catalog.registered(spark, f"{lake.schema_prefix}_silver", "late") is None
    lake.append("silver", "late", spark.createDataFrame([(2,)], "id long"))
    assert sorted(row["id"] for row in spark.table(name).collect()) == [1, 2]


def test_a_table_on_object_storage_is_registered_by_name(
    spark: SparkSession, s3_lake_root: str
) -> None:
    lake = LakeResource(root=s3_lake_root)
    lake.append("gold", "s3", spark.createDataFrame([(1, "x")], "id long, tag string"))
    found = catalog.registered(spark, f"{lake.schema_prefix}_gold", "s3")
    assert found is not None and found.location == f"{s3_lake_root}/gold/s3"
    rows = spark.table(lake.table_name("gold", "s3")).collect()
    assert [tuple(row) for row in rows] == [(1, "x")]
    schema = f"{lake.schema_prefix}_gold"
    assert schema_folder(spark, schema) == f"{s3_lake_root}/_warehouse/{schema}.db"


def test_the_catalog_copy_of_the_columns_follows_a_new_column(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = LakeResource(root=str(tmp_path / "lake"))
    lake.append("bronze", "t", spark.createDataFrame([(1,)], "id long"))
    lake.append("bronze", "t", spark.createDataFrame([(2, 0.5)], "id long, score double"))
    found = catalog.registered(spark, f"{lake.schema_prefix}_bronze", "t")
    assert found is not None
    assert " |-- score: double (nullable = true)" in found.schema_tree.splitlines()
    rows = spark.sql(f"SELECT id, score FROM {lake.table_name('bronze', 't')} ORDER BY id")
    assert [tuple(row) for row in rows.collect()] == [(1, None), (2, 0.5)]


def test_registration_survives_a_rebuild_and_maintenance(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = LakeResource(root=str(tmp_path / "lake"))
    lake.append("gold", "r", spark.createDataFrame([(1,), (2,)], "id long"))
    lake.replace("gold", "r", spark.createDataFrame([(7, "x")], "id long, tag string"))
    name = lake.table_name("gold", "r")
    spark.sql(f"OPTIMIZE {name}")
    spark.sql(f"VACUUM {name} RETAIN 168 HOURS")
    assert [tuple(row) for row in spark.sql(f"SELECT * FROM {name}").collect()] == [(7, "x")]


def test_a_name_registered_for_another_location_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    first = LakeResource(root=str(tmp_path / "first"))
    second = LakeResource(root=str(tmp_path / "second"))
    prefix = first.schema_prefix  # this test's, as the second lake's
    first.append("gold", "g", spark.createDataFrame([(1,)], "id long"))
    with pytest.raises(catalog.CatalogClash, match=f"{prefix}_gold.g is registered .*first"):
        second.append("gold", "g", spark.createDataFrame([(2,)], "id long"))
    name = first.table_name("gold", "g")
    assert [tuple(row) for row in spark.sql(f"SELECT * FROM {name}").collect()] == [(1,)]


def test_migrate_registers_every_table_and_refuses_one_gone(
    spark: SparkSession, tmp_path: Path
) -> None:
    root = tmp_path / "lake"
    for layer, table in [("bronze", "b"), ("silver", "s"), ("gold", "g")]:
        write_deltalake(str(root / layer / table), pa.table({"id": [1, 2]}))  # no catalog
    lake = LakeResource(root=str(root))
    assert register_tables(spark, lake) == [
        lake.table_name("bronze", "b"),
        lake.table_name("silver", "s"),
        lake.table_name("gold", "g"),
    ]
    count = spark.sql(f"SELECT count(*) AS n FROM {lake.table_name('silver', 's')}").first()
    assert count["n"] == 2  # type: ignore[index]
    for path in sorted((root / "gold" / "g").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (root / "gold" / "g").rmdir()
    with pytest.raises(MigrationError, match=r"_gold\.g is registered for .* holds no Delta"):
        register_tables(spark, lake)
