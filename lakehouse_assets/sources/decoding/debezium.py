"""Debezium change events as decoded Python data: the envelope (with or without the
``schema``/``payload`` wrapper) reduced to its operation, its row, its order and the Kafka Connect
schema of its row (``decoding.connect`` types the row by it). MongoDB's connector writes
documents as extended JSON text, read here as plain values. The connector's placeholder of a
value it could not read (an unchanged TOASTed column) is taken out of the row (``unavailable``).

A truncate (``op: t``) has no row: its row is empty. The connector's other messages (heartbeats,
transaction boundaries, notifications, logical decoding messages) change no row: ``not_a_change``
names them.
"""

from __future__ import annotations

import base64
import decimal
import hashlib
import json
import uuid
from dataclasses import dataclass
from typing import Any

from lakehouse_assets.sources.decoding import connect
from lakehouse_assets.sources.decoding.values import timestamp

OPS = ("c", "u", "d", "r")  # the row changes
TRUNCATE = "t"
MESSAGE = "m"  # a logical decoding message (pg_logical_emit_message): no row of a table
# Schema names of the connector's messages that are not changes (Debezium's SchemaFactory).
NOT_CHANGES = {
    "io.debezium.connector.common.Heartbeat": "a heartbeat",
    "io.debezium.connector.common.TransactionMetadataValue": "a transaction boundary",
    "io.debezium.connector.common.Notification": "a notification",
}
TRANSACTION_STATUSES = ("BEGIN", "END")
MICRO = decimal.Decimal("0.000001")
PLACEHOLDER = "__debezium_unavailable_value"  # unavailable.value.placeholder's default


def _extended(document: dict[str, Any]) -> Any:
    """MongoDB extended JSON as plain values: ObjectId as its hex text, numbers, dates as epoch
    milliseconds (or their ISO text)."""
    if len(document) == 1:
        ((name, value),) = document.items()
        if name == "$oid":
            return value
        if name in ("$numberLong", "$numberInt"):
            return int(value)
        if name in ("$numberDouble", "$numberDecimal"):
            return float(value)
        if name == "$date":
            return value
    return document


def _document(value: Any) -> Any:
    """An envelope's row: as it is, or parsed from MongoDB's extended JSON text."""
    if isinstance(value, str):
        return json.loads(value, object_hook=_extended)
    return value


def not_a_change(value: dict[str, Any]) -> str | None:
    """What a message of the connector that changes no row is (``a heartbeat``, ...), by its
    Connect schema's name, else by its shape; None for a change event (or anything else)."""
    if "schema" in value and "payload" in value:
        schema, payload = value["schema"], value["payload"]
        name = schema.get("name") if isinstance(schema, dict) else None
        if isinstance(name, str) and name in NOT_CHANGES:
            return NOT_CHANGES[name]
        value = payload if isinstance(payload, dict) else {}
    if value.get("op") == MESSAGE:
        return "a logical decoding message"
    if "op" in value:
        return None
    if value.keys() == {"ts_ms"}:
        return "a heartbeat"
    if value.get("status") in TRANSACTION_STATUSES and "id" in value and "ts_ms" in value:
        return "a transaction boundary"
    return None


def envelope(value: dict[str, Any], order_by: str) -> tuple[str, Any, Any, dict[str, Any] | None]:
    """``(op, row, sequence, row schema)`` of a Debezium change event; the row's Connect schema
    when the envelope carries one describing it as a struct, else None. A truncate's row is
    empty.

    Raises:
        ValueError: not a change this reads (the message is the reason).
    """
    wrapper = None
    if "schema" in value and "payload" in value:
        wrapper, value = value["schema"], value["payload"]
    if not isinstance(value, dict):
        raise ValueError("not a change event: its payload is not an object")
    op = value.get("op")
    if op is None:
        raise ValueError("not a change event: no op")
    if op not in (*OPS, TRUNCATE):
        raise ValueError(f"unsupported op {op}")
    if op == TRUNCATE:
        row = {}
    elif op == "d":
        row = _document(value.get("before")) or _document(value.get("filter"))
        if row is None:
            raise ValueError("delete without before")
    else:
        row = _document(value.get("after"))
        if row is None:
            patch = _document(value.get("patch"))
            if isinstance(patch, dict) and any(k.startswith("$") for k in patch):
                raise ValueError("partial update ($set/$unset)")
            row = patch
        if row is None:
            raise ValueError("change without after")
    sequence = value
    for name in order_by.split("."):
        sequence = sequence.get(name) if isinstance(sequence, dict) else None
    schema = connect.row_schema(wrapper, "before" if op == "d" else "after")
    return op, row, sequence, schema


@dataclass(frozen=True)
class Placeholder:
    """The forms Debezium's PostgreSQL connector gives a placeholder in JSON
    (``UnchangedToastedPlaceholder``): its text (text, jsonb, hex-mode bytes), the base64 of its
    bytes (bytea), and in arrays, maps and hstore's JSON text the forms below."""

    texts: tuple[str, ...]  # a text value: the text, its bytes' base64, hstore's JSON text
    arrays: tuple[list[Any], ...]  # text[], bytea[], int[]/bigint[] (its bytes), uuid[]
    map: dict[str, str]  # hstore as a map

    @classmethod
    def of(cls, setting: str) -> Placeholder:
        """The forms of ``unavailable.value.placeholder`` (``hex:<digits>`` names its bytes)."""
        raw = bytes.fromhex(setting[4:]) if setting.startswith("hex:") else setting.encode()
        text = raw.decode(errors="replace")
        encoded = base64.b64encode(raw).decode()
        hstore = json.dumps({text: text}, separators=(",", ":"))
        digest = bytearray(hashlib.md5(raw).digest())  # Java's UUID.nameUUIDFromBytes
        digest[6], digest[8] = (digest[6] & 0x0F) | 0x30, (digest[8] & 0x3F) | 0x80
        name_uuid = str(uuid.UUID(bytes=bytes(digest)))
        arrays = ([text], [encoded], [int(b if b < 128 else b - 256) for b in raw], [name_uuid])
        return cls(texts=(text, encoded, hstore), arrays=arrays, map={text: text})

    def holds(self, value: Any) -> bool:
        """Whether a JSON value is the placeholder in one of its forms."""
        if isinstance(value, str):
            return value in self.texts
        if isinstance(value, list):
            return bool(value) and value in self.arrays
        return isinstance(value, dict) and value == self.map


def unavailable(row: dict[str, Any], placeholder: Placeholder) -> list[str]:
    """The fields of ``row`` holding the placeholder, set to None in ``row``."""
    names = [name for name, value in row.items() if placeholder.holds(value)]
    for name in names:
        row[name] = None
    return names


def order_kind(value: Any) -> str | None:
    """What an ``order_by`` value is (``long``, ``double`` or ``timestamp``, an ISO date-time),
    as ``sequence`` reads it; None when it reads none."""
    if sequence(value) is None:
        return None
    return {int: "long", float: "double"}.get(type(value), "timestamp")


def sequence(value: Any) -> decimal.Decimal | None:
    """An ``order_by`` value as a number: itself, or an ISO date-time's epoch microseconds."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return decimal.Decimal(value)
    if isinstance(value, float):
        return decimal.Decimal(value).quantize(MICRO)
    if isinstance(value, str):
        try:
            micros = int(timestamp(value).timestamp() * 1_000_000)
        except ValueError:
            return None
        return decimal.Decimal(micros)
    return None
