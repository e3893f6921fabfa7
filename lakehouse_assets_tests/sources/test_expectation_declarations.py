"""Expectations in a declaration: what loads, and what is refused when the file loads with its
file, line and dotted field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lakehouse_assets.checks.expectations import Expectation
from lakehouse_assets.sources.declaration.files import (
    InvalidDeclaration,
    load_declaration,
    load_declarations,
)
from lakehouse_assets_tests.sources.test_declarations import write

METERS = """\
topic: meters
mode: latest-per-key
keys: [meter_id]
fields:
  - {name: meter_id, type: integer}
  - {name: quarter, type: string}
  - {name: kwh, type: number, required: false}
  - {name: site, type: string, required: false}
expectations:
"""


def test_each_kind_loads_with_its_action(tmp_path: Path) -> None:
    text = METERS + (
        '  - {name: kwh_not_negative, check: "kwh >= 0", on_violation: drop}\n'
        '  - {name: known_site, check: "site IS NOT NULL"}\n'
        "  - {name: one_per_quarter, unique: [meter_id, quarter], on_violation: fail}\n"
        "  - name: meter_exists\n"
        "    references: {table: silver.users, columns: [meter_id]}\n"
        "  - {name: enough, row_count: {min: 1}, on_violation: warn}\n"
    )
    source = load_declaration(write(tmp_path, "meters.yaml", text))
    assert [e.expectation() for e in source.expectations] == [
        Expectation("kwh_not_negative", "drop", check="kwh >= 0"),
        Expectation("known_site", "warn", check="site IS NOT NULL"),  # warn: the default
        Expectation("one_per_quarter", "fail", unique=("meter_id", "quarter")),
        Expectation("meter_exists", "warn", references=("silver.users", ("meter_id",))),
        Expectation("enough", "warn", row_count=(1, None)),
    ]


@pytest.mark.parametrize(
    ("entry", "line", "field", "words"),
    [
        ('{name: a, check: "kwh >= "}', 10, "expectations.0.check", "not a Spark SQL condition"),
        ('{name: a, check: "sum(kwh) > 0"}', 10, "expectations.0.check", "no aggregate"),
        ('{name: a, check: "kwh > (SELECT 1)"}', 10, "expectations.0.check", "cannot query"),
        ('{name: a, check: "x = 1; y = 2"}', 10, "expectations.0.check", "several statements"),
        ('{name: a, check: "kwhh >= 0"}', 10, "expectations.0.check", "'kwhh'"),
        ("{name: a, unique: [meter_id, day]}", 10, "expectations.0.unique", "'day'"),
        ('{name: a, check: "kwh > 0", on_violation: stop}', 10, "expectations.0.on_violation",
         "'warn', 'drop' or 'fail'"),
        ("{name: a, unique: [quarter], on_violation: drop}", 10, "expectations.0",
         "warn or fail"),
        ('{name: a, check: "kwh > 0", unique: [quarter]}', 10, "expectations.0",
         "exactly one of"),
        ("{name: a}", 10, "expectations.0", "exactly one of"),
        ("{name: a, row_count: {min: 5, max: 2}}", 10, "expectations.0.row_count",
         "above max"),
        ("{name: a, row_count: {}}", 10, "expectations.0.row_count", "set min, max or both"),
        ("{name: a, references: {table: meters, columns: [meter_id]}}", 10,
         "expectations.0.references.table", "<layer>.<table>"),
        ('{name: primary_key_unique, check: "kwh > 0"}', 10, "expectations.0.name",
         "a check the table has anyway"),
        ('{name: accepted_site, check: "kwh > 0"}', 10, "expectations.0.name", "anyway"),
        ('{name: Big, check: "kwh > 0"}', 10, "expectations.0.name", "lower case"),
        ('{name: a, check: "kwh > 0", when: x}', 10, "expectations.0.when", "unknown field"),
        ('{name: a, check: "DROP TABLE t"}', 10, "expectations.0.check", "be a condition"),
        ('{name: a, check: "kwh + 1"}', 10, "expectations.0.check", "must be a condition"),
        ('{name: a, check: "kwh"}', 10, "expectations.0.check", "must be a condition"),
        ('{name: a, check: "rand() > 0.5"}', 10, "expectations.0.check", "the same on every"),
        ('{name: a, check: "now() > kwh"}', 10, "expectations.0.check", "current-time"),
        ('{name: a, check: "every(kwh > 0)"}', 10, "expectations.0.check", "aggregate"),
        ('{name: a, check: "explode(array(kwh)) > 0"}', 10, "expectations.0.check", "generator"),
        ("{name: a, unique: [quarter, quarter]}", 10, "expectations.0.unique", "twice"),
    ],
)  # fmt: skip
def test_a_wrong_expectation_is_refused_with_its_file_line_and_field(
    tmp_path: Path, entry: str, line: int, field: str, words: str
) -> None:
    path = write(tmp_path, "meters.yaml", f"{METERS}  - {entry}\n")
    with pytest.raises(InvalidDeclaration) as raised:
        load_declaration(path)
    assert [(e.file, e.line, e.field) for e in raised.value.errors] == [(path, line, field)]
    assert words in raised.value.errors[0].message


# What a refusal never says: Python's, pydantic's or sqlglot's own words.
NOT_OURS = re.compile(
    r"<class|unpack|Required keyword|Invalid expression|Error tokenizing|Input should|"
    r"Field required|valid tuple|instance of|String should|Tuple should"
)


@pytest.mark.parametrize(
    ("check", "words"),
    [
        ("", "is empty: write a condition of each row"),
        ("   ", "is empty"),
        ("-- only a comment", "is empty"),
        ("(kwh > 0", "the '(' at column 1 has no ')'"),
        ("kwh > 0)", "the ')' at column 8 closes nothing"),
        ("(kwh > 0) AND (site = 'x'", "the '(' at column 15 has no ')'"),
        ("site = 'north", "the quote ' at column 8 is not closed"),
        ("kwh >= ", "incomplete at '>=' (column 5)"),
        ("kwh > 0 AND", "incomplete at 'AND' (column 9)"),
        ("kwh BETWEEN 1", "BETWEEN needs AND and an upper bound"),
        ("kwh > 0 ORDER BY kwh", "'ORDER BY' (column 9) is not expected there"),
        ("kwh > 0 garbage", "has 'garbage' after the condition 'kwh > 0'"),
        ("kwh > 0;", "has a ';'"),
        ("kwh >= $1", "parameter marker"),
        ("upper(site)", "is of type string, not a condition"),
        ("if(kwh > 0, 1, 0)", "not a condition"),
        ("NULL", "must be a condition"),
        ("kwhh > 0", "names the column 'kwhh', which the table does not have"),
    ],
)
def test_a_check_that_is_not_one_condition_is_refused_saying_what_is_wrong(
    tmp_path: Path, check: str, words: str
) -> None:
    path = write(tmp_path, "meters.yaml", f"{METERS}  - {{name: a, check: {json.dumps(check)}}}\n")
    with pytest.raises(InvalidDeclaration) as raised:
        load_declaration(path)
    [error] = raised.value.errors
    assert (error.line, error.field) == (10, "expectations.0.check")
    assert words in error.message
    assert not NOT_OURS.search(error.message), error.message


@pytest.mark.parametrize(
    ("entry", "field", "words"),
    [
        ("{name: a, unique: [meter_id, METER_ID]}", "expectations.0.unique",
         "names the column 'meter_id' twice, as 'meter_id' and 'METER_ID'"),
        ("{name: a, unique: [Quarter, quarter]}", "expectations.0.unique",
         "regardless of case"),
        ("{name: a, references: {table: silver.users, columns: [meter_id, Meter_Id]}}",
         "expectations.0.references.columns", "names the column 'meter_id' twice"),
        ("{name: a, references: {table: silver.users, columns: [meter_id, meter_id]}}",
         "expectations.0.references.columns", "names the column 'meter_id' twice"),
        ("{name: a, unique: [1st]}", "expectations.0.unique.0", "must be a column name"),
        ("{name: a, references: {table: silver.users, columns: []}}",
         "expectations.0.references.columns", "must not be empty"),
        ("{name: a, row_count: {min: -1}}", "expectations.0.row_count.min", "must be 0 or more"),
        ("{name: a, row_count: 5}", "expectations.0.row_count", "must be a mapping"),
        ("{name: a, check: 5}", "expectations.0.check", "must be text"),
        ("{check: kwh > 0}", "expectations.0.name", "is required"),
        ("{name: a, check: kwh > 0, name: b}", "expectations.0.name", "is given twice (line 10)"),
    ],
)  # fmt: skip
def test_a_wrong_entry_is_refused_in_words_once(
    tmp_path: Path, entry: str, field: str, words: str
) -> None:
    path = write(tmp_path, "meters.yaml", f"{METERS}  - {entry}\n")
    with pytest.raises(InvalidDeclaration) as raised:
        load_declaration(path)
    [error] = raised.value.errors  # a list whose items are wrong is not also "too short"
    assert (error.line, error.field) == (10, field)
    assert words in error.message
    assert not NOT_OURS.search(error.message), error.message


def test_two_expectations_of_one_name_are_refused(tmp_path: Path) -> None:
    text = METERS + '  - {name: a, check: "kwh > 0"}\n  - {name: a, check: "kwh < 9"}\n'
    path = write(tmp_path, "meters.yaml", text)
    with pytest.raises(InvalidDeclaration) as raised:
        load_declaration(path)
    [error] = raised.value.errors
    assert (error.line, error.field) == (11, "expectations.1.name")
    assert "declared twice" in error.message


def test_columns_are_matched_regardless_of_case_as_spark_does(tmp_path: Path) -> None:
    text = METERS + '  - {name: a, check: "KWH >= 0"}\n  - {name: b, unique: [Meter_Id]}\n'
    assert len(load_declaration(write(tmp_path, "meters.yaml", text)).expectations) == 2


def test_a_check_may_name_a_nested_column_and_lambda_variables(tmp_path: Path) -> None:
    text = "topic: t\nexpectations:\n" + (
        "  - {name: a, check: \"exists(tags, t -> t = '') OR address.zip IS NOT NULL\"}\n"
    )
    source = load_declaration(write(tmp_path, "t.yaml", text))  # inferred: columns unchecked
    assert source.expectations[0].check is not None


def test_the_columns_of_an_inferred_schema_are_not_checked_at_load(tmp_path: Path) -> None:
    text = 'topic: t\nexpectations:\n  - {name: a, check: "anything > 0"}\n'
    assert load_declaration(write(tmp_path, "t.yaml", text)).expectations


def test_a_kafka_column_may_be_unique_and_a_landing_column_referenced(tmp_path: Path) -> None:
    csv = (
        "format: csv\nmode: latest-per-key\nkeys: [id]\nfields:\n  - {name: id, type: integer}\n"
        "expectations:\n  - {name: a, unique: [_landing_file, id]}\n"
    )
    assert load_declaration(write(tmp_path, "c.yaml", csv)).expectations
    kafka = METERS + "  - {name: a, unique: [_kafka_offset, _kafka_partition]}\n"
    assert load_declaration(write(tmp_path, "k.yaml", kafka)).expectations


def test_a_route_by_type_source_takes_no_expectations(tmp_path: Path) -> None:
    text = (
        "topic: a\nmode: route-by-type\nrouting:\n  documents: {X: {table: t, month_from: d}}\n"
        'expectations:\n  - {name: a, check: "x > 0"}\n'
    )
    path = write(tmp_path, "a.yaml", text)
    with pytest.raises(InvalidDeclaration) as raised:
        load_declaration(path)
    assert [e.field for e in raised.value.errors] == ["expectations"]


def test_a_reference_names_a_table_of_the_pipeline_or_a_declared_source(tmp_path: Path) -> None:
    references = "  - {{name: r, references: {{table: {table}, columns: [meter_id]}}}}\n"
    write(tmp_path, "meters.yaml", METERS + references.format(table="silver.sites"))
    write(tmp_path, "sites.yaml", "topic: sites\n")
    write(tmp_path, "gauges.yaml", METERS + references.format(table="gold.kwh_by_day"))
    write(tmp_path, "probes.yaml", METERS + references.format(table="silver.nowhere"))
    declared, errors = load_declarations(tmp_path, tables=["gold.kwh_by_day"])
    assert sorted(d.name for d in declared) == ["gauges", "meters", "sites"]
    [error] = errors
    assert (error.file.name, error.line, error.field) == (
        "probes.yaml", 10, "expectations.0.references.table",
    )  # fmt: skip
    assert "'silver.nowhere'" in error.message


def test_a_reference_to_a_refused_source_is_refused_and_a_quarantine_may_be_named(
    tmp_path: Path,
) -> None:
    references = "  - {{name: r, references: {{table: {table}, columns: [meter_id]}}}}\n"
    write(tmp_path, "a.yaml", "name: twice\ntopic: a\n")
    write(tmp_path, "b.yaml", "name: twice\ntopic: b\n")
    write(tmp_path, "meters.yaml", METERS + references.format(table="silver.twice"))
    write(tmp_path, "gauges.yaml", METERS + references.format(table="silver.meters_quarantine"))
    declared, errors = load_declarations(tmp_path)
    assert [d.name for d in declared] == ["gauges"]
    assert sorted((e.file.name, e.field) for e in errors) == [
        ("a.yaml", "name"), ("b.yaml", "name"), ("meters.yaml", "expectations.0.references.table"),
    ]  # fmt: skip
