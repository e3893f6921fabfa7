"""A route-by-type source on the embedded broker and a real PostgreSQL document store: change
notices of several types in one topic end in one table per (domain, topic, type), enriched with
the user's location; deletes, filters, late types and type changes. Expected rows are written by
hand from the notices and documents below."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg2
import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from lakehouse_assets.constants import SILVER, asset_key
from lakehouse_assets.definitions import lakehouse_definitions
from lakehouse_assets.sources.assets import source_assets
from lakehouse_assets.sources.declaration.files import load_declaration
from lakehouse_assets.sources.declaration.model import SourceDeclaration
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.postgres import PostgresServer
from lakehouse_tools.sample_data import Message, produce
from resources import DocumentStoreResource, LakeResource, catalog

FORM_XMLNS = "http://openrosa.org/formdesigner/ABC-123"
LEVELS = ["state_id", "district_id", "project_id", "supervisor_id", "flwc_id"]
U1_LOCATION = {"state_id": "S1", "district_id": "D1", "project_id": "P1",
               "supervisor_id": "SV1", "flwc_id": "F1"}  # fmt: skip
NO_LOCATION = dict.fromkeys(LEVELS)


@pytest.fixture
def store(postgres: PostgresServer) -> Iterator[tuple[str, dict[str, str]]]:
    """The document store's URL and its tables (new ones for each test)."""
    suffix = uuid.uuid4().hex[:8]
    tables = {"CommCareCase": f"cases_{suffix}", "XFormInstance": f"forms_{suffix}"}
    with psycopg2.connect(postgres.url) as connection, connection.cursor() as cursor:
        for table in tables.values():
            cursor.execute(f"CREATE TABLE {table} (id text PRIMARY KEY, doc jsonb NOT NULL)")
    yield postgres.url, tables
    with psycopg2.connect(postgres.url) as connection, connection.cursor() as cursor:
        for table in tables.values():
            cursor.execute(f"DROP TABLE {table}")


def save(url: str, table: str, documents: list[dict[str, Any]]) -> None:
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        for document in documents:
            cursor.execute(
                f"INSERT INTO {table} VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET doc = "
                "excluded.doc",
                (document["_id"], json.dumps(document)),
            )


def notice(
    document_id: str,
    document_type: str,
    subtype: str | None,
    at: int,
    domain: str = "demo",
    deletion: bool = False,
) -> dict[str, Any]:
    """A change notice published ``at`` minutes after 2026-11-24 00:00 UTC."""
    published = dt.datetime(2026, 11, 24, tzinfo=dt.UTC) + dt.timedelta(minutes=at)
    return {"document_id": document_id, "document_type": document_type,
            "document_subtype": subtype, "domain": domain, "is_deletion": deletion,
            "publish_timestamp": published.isoformat(), "server_modified_on": None}  # fmt: skip


def send(broker: EmbeddedBroker, topic: str, values: list[dict[str, Any] | str]) -> None:
    messages = []
    for value in values:
        key = value.get("document_id") if isinstance(value, dict) else None
        messages.append(Message(topic, key, value if isinstance(value, str) else json.dumps(value)))
    produce(broker.bootstrap_servers, messages)


def declare(tmp_path: Path, tables: dict[str, str]) -> SourceDeclaration:
    path = tmp_path / "commcare.yaml"
    path.write_text(
        f"""topic_pattern: '(case|form)-sql'
mode: route-by-type
order_by: publish_timestamp
partition_by: [month, supervisor_id]
routing:
  documents:
    XFormInstance:
      table: {tables["XFormInstance"]}
      month_from: form.meta.timeEnd
      user_from: form.meta.userID
    CommCareCase: {{table: {tables["CommCareCase"]}, month_from: opened_on, user_from: user_id}}
  domains: [demo]
  types: [pregnancy, child, household, ABC-123]
  locations: {{topic: location, levels: [state, district, project, supervisor, flwc]}}
"""
    )
    return load_declaration(path)


