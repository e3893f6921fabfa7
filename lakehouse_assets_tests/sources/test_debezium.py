"""Debezium CDC sources on the embedded broker: one topic of change events, in Debezium's
documented envelope (with and without the ``schema``/``payload`` wrapper), read by an SCD1 and
an SCD2 declaration. The expected tables are written by hand from the events."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import dagster as dg
from pyspark.sql import SparkSession

from lakehouse_assets.constants import SILVER
from lakehouse_assets.sources.assets import source_assets
from lakehouse_assets.sources.declaration.files import load_declaration
from lakehouse_tools.broker import EmbeddedBroker
from lakehouse_tools.sample_data import Message, produce
from resources import LakeResource

TOPIC = "shop.public.customers"
ENVELOPE_SCHEMA = {"type": "struct", "optional": False, "name": f"{TOPIC}.Envelope", "fields": []}


def change(op: str, key: int, lsn: int, name: str | None = None, wrapped: bool = True) -> Message:
    """A Debezium PostgreSQL change event of the row ``(key, name)`` at log position ``lsn``:
    ``after`` for c, r and u (``before`` too for u, as with REPLICA IDENTITY FULL), ``before``
    for d."""
    row = {"id": key, "name": name} if name is not None else {"id": key}
    payload = {
        "before": row if op in ("u", "d") else None,
        "after": row if op != "d" else None,
        "source": {"version": "2.7.0.Final", "connector": "postgresql", "name": "shop",
                   "ts_ms": 1_700_000_000_000 + lsn, "snapshot": "true" if op == "r" else "false",
                   "db": "shop", "schema": "public", "table": "customers", "lsn": lsn},
        "op": op,
        "ts_ms": 1_700_000_000_000 + lsn,
    }  # fmt: skip
    value = {"schema": ENVELOPE_SCHEMA, "payload": payload} if wrapped else payload
    return Message(TOPIC, json.dumps({"id": key}), json.dumps(value))


def tombstone(key: int) -> Message:
    return Message(TOPIC, json.dumps({"id": key}), None)


BATCH_1 = [
    change("r", 1, 100, "Ann"),  # snapshot
    change("r", 2, 100, "Bob"),
    change("c", 3, 110, "Cy"),
    change("u", 1, 120, "Anna"),
    change("u", 1, 120, "Anna"),  # a duplicate
    change("d", 2, 130),
    tombstone(2),
    change("u", 3, 150, "Cyd", wrapped=False),
    change("u", 3, 140, "Cy-old"),  # older than the one before it
    change("d", 4, 160),  # the delete arrives before its row
    change("c", 4, 155, "Di"),
]
BATCH_2 = [
    change("u", 2, 125, "Bob-late"),  # older than 2's delete
    change("c", 2, 200, "Bob2"),  # inserted again, after the delete
    change("u", 1, 110, "Ann-old"),  # late and older
    change("d", 3, 210),
    Message(TOPIC, "{}", json.dumps({"op": "x", "after": {"id": 9}, "source": {"lsn": 1}})),
    Message(TOPIC, "{}", json.dumps({"id": 9, "name": "not an envelope"})),
    Message(TOPIC, "{}", json.dumps({"op": "c", "after": {"name": "No id"}, "source": {"lsn": 2}})),
    Message(TOPIC, "{}", json.dumps({"op": "c", "after": {"id": 8, "name": "No lsn"}})),
]


def declare(tmp_path: Path, name: str, mode: str) -> Any:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"topic: {TOPIC}\nformat: debezium-json\nmode: {mode}\nkeys: [id]\norder_by: source.lsn\n"
    )
    return load_declaration(path)


def table(spark: SparkSession, lake: LakeResource, name: str, *columns: str) -> list[tuple]:
    frame = lake.read(spark, SILVER, name).select(*columns).orderBy(*columns)
    return [tuple(row) for row in frame.collect()]


def test_scd1_and_scd2_apply_changes_in_order_whatever_order_they_arrive_in(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    resources["kafka"].create_topic(TOPIC, partitions=1)
    scd1, scd2 = (
        declare(tmp_path, "customers", "cdc-scd1"),
        declare(tmp_path, "history", "cdc-scd2"),
    )
    assets = [*source_assets(scd1), *source_assets(scd2)]
    lake: LakeResource = resources["lake"]

    produce(broker.bootstrap_servers, BATCH_1)
    dg.materialize(assets, resources=resources)
    assert table(spark, lake, "customers", "id", "name", "_sequence") == [
        (1, "Anna", Decimal(120)), (3, "Cyd", Decimal(150)),
    ]  # fmt: skip
    assert table(spark, lake, "history", "id", "valid_from", "valid_to", "is_current", "name") == [
        (1, 100, 120, False, "Ann"), (1, 120, None, True, "Anna"),
        (2, 100, 130, False, "Bob"),
        (3, 110, 140, False, "Cy"), (3, 140, 150, False, "Cy-old"), (3, 150, None, True, "Cyd"),
        (4, 155, 160, False, "Di"),
    ]  # fmt: skip

    produce(broker.bootstrap_servers, BATCH_2)
    dg.materialize(assets, resources=resources)
    assert table(spark, lake, "customers", "id", "name", "_op") == [
        (1, "Anna", "u"), (2, "Bob2", "c"),
    ]  # fmt: skip
    assert table(spark, lake, "history", "id", "valid_from", "valid_to", "is_current", "name") == [
        (1, 100, 110, False, "Ann"), (1, 110, 120, False, "Ann-old"), (1, 120, None, True, "Anna"),
        (2, 100, 125, False, "Bob"), (2, 125, 130, False, "Bob-late"), (2, 200, None, True, "Bob2"),
        (3, 110, 140, False, "Cy"), (3, 140, 150, False, "Cy-old"), (3, 150, 210, False, "Cyd"),
        (4, 155, 160, False, "Di"),
    ]  # fmt: skip
    assert table(spark, lake, "customers_deletes", "id", "_sequence") == [
        (2, 130), (3, 210), (4, 160),
    ]  # fmt: skip
    rejected = table(spark, lake, "customers_quarantine", "offset", "reason")
    assert rejected == [
        (15, "unsupported op x"), (16, "not a change event: no op"), (17, "missing key id"),
        (18, "missing source.lsn"),
    ]  # fmt: skip

    versions = lake.version(SILVER, "customers"), lake.version(SILVER, "history")
    dg.materialize(assets, resources=resources)  # nothing new: nothing changes
    assert (lake.version(SILVER, "customers"), lake.version(SILVER, "history")) == versions

    # A full refresh rebuilds each table from bronze in one commit, to the same content.
    before = {t: (lake.version(SILVER, t), table(spark, lake, t, *COLUMNS[t])) for t in COLUMNS}
    refresh = {"config": {"full_refresh": True}}
    run_config = {"ops": {"silver_customers": refresh, "silver_history": refresh}}
    dg.materialize(assets, resources=resources, run_config=run_config)
    for name, (version, content) in before.items():
        assert lake.version(SILVER, name) == version + 1, name
        assert lake.history(SILVER, name, 1)[0]["operation"] == "WRITE", name
        assert table(spark, lake, name, *COLUMNS[name]) == content, name


COLUMNS = {
    "customers": ("id", "name", "_op", "_sequence"),
    "history": ("id", "valid_from", "valid_to", "is_current", "name"),
    "customers_deletes": ("id", "_sequence"),
    "customers_quarantine": ("offset", "reason"),
}


MONGO_TOPIC = "fulfillment.inventory.customers"


def mongo(op: str, oid: str, after: str | None = None, patch: str | None = None) -> Message:
    """A change event of Debezium's MongoDB connector: documents as extended JSON text."""
    filter_ = None if op in ("c", "r") else json.dumps({"_id": {"$oid": oid}})
    payload = {
        "after": after, "patch": patch, "filter": filter_, "op": op, "ts_ms": 1_558_965_515_240,
        "source": {"connector": "mongodb", "name": "fulfillment", "db": "inventory",
                   "rs": "rs0", "collection": "customers", "ord": 1, "ts_ms": 1_558_965_508_000},
    }  # fmt: skip
    return Message(MONGO_TOPIC, json.dumps({"id": json.dumps({"$oid": oid})}), json.dumps(payload))


