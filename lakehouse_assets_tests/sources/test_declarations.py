"""Declarations: valid files load, invalid ones are reported with file, line and field, and the
other files still load."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakehouse_assets.sources.declaration.files import (
    InvalidDeclaration,
    load_declaration,
    load_declarations,
)

ORDERS = """\
topic: shop.public.orders
format: debezium-json
mode: cdc-scd1
keys: [id]
order_by: source.lsn
partition_by: [country, date(created_at)]
owners: [team:data]
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def test_a_declaration_names_its_source_after_its_file(tmp_path: Path) -> None:
    source = load_declaration(write(tmp_path, "orders.yaml", ORDERS))
    assert source.name == "orders"
    assert source.topic == "shop.public.orders"
    assert source.mode == "cdc-scd1"
    assert source.keys == ("id",)
    assert source.order_by == "source.lsn"
    assert source.partition_columns == [("country", None), ("created_at_date", "created_at")]
    assert source.flatten is True


def test_a_minimal_json_declaration_takes_the_defaults(tmp_path: Path) -> None:
    source = load_declaration(write(tmp_path, "clicks.yml", "topic: clicks\n"))
    assert (source.name, source.format, source.mode, source.order_by) == (
        "clicks", "json", "append", "offset",
    )  # fmt: skip


ROUTE = "topic: a\nmode: route-by-type\n"
DOCUMENTS = "  documents: {X: {table: t, month_from: d}}\n"


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        ("topic: a\nmode: upsert\n", 2, "mode", "must be"),
        ("topic: a\nkeyz: [id]\n", 2, "keyz", "unknown field"),
        ("topic: a\npartition_by:\n  - ok\n  - day(ts)\n", 4, "partition_by.1", "day(ts)"),
        ("format: json\n", 1, "topic", "exactly one of"),
        ("topic: a\nformat: debezium-json\nmode: cdc-scd2\n", 1, "keys", "key columns"),
        ("topic: a\nmode: cdc-scd1\nkeys: [id]\n", 1, "format", "debezium-json"),
        ("topic: a\ntopic_pattern: 'b.*'\n", 1, "topic", "exactly one of"),
        ("topic_pattern: '(unclosed'\n", 1, "topic_pattern", "regular expression"),
        ("topic: a\nmode: latest-per-key\norder_by: ts\n", 3, "order_by", "offset"),
        ("topic: a\nformat: debezium-json\ntruncate: apply\n", 3, "truncate", "cdc-scd1"),
        ("topic: a\ntruncate: empty\n", 2, "truncate", "'apply' or 'quarantine'"),
        ("topic: a\nsample_size: 0\n", 2, "sample_size", "greater than 0"),
        ("topic: a\nformat: avro\n", 1, "avro_schema", ".avsc"),
        ("topic: a\nformat: avro\navro_schema: none.avsc\n", 3, "avro_schema", "not a valid Avro"),
        ("topic: [a\n", 2, "", "not YAML"),
        ("- topic: a\n", 1, "", "mapping"),
        ("topic: a\nmode: route-by-type\n", 1, "routing", "'routing' block"),
        (
            "topic: a\nrouting:\n  documents: {X: {table: t, month_from: d}}\n",
            2,
            "routing",
            "only such a source",
        ),
        (
            ROUTE + "routing:\n  documents:\n    X: {table: T-1, month_from: d}\n",
            5,
            "routing.documents.X.table",
            "table name",
        ),
        (
            ROUTE + "routing:\n  documents: {X-Deleted: {table: t, month_from: d}}\n",
            4,
            "routing.documents",
            "without -Deleted",
        ),
        (
            ROUTE + "routing:\n" + DOCUMENTS + "  documentz: {}\n",
            5,
            "routing.documentz",
            "unknown field",
        ),
        (
            ROUTE + "partition_by: [country]\nrouting:\n" + DOCUMENTS,
            3,
            "partition_by",
            "partitioned by some of ['month']",
        ),
    ],
)
def test_an_invalid_declaration_is_reported_with_its_file_line_and_field(
    tmp_path: Path, text: str, line: int, field: str, words: str
) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(InvalidDeclaration) as raised:
        load_declaration(path)
    error = raised.value.errors[0]
    assert (error.file, error.line, error.field) == (path, line, field)
    assert words in error.message
    assert str(error).startswith(f"{path}:{line}")