def run(
    source: SourceDeclaration, resources: dict[str, Any], instance: dg.DagsterInstance, url: str
) -> dict[str, Any]:
    """Materialize the source's bronze and silver assets; returns the index's metadata."""
    assets = [a for a in source_assets(source) if isinstance(a, dg.AssetsDefinition)]
    result = dg.materialize(
        assets,
        resources={**resources, "documents": DocumentStoreResource(url=url)},
        instance=instance,
        raise_on_error=False,
    )
    assert result.success
    index = asset_key(SILVER, "commcare_documents")
    (found,) = [m for m in result.get_asset_materialization_events() if m.asset_key == index]
    return {k: v.value for k, v in found.materialization.metadata.items()}


def crash_before_the_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the router die after writing the routed tables and the quarantine, before the
    index's commit (which records the batch as consumed)."""
    merge = LakeResource.merge

    def failing(self: LakeResource, layer: str, table: str, *args: Any, **kwargs: Any) -> int:
        if table == "commcare_documents":
            raise RuntimeError("killed before the index's commit")
        return merge(self, layer, table, *args, **kwargs)

    monkeypatch.setattr(LakeResource, "merge", failing)


def table_rows(spark: SparkSession, lake: LakeResource, table: str, columns: list[str]) -> list:
    frame = lake.read(spark, SILVER, table).select(*columns).orderBy("_id")
    return [row.asDict(recursive=True) for row in frame.collect()]