def test_mongodb_documents_patches_and_filter_deletes(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    resources["kafka"].create_topic(MONGO_TOPIC, partitions=1)
    path = tmp_path / "accounts.yaml"
    path.write_text(f"topic: {MONGO_TOPIC}\nformat: debezium-json\nmode: cdc-scd1\nkeys: [_id]\n")
    source = load_declaration(path)
    lake: LakeResource = resources["lake"]
    a1, b2 = "596e275826f08b2730779e1f", "596e275826f08b2730779e20"
    produce(broker.bootstrap_servers, [
        mongo("c", a1, after=f'{{"_id": {{"$oid": "{a1}"}}, "name": "Acme", '
                             '"visits": {"$numberLong": "12"}}'),
        mongo("c", b2, after=f'{{"_id": {{"$oid": "{b2}"}}, "name": "Bolt", "visits": 3}}'),
        mongo("u", a1, patch=f'{{"_id": {{"$oid": "{a1}"}}, "name": "Acme Corp", "visits": 13}}'),
        mongo("u", b2, patch='{"$v": 1, "$set": {"name": "Bolt Inc"}}'),
        mongo("d", b2),
    ])  # fmt: skip
    dg.materialize(source_assets(source), resources=resources)
    assert table(spark, lake, "accounts", "_id", "name", "visits") == [(a1, "Acme Corp", 13)]
    assert table(spark, lake, "accounts_deletes", "_id") == [(b2,)]
    assert table(spark, lake, "accounts_quarantine", "offset", "reason") == [
        (3, "partial update ($set/$unset)"),
    ]
    schema = json.loads(Path(lake.path(SILVER, "_schemas", "accounts.json")).read_text())
    assert schema == {"_id": "string", "name": "string", "visits": "long"}


CONTACTS = "shop.public.contacts"
TAGS = "tags"


def contact(op: str, key: int, lsn: int, email: str | None = None) -> Message:
    """A Debezium change of the row ``(key, email)`` at ``lsn`` (a delete carries the key only)."""
    row = {"id": key} if op == "d" else {"id": key, "email": email}
    payload = {"before": row if op == "d" else None, "after": None if op == "d" else row,
               "source": {"lsn": lsn}, "op": op}  # fmt: skip
    return Message(CONTACTS, json.dumps({"id": key}), json.dumps(payload))


def tag(key: str, label: str | None, deleted: bool = False) -> Message:
    return Message(TAGS, key, None if deleted else json.dumps({"label": label}))


def test_empty_strings_stay_apart_from_null_and_a_delete_of_a_key_never_seen_passes(
    tmp_path: Path, broker: EmbeddedBroker, resources: dict[str, Any], spark: SparkSession
) -> None:
    """Issue 31, 1: a CDC copy keeps '' apart from NULL (a json source stores '' as NULL unless
    declared ``empty_strings: keep``). Issue 31, 2: a delete of a key never seen, beside an
    insert, neither fails nor stops the source (SCD1, SCD2 and latest-per-key)."""
    for topic in (CONTACTS, TAGS):
        resources["kafka"].create_topic(topic, partitions=1)
    texts = {
        "contacts": f"topic: {CONTACTS}\nformat: debezium-json\nmode: cdc-scd1\nkeys: [id]\n"
        "order_by: source.lsn\n",
        "contact_history": f"topic: {CONTACTS}\nformat: debezium-json\nmode: cdc-scd2\n"
        "keys: [id]\norder_by: source.lsn\n",
        "tags": f"topic: {TAGS}\nmode: latest-per-key\n",
        "kept_tags": f"topic: {TAGS}\nmode: latest-per-key\nempty_strings: keep\n",
    }
    assets = []
    for name, text in texts.items():
        (tmp_path / f"{name}.yaml").write_text(text)
        assets += source_assets(load_declaration(tmp_path / f"{name}.yaml"))
    lake: LakeResource = resources["lake"]

    produce(broker.bootstrap_servers, [
        contact("c", 1, 10, ""), contact("c", 2, 11, None), contact("c", 3, 12, "a@x"),
        tag("a", ""), tag("b", None), tag("c", "red"),
    ])  # fmt: skip
    dg.materialize(assets, resources=resources)
    assert table(spark, lake, "contacts", "id", "email") == [(1, ""), (2, None), (3, "a@x")]
    assert table(spark, lake, "contact_history", "id", "email", "is_current") == [
        (1, "", True), (2, None, True), (3, "a@x", True),
    ]  # fmt: skip
    assert table(spark, lake, "tags", "_kafka_key", "label") == [
        ("a", None), ("b", None), ("c", "red"),
    ]  # fmt: skip
    assert table(spark, lake, "kept_tags", "_kafka_key", "label") == [
        ("a", ""), ("b", None), ("c", "red"),
    ]  # fmt: skip

    produce(broker.bootstrap_servers, [
        contact("d", 7, 20),  # a key never seen
        contact("c", 4, 30, ""),
        contact("u", 2, 40, ""),  # NULL to '': a change
        tag("z", None, deleted=True),  # a tombstone of a key never seen
        tag("d", "blue"),
    ])  # fmt: skip
    result = dg.materialize(assets, resources=resources)
    assert result.success
    assert table(spark, lake, "contacts", "id", "email") == [
        (1, ""), (2, ""), (3, "a@x"), (4, ""),
    ]  # fmt: skip
    assert table(spark, lake, "contacts_deletes", "id", "_sequence") == [(7, 20)]
    history = table(spark, lake, "contact_history", "id", "valid_from", "valid_to", "email")
    assert history == [
        (1, 10, None, ""), (2, 11, 40, None), (2, 40, None, ""), (3, 12, None, "a@x"),
        (4, 30, None, ""),
    ]  # fmt: skip
    assert table(spark, lake, "tags", "_kafka_key", "label") == [
        ("a", None), ("b", None), ("c", "red"), ("d", "blue"),
    ]  # fmt: skip
    assert table(spark, lake, "kept_tags", "_kafka_key", "label") == [
        ("a", ""), ("b", None), ("c", "red"), ("d", "blue"),
    ]  # fmt: skip