# What a refusal never says: pydantic's or PyYAML's own words.
NOT_OURS = re.compile(r"Input should|Field required|valid tuple|instance of|String should|\n")
CDC = "topic: a\nformat: debezium-json\nmode: cdc-scd1\n"
LOCATIONS = "  locations: {topic: l, levels: [state, district, state]}\n"


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        ("topic: 5\n", 1, "topic", "must be text"),
        ("topic: a\nsample_size: many\n", 2, "sample_size", "must be a whole number"),
        ("topic: a\nflatten: maybe\n", 2, "flatten", "must be true or false"),
        ("topic: a\nkeys: id\n", 2, "keys", "must be a list, such as [a, b]"),
        ("topic: a\nfields:\n  - {name: x}\n", 3, "fields.0.type", "is required"),
        ("topic: a\nfields:\n  - x\n", 3, "fields.0", "must be a mapping of fields"),
        ("topic: a\nunavailable_value_placeholder: ''\n", 2, "unavailable_value_placeholder",
         "must not be empty"),
        (ROUTE + "routing:\n  documents: {}\n", 4, "routing.documents", "must not be empty"),
        ("topic: a\ntopic: b\n", 2, "topic", "is given twice (lines 1 and 2): keep one"),
        ("topic: a\n\tflatten: true\n", 2, "", "not YAML: found character '\\t'"),
        # Columns named twice, compared regardless of case as Spark compares them.
        (CDC + "keys: [id, ID]\n", 4, "keys", "names the column 'id' twice, as 'id' and 'ID'"),
        (CDC + "keys: [id, id]\n", 4, "keys", "names the column 'id' twice"),
        ("topic: a\npartition_by: [country, country]\n", 2, "partition_by", "'country' twice"),
        ("topic: a\npartition_by: [at_date, date(at)]\n", 2, "partition_by", "'at_date' twice"),
        ("topic: a\nmode: latest-per-key\nkeys: [n, n]\nfields:\n  - {name: n, type: integer}\n",
         3, "keys", "names the column 'n' twice"),
        (ROUTE + "routing:\n" + DOCUMENTS + LOCATIONS, 5, "routing.locations.levels",
         "names the level 'state' twice"),
    ],
)  # fmt: skip
def test_a_wrong_value_is_refused_saying_what_is_wrong(
    tmp_path: Path, text: str, line: int, field: str, words: str
) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(InvalidDeclaration) as raised:
        load_declaration(path)
    [error] = raised.value.errors
    assert (error.line, error.field) == (line, field)
    assert words in error.message
    assert not NOT_OURS.search(error.message), error.message


def test_an_invalid_file_does_not_keep_the_others_from_loading(tmp_path: Path) -> None:
    write(tmp_path, "orders.yaml", ORDERS)
    write(tmp_path, "broken.yaml", "topic: a\nmode: nonsense\n")
    write(tmp_path, "clicks.yaml", "topic: clicks\n")
    write(tmp_path, "notes.txt", "not a declaration")
    sources, errors = load_declarations(tmp_path)
    assert [source.name for source in sources] == ["clicks", "orders"]
    assert [(e.file.name, e.field) for e in errors] == [("broken.yaml", "mode")]


def test_names_taken_twice_or_by_the_built_in_pipeline_are_refused(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", "name: same\ntopic: a\n")
    write(tmp_path, "b.yaml", "topic: b\nname: same\n")
    write(tmp_path, "bpm.yaml", "topic: other_bpm\n")
    write(tmp_path, "fine.yaml", "topic: fine\n")
    sources, errors = load_declarations(tmp_path, tables=["bronze.bpm", "silver.bpm_quarantine"])
    assert [source.name for source in sources] == ["fine"]
    assert sorted((e.file.name, e.line, e.field) for e in errors) == [
        ("a.yaml", 1, "name"), ("b.yaml", 2, "name"), ("bpm.yaml", 1, "name"),
    ]  # fmt: skip
    assert "also declared by" in errors[0].message


def test_a_missing_folder_declares_nothing(tmp_path: Path) -> None:
    assert load_declarations(tmp_path / "absent") == ([], [])
