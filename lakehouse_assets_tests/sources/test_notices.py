"""The pure logic of route-by-type sources on small hand-built frames: notices read and checked,
the newest notice per document against the index, and the location hierarchy by type."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

from pyspark.sql import SparkSession

from lakehouse_assets.sources.declaration.routing import DocumentKind, Routing
from lakehouse_assets.sources.routing import notices

ROUTING = Routing(
    documents={"CommCareCase": DocumentKind(table="cases", month_from="opened_on")},
    domains=("demo",),
    types=("child",),
)
NOW = dt.datetime(2026, 11, 24, tzinfo=dt.UTC)


def change(offset: int, value: dict[str, Any] | str | None) -> tuple:
    text = value if isinstance(value, str) or value is None else json.dumps(value)
    encoded = None if text is None else text.encode()
    return (b"k", encoded, "case-sql", 0, offset, NOW, NOW)


def frame(spark: SparkSession, rows: list[tuple]) -> Any:
    schema = ("key binary, value binary, topic string, partition int, offset long, "
              "timestamp timestamp, ingested_at timestamp")  # fmt: skip
    return spark.createDataFrame(rows, schema)


def case(document_id: str, at: int, kind: str = "CommCareCase", subtype: str | None = "child",
         domain: str = "demo", deletion: bool = False) -> dict[str, Any]:  # fmt: skip
    return {"document_id": document_id, "document_type": kind, "document_subtype": subtype,
            "domain": domain, "is_deletion": deletion, "publish_timestamp": at}  # fmt: skip


def test_notices_are_checked_filtered_and_the_newest_per_document_planned(
    spark: SparkSession,
) -> None:
    changes = frame(spark, [
        change(0, case("a", 10)),
        change(1, case("a", 5, deletion=True)),  # older than the upsert before it
        change(2, case("b", 10)),
        change(3, case("b", 20, kind="CommCareCase-Deleted", subtype=None)),  # hard delete
        change(4, case("c", 30)),  # older than what the index holds: changes nothing
        change(5, case("d", 1, domain="other")),
        change(6, case("e", 1, subtype="secret")),
        change(7, case("f", 1, kind="Unknown")),
        change(8, case("g", 1, subtype=None)),
        change(9, "[1, 2"),
        change(10, None),
    ])  # fmt: skip
    read = notices.notices(changes, ROUTING, "publish_timestamp")
    reasons = {r.offset: r.reason for r in read.where("reason IS NOT NULL").collect()}
    assert reasons == {
        7: "document_type Unknown is not one of ['CommCareCase']",
        8: "missing document_subtype",
        9: "malformed json",
        10: "no value (tombstone)",
    }
    kept = notices.allowed(read.where("reason IS NULL"), ROUTING)
    assert sorted(r._id for r in kept.collect()) == ["a", "a", "b", "b", "c"]
    index = spark.createDataFrame(
        [("b", "demo_case_sql_child", Decimal(10)), ("c", "demo_case_sql_child", Decimal(40))],
        "_id string, _table string, _sequence decimal(38,6)",
    )
    planned = notices.plan(notices.newest(kept), index)
    got = {r._id: (r._table, r._deleted, r._sequence) for r in planned.collect()}
    assert got == {
        "a": ("demo_case_sql_child", False, Decimal(10)),
        "b": ("demo_case_sql_child", True, Decimal(20)),  # found by the index: no subtype
    }
    assert [tuple(r) for r in notices.deletes(planned).collect()] == [("demo_case_sql_child", "b")]


def test_a_user_gets_the_ids_of_their_location_and_its_ancestors_by_type(
    spark: SparkSession,
) -> None:
    hierarchy = spark.createDataFrame(
        [
            ("S", "state", None, []),
            ("D", "district", "S", []),
            ("SV", "supervisor", "D", ["boss"]),  # no project level between
            ("F", "flwc", "SV", ["u1", "u2"]),
        ],
        "location_id string, location_type string, parent_location_id string, "
        "user_ids array<string>",
    )
    levels = ["state", "district", "project", "supervisor", "flwc"]
    rows = notices.user_ancestors(hierarchy, levels).orderBy("_user").collect()
    assert [row.asDict() for row in rows] == [
        {"_user": "boss", "state_id": "S", "district_id": "D", "project_id": None,
         "supervisor_id": "SV", "flwc_id": None},
        {"_user": "u1", "state_id": "S", "district_id": "D", "project_id": None,
         "supervisor_id": "SV", "flwc_id": "F"},
        {"_user": "u2", "state_id": "S", "district_id": "D", "project_id": None,
         "supervisor_id": "SV", "flwc_id": "F"},
    ]  # fmt: skip
