"""A ``cdc-scd1`` table typed by the Kafka Connect schema its Debezium envelopes carry, through
``refine`` (no Kafka, no Dagster): Spark types as docs/sources.md maps them, values exact, a
column the schema gains added, a decimal widened, and a type the table cannot hold quarantined
with its reason; then the issue's case on the broker, through the declared assets. Expected
values are computed by hand in the comments of ``test_connect``."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    BinaryType,
    DateType,
    DecimalType,
    IntegerType,
    StringType,
    TimestampType,
)

from lakehouse_assets.constants import SILVER, asset_key
from lakehouse_assets.sources.assets import source_assets
from lakehouse_assets.sources.declaration.files import load_declaration
from lakehouse_assets_tests.sources.steps import refined
from lakehouse_assets_tests.sources.test_connect import VARIABLE, field
from lakehouse_assets_tests.sources.test_merge_shapes import AT, BRONZE_SCHEMA
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.sample_data import Message, produce
from resources import LakeResource

DECIMAL = "org.apache.kafka.connect.data.Decimal"
FIELDS = [
    {"type": "int32", "optional": False, "field": "id"},
    field("price", "bytes", DECIMAL, scale="2", connect_decimal_precision="12"),
    VARIABLE,
    field("day", "int32", "io.debezium.time.Date"),
    field("at", "int64", "io.debezium.time.MicroTimestamp"),
    field("atz", "string", "io.debezium.time.ZonedTimestamp"),
    field("t", "int64", "io.debezium.time.MicroTime"),
    field("doc", "string", "io.debezium.data.Json"),
    field("data", "bytes"),
]


def bronze_row(fields: list[dict], row: dict, lsn: int, offset: int) -> tuple:
    value = {"type": "struct", "optional": True, "name": "shop.public.t.Value", "fields": fields}
    schema = {"type": "struct", "optional": False, "name": "shop.public.t.Envelope", "fields": [
        {**value, "field": "before"}, {**value, "field": "after"},
        {"type": "string", "optional": False, "field": "op"},
    ]}  # fmt: skip
    payload = {"before": None, "after": row, "op": "c", "source": {"lsn": lsn}}
    envelope = json.dumps({"schema": schema, "payload": payload}).encode()
    return (json.dumps({"id": row["id"]}).encode(), envelope, "t", 0, offset, AT, AT, "insert")


def test_connect_types_become_spark_types_and_their_changes_evolve_or_quarantine(
    tmp_path: Path, resources: dict[str, Any], spark: SparkSession
) -> None:
    (tmp_path / "t.yaml").write_text(
        "topic: t\nformat: debezium-json\nmode: cdc-scd1\nkeys: [id]\norder_by: source.lsn\n"
    )
    source = load_declaration(tmp_path / "t.yaml")
    lake: LakeResource = resources["lake"]
    first = [
        bronze_row(FIELDS, {
            "id": 1, "price": "ATCTEg==", "amount": {"scale": 2, "value": "ATCTEg=="},
            "day": 19783, "at": 1_709_288_130_123_456, "atz": "2024-03-01T10:15:30.123456Z",
            "t": 36_930_123_456, "doc": '{"a": 1}', "data": "AQID",
        }, 10, 0),
        bronze_row(FIELDS, {"id": 2, "price": "/s9s7g==", "amount": None, "day": None,
                            "at": None, "atz": None, "t": None, "doc": None, "data": ""}, 11, 1),
    ]  # fmt: skip
    refined(lake, spark, source, spark.createDataFrame(first, BRONZE_SCHEMA), {"t": 0})
    stored = lake.read(spark, SILVER, source.name)
    columns = ["id", "price", "amount", "day", "at", "atz", "t", "doc", "data"]
    assert [stored.schema[c].dataType for c in columns] == [
        IntegerType(), DecimalType(12, 2), DecimalType(38, 18), DateType(), TimestampType(),
        TimestampType(), StringType(), StringType(), BinaryType(),
    ]  # fmt: skip
    moment = dt.datetime(2024, 3, 1, 10, 15, 30, 123456)  # naive UTC, as Spark returns it
    rows = sorted(tuple(r) for r in stored.select(*columns).collect())
    assert rows == [
        (1, Decimal("199605.94"), Decimal("199605.940000000000000000"), dt.date(2024, 3, 1),
         moment, moment, "10:15:30.123456", '{"a": 1}', bytearray(b"\x01\x02\x03")),
        (2, Decimal("-199605.94"), None, None, None, None, None, None, bytearray(b"")),
    ]  # fmt: skip

    # The table gains a column (ALTER TABLE ADD COLUMN), price becomes numeric(14,4) for a new
    # row, a record with price as text (decimal.handling.mode=string) cannot be held, and one
    # with a logical type no mapping knows is not guessed at.
    wider = [FIELDS[0], field("price", "bytes", DECIMAL, scale="4", connect_decimal_precision="14"),
             field("note", "string")]  # fmt: skip
    text = [FIELDS[0], field("price", "string")]
    unknown = [FIELDS[0], field("geo", "string", "io.example.Geometry")]
    second = [
        bronze_row(wider, {"id": 3, "price": "ATCTEg==", "note": "hi"}, 20, 2),  # 1996.0594
        bronze_row(text, {"id": 1, "price": "199605.95"}, 21, 3),
        bronze_row(unknown, {"id": 2, "geo": "POINT(1 2)"}, 22, 4),
    ]
    refined(lake, spark, source, spark.createDataFrame(second, BRONZE_SCHEMA), {"t": 1})
    stored = lake.read(spark, SILVER, source.name)
    assert stored.schema["price"].dataType == DecimalType(14, 4)
    assert stored.schema["note"].dataType == StringType()
    assert sorted(tuple(r) for r in stored.select("id", "price", "note").collect()) == [
        (1, Decimal("199605.9400"), None), (2, Decimal("-199605.9400"), None),
        (3, Decimal("1996.0594"), "hi"),
    ]  # fmt: skip
    rejected = lake.read(spark, SILVER, f"{source.name}_quarantine").collect()
    assert sorted((r.offset, r.reason) for r in rejected) == [
        (3, "incompatible price: expected decimal(14,4), got string"),
        (4, "unsupported Connect type io.example.Geometry of geo"),
    ]
    assert "geo" not in stored.columns
    schema = json.loads(Path(lake.path(SILVER, "_schemas", "t.json")).read_text())
    assert schema["price"] == "decimal(14,4)" and schema["amount"] == "decimal(38,18)"


TOPIC = "shop.public.orders"
TEXT = "x" * 100  # stands for a TOASTed text: Debezium sends it whole on insert


def test_the_issues_topic_lands_typed_and_keeps_the_toasted_text(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    """Issue 58's report, on the broker: a numeric(12,2) 'ATCTEg==' is 199605.94, not text; an
    update carrying the placeholder for the unchanged text keeps it; the run says which column
    held the placeholder."""
    resources["kafka"].create_topic(TOPIC, partitions=1)
    (tmp_path / "orders.yaml").write_text(
        f"topic: {TOPIC}\nformat: debezium-json\nmode: cdc-scd1\nkeys: [id]\norder_by: source.lsn\n"
    )
    source = load_declaration(tmp_path / "orders.yaml")
    fields = [FIELDS[0], FIELDS[1], field("body", "string")]
    rows = [
        {"id": 1, "price": "ATCTEg==", "body": TEXT},
        {"id": 1, "price": "/s9s7g==", "body": "__debezium_unavailable_value"},
    ]
    messages = []
    for lsn, row in enumerate(rows):
        value = bronze_row(fields, row, 100 + lsn, lsn)[1]
        messages.append(Message(TOPIC, json.dumps({"id": 1}), value.decode()))
    produce(broker.bootstrap_servers, messages)
    result = dg.materialize(source_assets(source), resources=resources)
    lake: LakeResource = resources["lake"]
    stored = lake.read(spark, SILVER, "orders")
    assert stored.schema["price"].dataType == DecimalType(12, 2)
    assert [tuple(r) for r in stored.select("id", "price", "body").collect()] == [
        (1, Decimal("-199605.94"), TEXT)
    ]
    key = asset_key(SILVER, "orders")
    (silver,) = [m for m in result.get_asset_materialization_events() if m.asset_key == key]
    assert silver.materialization.metadata["columns_unavailable"].value == "body"