def test_notices_are_routed_to_a_table_per_type_enriched_merged_and_deleted(
    tmp_path: Path,
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    spark: SparkSession,
    store: tuple[str, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, tables = store
    source = declare(tmp_path, tables)
    lake: LakeResource = resources["lake"]
    for topic in ("case-sql", "form-sql", "location"):
        resources["kafka"].create_topic(topic, partitions=1)
    instance = dg.DagsterInstance.ephemeral()
    send(broker, "location", [
        {"location_id": "S1", "location_type": "state", "parent_location_id": None},
        {"location_id": "D1", "location_type": "district", "parent_location_id": "S1"},
        {"location_id": "P1", "location_type": "project", "parent_location_id": "D1"},
        {"location_id": "SV1", "location_type": "supervisor", "parent_location_id": "P1"},
        {"location_id": "F1", "location_type": "flwc", "parent_location_id": "SV1",
         "user_ids": ["u1"]},
        # Bad location records (issue 31, 4): each is quarantined with its reason.
        {"location_id": "X1", "location_type": "district", "parent_id": "S1"},
        {"location_id": "X2", "location_type": "county", "parent_location_id": "S1"},
        {"location_type": "state"},
        "[1]",
    ])  # fmt: skip
    case = {"indices": [], "closed": False}
    save(url, tables["CommCareCase"], [
        {"_id": "c1", "case_type": "pregnancy", "opened_on": "2026-10-05T08:00:00Z",
         "user_id": "u1", "properties": {"edd": "2027-01-01", "risk": {"level": 2}}, **case},
        {"_id": "c2", "case_type": "child", "opened_on": "2026-11-01T00:00:00Z",
         "user_id": "u2", "properties": {"dob": "2026-10-30"}, **case},
        {"_id": "c4", "case_type": "child", "opened_on": "2026-11-02T00:00:00Z",
         "user_id": "u1", "properties": {"dob": "2026-10-31"}, **case},
        {"_id": "c5", "case_type": "pregnancy", "opened_on": "2026-11-03T00:00:00Z",
         "user_id": "u1", "properties": {"edd": "2027-03-01", "risk": {"level": 1}}, **case},
        {"_id": "c8", "case_type": "secret", "opened_on": "2026-11-03T00:00:00Z",
         "user_id": "u1", "properties": {}, **case},
        {"_id": "c9", "case_type": "pregnancy", "opened_on": "2026-11-03T00:00:00Z",
         "user_id": "u1", "properties": {}, **case},
    ])  # fmt: skip
    save(url, tables["XFormInstance"], [
        {"_id": "f1", "xmlns": FORM_XMLNS,
         "form": {"meta": {"timeEnd": "2026-11-20T10:00:00Z", "userID": "u1"}, "weight": 3.2}},
    ])  # fmt: skip
    send(broker, "case-sql", [
        notice("c1", "CommCareCase", "pregnancy", 1),
        notice("c2", "CommCareCase", "child", 2),
        notice("c4", "CommCareCase", "child", 3),
        notice("c4", "CommCareCase", "child", 9, deletion=True),  # the delete is later: it wins
        notice("c5", "CommCareCase", "pregnancy", 8),  # the upsert is later, though sent first
        notice("c5", "CommCareCase", "pregnancy", 4, deletion=True),
        notice("c8", "CommCareCase", "secret", 5),  # a type not kept
        notice("c9", "CommCareCase", "pregnancy", 5, domain="other"),  # a domain not kept
        notice("c7", "CommCareCase", "pregnancy", 6),  # not in the store (deleted meanwhile)
        "{not json",
    ])  # fmt: skip
    send(broker, "form-sql", [notice("f1", "XFormInstance", FORM_XMLNS, 7)])

    first = run(source, resources, instance, url)

    assert (first["notices_read"], first["records_rejected"]) == (11, 1)
    assert (first["notices_filtered"], first["documents_missing"]) == (2, 1)
    # At most one query to the store per Spark partition of the batch's documents.
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 0)
    assert 1 <= first["document_store_queries"] <= partitions
    assert sorted(instance.get_dynamic_partitions("commcare_types")) == [
        "demo/case-sql/child", "demo/case-sql/pregnancy", "demo/form-sql/ABC-123"
    ]  # fmt: skip
    pregnancy = ["_id", "properties__edd", "properties__risk__level", "indices", "month", *LEVELS]
    assert table_rows(spark, lake, "demo_case_sql_pregnancy", pregnancy) == [
        {"_id": "c1", "properties__edd": "2027-01-01", "properties__risk__level": 2,
         "indices": [], "month": dt.date(2026, 10, 1), **U1_LOCATION},
        {"_id": "c5", "properties__edd": "2027-03-01", "properties__risk__level": 1,
         "indices": [], "month": dt.date(2026, 11, 1), **U1_LOCATION},
    ]  # fmt: skip
    child = ["_id", "properties__dob", "month", *LEVELS]
    assert table_rows(spark, lake, "demo_case_sql_child", child) == [
        {"_id": "c2", "properties__dob": "2026-10-30", "month": dt.date(2026, 11, 1),
         **NO_LOCATION},
    ]  # fmt: skip
    form = ["_id", "form__weight", "form__meta__userID", "month", "supervisor_id"]
    assert table_rows(spark, lake, "demo_form_sql_abc_123", form) == [
        {"_id": "f1", "form__weight": 3.2, "form__meta__userID": "u1",
         "month": dt.date(2026, 11, 1), "supervisor_id": "SV1"},
    ]  # fmt: skip
    layout = DeltaTable(lake.table_uri(SILVER, "demo_case_sql_pregnancy")).metadata()
    assert layout.partition_columns == ["month", "supervisor_id"]
    quarantined = lake.read(spark, SILVER, "commcare_quarantine").orderBy("offset").collect()
    levels = "['state', 'district', 'project', 'supervisor', 'flwc']"
    assert [(row.source, row.offset, row.reason) for row in quarantined] == [
        ("location", 5, "unknown field parent_id (a location has location_id, location_type, "
                        "parent_location_id, user_ids)"),
        ("location", 6, f"location_type county is not one of {levels}"),
        ("location", 7, "missing location_id"),
        ("location", 8, "malformed json"),
        ("case-sql", 9, "malformed json"),
    ]  # fmt: skip
    hierarchy = lake.read(spark, SILVER, "commcare_locations").select("location_id").collect()
    assert sorted(row.location_id for row in hierarchy) == ["D1", "F1", "P1", "S1", "SV1"]

    # A hard delete (no subtype) and a soft delete in one batch; a fourth type, first seen now.
    save(url, tables["CommCareCase"], [
        {"_id": "h1", "case_type": "household", "opened_on": "2026-11-10T00:00:00Z",
         "user_id": "u1", "properties": {"members": 3}, **case},
    ])  # fmt: skip
    send(broker, "case-sql", [
        notice("c1", "CommCareCase-Deleted", None, 20),
        notice("c2", "CommCareCase", "child", 21, deletion=True),
        notice("h1", "CommCareCase", "household", 22),
        notice("c5", "CommCareCase", "pregnancy", 2),  # older than what the lake holds: ignored
    ])  # fmt: skip
    with monkeypatch.context() as patched:  # a first attempt dies: the re-run finishes the batch
        crash_before_the_index(patched)
        with pytest.raises(AssertionError):
            run(source, resources, instance, url)
    household = ["_id", "properties__members"]
    assert table_rows(spark, lake, "demo_case_sql_household", household) == [
        {"_id": "h1", "properties__members": 3}
    ]  # written before the crash

    run(source, resources, instance, url)

    assert table_rows(spark, lake, "demo_case_sql_pregnancy", ["_id"]) == [{"_id": "c5"}]
    assert table_rows(spark, lake, "demo_case_sql_child", ["_id"]) == []
    assert table_rows(spark, lake, "demo_case_sql_household", household) == [
        {"_id": "h1", "properties__members": 3}
    ]
    assert "demo/case-sql/household" in instance.get_dynamic_partitions("commcare_types")
    # The type first seen in this batch has its table in the catalog, read by its name.
    silver = catalog.schema_name(lake.schema_prefix, SILVER)
    shown = {row.tableName for row in spark.sql(f"SHOW TABLES IN {silver}").collect()}
    assert shown >= {
        "demo_case_sql_household", "demo_case_sql_pregnancy", "demo_case_sql_child",
        "demo_form_sql_abc_123", "commcare_quarantine", "commcare_locations",
    }  # fmt: skip
    household_table = lake.table_name(SILVER, "demo_case_sql_household")
    by_name = spark.sql(f"SELECT _id, properties__members FROM {household_table}").collect()
    assert [tuple(row) for row in by_name] == [("h1", 3)]

    # A field's type changes: long -> double widens the column; text is quarantined.
    save(url, tables["CommCareCase"], [
        {"_id": "h2", "case_type": "household", "opened_on": "2026-11-11T00:00:00Z",
         "user_id": "u1", "properties": {"members": 3.5}, **case},
        {"_id": "h3", "case_type": "household", "opened_on": "2026-11-12T00:00:00Z",
         "user_id": "u1", "properties": {"members": "three"}, **case},
    ])  # fmt: skip
    send(broker, "case-sql", [notice("h2", "CommCareCase", "household", 30),
                              notice("h3", "CommCareCase", "household", 31)])  # fmt: skip

    third = run(source, resources, instance, url)

    assert (third["notices_read"], third["records_rejected"]) == (2, 1)  # h3's document
    widened = spark.sql(f"SELECT _id, properties__members FROM {household_table} ORDER BY _id")
    assert [tuple(row) for row in widened.collect()] == [("h1", 3.0), ("h2", 3.5)]
    registered = catalog.registered(spark, silver, "demo_case_sql_household")
    assert registered is not None
    assert " |-- properties__members: double (nullable = true)" in registered.schema_tree

    assert table_rows(spark, lake, "demo_case_sql_household", ["_id", "properties__members"]) == [
        {"_id": "h1", "properties__members": 3.0}, {"_id": "h2", "properties__members": 3.5}
    ]  # fmt: skip
    quarantine = lake.read(spark, SILVER, "commcare_quarantine").where("source != 'location'")
    reasons = [r.reason for r in quarantine.collect()]
    assert sorted(reasons) == [
        "incompatible properties.members: expected double, got string", "malformed json"
    ]  # fmt: skip

    # Silver's nightly maintenance compacts and vacuums every routed table: one observation per
    # partition (beside those of the source's own tables).
    job = lakehouse_definitions([source]).resolve_job_def("maintain_silver")
    maintained = job.execute_in_process(
        resources={"lake": lake, "spark": resources["spark"]}, instance=instance
    )
    observed = [e.asset_observation_data.asset_observation for e in maintained.all_events
                if e.event_type == dg.DagsterEventType.ASSET_OBSERVATION]  # fmt: skip
    assert sorted(o.partition for o in observed if o.partition is not None) == [
        "demo/case-sql/child", "demo/case-sql/household", "demo/case-sql/pregnancy",
        "demo/form-sql/ABC-123",
    ]  # fmt: skip


def test_a_batch_with_no_document_to_fetch_leaves_the_source_moving(
    tmp_path: Path,
    broker: EmbeddedBroker,
    resources: dict[str, Any],
    spark: SparkSession,
    store: tuple[str, dict[str, str]],
) -> None:
    """A first batch of deletes only (one of a case never seen) and of notices filtered out
    fetches no document: the run succeeds, and the next batch's case is routed; a third batch
    of deletes only (of that case, and of one never seen) empties its table."""
    url, tables = store
    source = declare(tmp_path, tables)
    for topic in ("case-sql", "form-sql", "location"):
        resources["kafka"].create_topic(topic, partitions=1)
    instance = dg.DagsterInstance.ephemeral()
    send(broker, "case-sql", [
        notice("c1", "CommCareCase-Deleted", None, 1),  # a hard delete of a case never seen
        notice("c2", "CommCareCase", "child", 2, deletion=True),  # a soft delete
        notice("c8", "CommCareCase", "secret", 3),  # a type not kept
        notice("c9", "CommCareCase", "pregnancy", 4, domain="other"),  # a domain not kept
    ])  # fmt: skip

    first = run(source, resources, instance, url)

    assert (first["notices_read"], first["records_rejected"]) == (4, 0)
    assert (first["notices_filtered"], first["documents_missing"]) == (2, 0)
    assert first["document_store_queries"] == 0
    assert instance.get_dynamic_partitions("commcare_types") == []

    save(url, tables["CommCareCase"], [
        {"_id": "c3", "case_type": "child", "opened_on": "2026-11-05T00:00:00Z",
         "user_id": "u9", "properties": {"dob": "2026-11-04"}, "indices": [], "closed": False},
    ])  # fmt: skip
    send(broker, "case-sql", [notice("c3", "CommCareCase", "child", 5)])

    second = run(source, resources, instance, url)

    assert (second["notices_read"], second["records_rejected"]) == (1, 0)
    child = ["_id", "properties__dob", "month"]
    assert table_rows(spark, resources["lake"], "demo_case_sql_child", child) == [
        {"_id": "c3", "properties__dob": "2026-11-04", "month": dt.date(2026, 11, 1)}
    ]

    # Deletes only, on the table the second batch made: of its case, and of one never seen.
    send(broker, "case-sql", [
        notice("c3", "CommCareCase", "child", 6, deletion=True),
        notice("c5", "CommCareCase-Deleted", None, 7),
    ])  # fmt: skip

    third = run(source, resources, instance, url)

    assert (third["notices_read"], third["records_rejected"]) == (2, 0)
    assert third["document_store_queries"] == 0
    assert table_rows(spark, resources["lake"], "demo_case_sql_child", child) == []
