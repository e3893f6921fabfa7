"""The steps ``lakehouse migrate`` takes over a whole lake, beside each table's upgrade
(``migrations``): its tables read by Delta Lake for Spark, their streams' markers carried, its
schemas kept in its warehouse folder, every table registered in the catalog.

A lake of the versions before Delta Lake for Spark and Spark's Kafka source (tables written by
delta-rs, streams read by a Python Kafka source) is taken over in place:

- Every table is read by Delta Lake for Spark first (``DESCRIBE DETAIL``): its protocol and
  features are printed, and a table Delta cannot read stops the migration naming it.
- The streams keep their checkpoints (their offsets are in the form Spark's Kafka source reads).
  Each bronze table recorded its stream's batches as ``<stream>/<query id>``; Delta's streaming
  sink looks for the query id alone. The last batch is recorded again under that id, so a batch
  the table holds but the checkpoint did not mark as done (a run killed between the two) is
  skipped when the stream runs it again, not written twice.
- ``silver.users`` kept only each user's latest registration; it now keeps them all. When
  bronze holds a registration the table lacks, the table is rebuilt from bronze (a full refresh,
  recorded in the Dagster instance) and the silver tables reading it follow on their next run.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE, CHECKPOINTS_DIR, GOLD, SILVER, stream_name
from lakehouse_assets.migrations import MIGRATE_COMMAND, MigrationError
from lakehouse_assets.profiling.store import PROFILES
from resources import LakeResource, catalog, checkpoints, delta
from resources import metastore as metastores

LAYERS = (BRONZE, SILVER, GOLD, PROFILES)


def table_protocols(spark: SparkSession, lake: LakeResource) -> list[str]:
    """``layer.table: reader N, writer N, features`` of every table, as Delta Lake for Spark reads
    it (one ``DESCRIBE DETAIL`` each).

    Raises:
        MigrationError: Delta Lake for Spark cannot read a table.
    """
    described = []
    for layer in LAYERS:
        for table in lake.tables(layer):
            uri = lake.table_uri(layer, table)
            try:
                detail = spark.sql(f"DESCRIBE DETAIL {delta.table_name(uri)}").first()
            except Exception as error:
                raise MigrationError(
                    f"Delta Lake for Spark cannot read {layer}.{table} ({uri}): {error}"
                ) from error
            assert detail is not None
            features = ", ".join(detail["tableFeatures"] or []) or "no table features"
            described.append(
                f"{layer}.{table}: reader {detail['minReaderVersion']}, writer "
                f"{detail['minWriterVersion']}, {features}"
            )
    return described


def carry_stream_markers(spark: SparkSession, lake: LakeResource) -> dict[str, int]:
    """Record each bronze table's last batch of the earlier version's stream under the app id
    Delta's streaming sink uses (the query id alone); returns ``{table: batch}`` recorded."""
    carried = {}
    for table in lake.tables(BRONZE):
        query_id = checkpoints.query_id(
            lake.spark_path(CHECKPOINTS_DIR, stream_name(BRONZE, table))
        )
        snapshot = lake.find(BRONZE, table)
        if query_id is None or snapshot is None:
            continue
        earlier = snapshot.transaction_version(f"{stream_name(BRONZE, table)}/{query_id}")
        current = snapshot.transaction_version(query_id)
        if earlier is not None and (current is None or current < earlier):
            delta.commit_markers(spark, lake.table_uri(BRONZE, table), {query_id: earlier})
            carried[table] = earlier
    return carried


def relocate_schemas(metastore: str, lake: LakeResource) -> list[tuple[str, str, str]]:
    """Keep the lake's schemas in a PostgreSQL ``metastore`` in the lake's warehouse folder
    (``resources.catalog.warehouse``), where a version before it let Spark put them in the
    working directory of the first application on the metastore; returns (schema, old, new) of
    each moved (``resources.metastore.relocate_schemas``). An embedded metastore is one
    machine's: its schemas stay where they are."""
    if not metastores.is_postgres(metastore):
        return []
    warehouse = catalog.warehouse(lake.spark_path())
    schemas = [catalog.schema_name(lake.schema_prefix, layer) for layer in LAYERS]
    locations = {schema: f"{warehouse}/{schema}.db" for schema in schemas}
    return metastores.relocate_schemas(metastore, locations, default=warehouse)


def register_tables(spark: SparkSession, lake: LakeResource) -> list[str]:
    """Register every table of the lake in the catalog (``LakeResource.register``); returns
    their names.

    Raises:
        MigrationError: a table's name is registered for another location or cannot be a name,
            or a name registered for a table of this lake whose folder holds no table any more.
    """
    names = []
    for layer in LAYERS:
        tables = lake.tables(layer)
        for table in tables:
            try:
                lake.register(spark, layer, table)
            except (catalog.CatalogClash, catalog.InvalidTableName) as error:
                raise MigrationError(str(error)) from error
            names.append(lake.table_name(layer, table))
        schema = catalog.schema_name(lake.schema_prefix, layer)
        for name, found in catalog.schema_tables(spark, schema).items():
            here = catalog.same_location(found.location, lake.spark_path(layer, name))
            if here and name not in tables:
                raise MigrationError(
                    f"{schema}.{name} is registered for {found.location}, which holds no Delta "
                    f"table any more: restore the table, or drop the name (DROP TABLE "
                    f"{schema}.{name}), then run `{MIGRATE_COMMAND}` again."
                )
    return names
