"""Dagster on PostgreSQL, the production shape's storage: the compose deployment's instance
(`docker/dagster.yaml`, read as it is) against a PostgreSQL server started from the machine's
packages. A run's record and its materializations live in the database, where another instance
(another process, as the daemon or the webserver) reads them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg2
import pytest
from pyspark.sql import SparkSession

from lakehouse_assets.constants import BRONZE, SILVER, asset_key
from lakehouse_assets.definitions import all_assets
from lakehouse_assets.fitness.names import LANDING_REGISTERED_USERS, USERS
from lakehouse_assets_tests import fitness_oracle as oracle
from lakehouse_tools import sample_data
from lakehouse_tools.postgres import PostgresServer

REPO_ROOT = Path(__file__).parents[1]
USERS_KEY = asset_key(SILVER, USERS)


@pytest.fixture
def instance_home(
    tmp_path: Path, postgres: PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO_ROOT / "docker" / "dagster.yaml", home / "dagster.yaml")
    for name, value in postgres.environment.items():
        monkeypatch.setenv(name, value)
    return home


def test_runs_and_materializations_live_in_postgres(
    instance_home: Path,
    postgres: PostgresServer,
    env: dict[str, Any],
    lake_root: Path,
    spark: SparkSession,  # the session fixture stops the run's Spark session at the end
) -> None:
    # Two users registered; the sample's registry also holds malformed rows and re-registrations.
    sample = sample_data.generate(users=2, days=1)
    sample_data.write_landing(lake_root, sample.files)
    selection = dg.AssetSelection.assets(
        asset_key(BRONZE, LANDING_REGISTERED_USERS), USERS_KEY
    ).required_multi_asset_neighbors()  # with its quarantine table
    with dg.DagsterInstance.from_config(str(instance_home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        result = dg.materialize(all_assets, selection=selection, resources=env, instance=instance)
        assert result.success

    with dg.DagsterInstance.from_config(str(instance_home)) as another:
        latest = another.get_latest_materialization_event(USERS_KEY)
        assert latest is not None and latest.run_id == result.run_id
        materialization = latest.asset_materialization
        assert materialization is not None
        registrations = len(oracle.users([sample]))  # one row per registration
        assert materialization.metadata["dagster/row_count"].value == registrations > 2

    connection = psycopg2.connect(
        host="127.0.0.1", port=postgres.port, user=postgres.user, dbname="dagster"
    )
    with connection, connection.cursor() as cursor:
        cursor.execute("SELECT status FROM runs WHERE run_id = %s", (result.run_id,))
        assert cursor.fetchall() == [("SUCCESS",)]
    connection.close()
