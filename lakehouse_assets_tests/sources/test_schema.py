"""The type rules of declared sources' schemas, on hand-written cases."""

from __future__ import annotations

import pytest

from lakehouse_assets.sources.decoding import schema as types
from lakehouse_assets.sources.decoding.schema import SchemaError


@pytest.mark.parametrize(
    ("declared", "seen", "fits"),
    [
        ("long", "long", True),
        ("double", "long", True),
        ("long", "double", False),
        ("string", "long", False),
        ("timestamp", "string", True),  # the text itself is checked on the values
        ({"a": "long"}, {"a": "long"}, True),
        ({"a": "long"}, {"b": "long"}, False),  # a new field
        (["long"], [], True),
        ([], ["long"], False),
        (["double"], ["long"], True),
        ("long", {"a": "long"}, False),
    ],
)
def test_accepts(declared, seen, fits) -> None:
    assert types.accepts(declared, seen) is fits


@pytest.mark.parametrize(
    ("declared", "seen", "wider"),
    [
        ("int", "long", "int"),  # accepted as such; out-of-range values widen on the data
        ("long", "double", "double"),
        ("int", "double", "double"),
        ("date", "timestamp", "timestamp"),
        ("double", "long", "double"),
        ("long", "string", None),
        ("string", "long", None),
        ("timestamp", "date", "timestamp"),
        ({"a": "long"}, {"b": "string"}, {"a": "long", "b": "string"}),
        ({"a": "long"}, {"a": "string"}, None),
        ([], ["long"], ["long"]),
        ([{"a": "long"}], [{"a": "double", "b": "boolean"}], [{"a": "double", "b": "boolean"}]),
        (None, "variant", None),
        (None, ["long"], ["long"]),
    ],
)
def test_widen(declared, seen, wider) -> None:
    assert types.widen(declared, seen) == wider


def test_evolve_adds_fields_widens_and_keeps_incompatible_types() -> None:
    schema = {"id": "long", "price": "long", "name": "string", "address": {"city": "string"}}
    seen = {
        "id": "string",  # incompatible: kept, the records are quarantined
        "price": "double",  # widened
        "address": {"city": "string", "zip": "string"},  # a nested field added
        "tags": ["string"],  # a new field
        "mixed": "variant",  # several types: decided value by value
    }
    assert types.evolve(schema, seen) == {
        "id": "long", "price": "double", "name": "string",
        "address": {"city": "string", "zip": "string"}, "tags": ["string"],
    }  # fmt: skip


def test_leaves_flatten_objects_and_keep_arrays_whole() -> None:
    schema = {"a": {"b": {"c": "long"}, "d": "string"}, "e": [{"f": "long"}], "g": {}}
    assert list(types.leaves(schema, flatten=True)) == [
        ("a_b_c", ("a", "b", "c"), "long"), ("a_d", ("a", "d"), "string"),
        ("e", ("e",), [{"f": "long"}]), ("g", ("g",), {}),
    ]  # fmt: skip
    assert [name for name, _, _ in types.leaves(schema, flatten=False)] == ["a", "e", "g"]


def test_spark_types() -> None:
    assert types.spark_type({"a b": "long", "c": ["int"], "d": []}) == (
        "struct<`a b`: bigint, `c`: array<int>, `d`: array<string>>"
    )


def test_the_file_round_trips_and_refuses_unknown_types() -> None:
    schema = {"id": "long", "items": [{"sku": "string"}], "at": "timestamp", "none": []}
    assert types.loads(types.dumps(schema), "f") == schema
    assert types.dumps({"a": "long"}) == '{\n  "a": "long"\n}\n'
    with pytest.raises(SchemaError, match=r"f\.json: items\[\]\.qty: unknown type 'integer'"):
        types.loads('{"items": [{"qty": "integer"}]}', "f.json")
    with pytest.raises(SchemaError, match="not JSON"):
        types.loads("{", "f.json")
    with pytest.raises(SchemaError, match="one element type"):
        types.loads('{"a": ["long", "string"]}', "f.json")
