"""Validation rules on hand-built records (docs/fitness_pipeline.md, "What is rejected")."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyspark.sql import DataFrame, SparkSession

from lakehouse_assets.fitness.silver.transforms import (
    parse_gym_logins,
    parse_user_info,
    parse_workout,
)
from lakehouse_assets.validation import JsonField, kafka_quarantine, parse_csv, parse_json

KAFKA = "topic string, partition int, offset long, key binary, value binary, ingested_at timestamp"


def kafka_rows(
    spark: SparkSession, values: list[str | bytes | None], kind: str = KAFKA
) -> DataFrame:
    """Bronze rows of ``values`` (text is encoded as UTF-8 unless ``kind`` holds text)."""
    if "value binary" in kind:
        values = [v.encode() if isinstance(v, str) else v for v in values]
    return spark.createDataFrame(
        [("t", 0, offset, None, value, None) for offset, value in enumerate(values)], kind
    )


def reasons(parsed: DataFrame) -> list[str | None]:
    return [row.reason for row in parsed.orderBy("offset").collect()]


def test_user_info_rules_in_order(spark: SparkSession) -> None:
    values = [
        '{"user_id": 1, "update_type": "new", "timestamp": 10, "dob": "01/31/1990"}',
        '{"user_id": 1, "update_type": "update", "timestamp": 10.5, "dob": null}',
        "not json",
        "[1, 2]",
        '{"update_type": "new", "timestamp": 10}',
        '{"user_id": "abc", "update_type": "new", "timestamp": 10}',
        '{"user_id": 3.0, "update_type": "new", "timestamp": 10}',
        '{"user_id": 1, "update_type": "upsert", "timestamp": 10}',
        '{"user_id": 1, "update_type": "new", "timestamp": "10"}',
        '{"user_id": 1, "update_type": "new", "timestamp": 10, "dob": "1990-01-31"}',
        '{"user_id": "x", "timestamp": "y"}',  # several failures: the first field's rule wins
    ]
    assert reasons(parse_user_info(kafka_rows(spark, values))) == [
        None,
        None,
        "malformed json",
        "malformed json",
        "missing user_id",
        "wrong type user_id",
        "wrong type user_id",
        "unknown update_type",
        "wrong type timestamp",
        "bad dob",
        "wrong type user_id",
    ]


def test_user_info_fields_are_typed(spark: SparkSession) -> None:
    value = (
        '{"user_id": 7, "update_type": "new", "timestamp": 1700000000.123456, "dob": "02/03/1990",'
        ' "address": {"street_address": "1 Main St", "city": "Austin", "state": "TX",'
        ' "zip": 73301}}'
    )
    row = parse_user_info(kafka_rows(spark, [value])).first()
    assert row is not None
    assert (row.user_id, row.city, row.state, row.zip) == (7, "Austin", "TX", 73301)
    assert str(row.timestamp) == "1700000000.123456"


def test_a_number_its_column_cannot_hold_is_rejected_not_nulled(spark: SparkSession) -> None:
    base = '{"user_id": 1, "workout_id": 2, "session_id": 3, "action": "start", "timestamp": '
    # decimal(20,6) holds 14 integer digits; an integer field is a 64-bit integer.
    values = [base + "99999999999999.9999994}", base + "1e14}", base + "1e30}",
              base.replace('"user_id": 1', '"user_id": 9223372036854775808') + "5}"]  # fmt: skip
    parsed = parse_workout(kafka_rows(spark, values))
    assert reasons(parsed) == [None, "out of range timestamp", "out of range timestamp",
                               "out of range user_id"]  # fmt: skip
    assert str(parsed.orderBy("offset").first().timestamp) == "99999999999999.999999"


BIGGEST, DIGITS_41 = 2**63 - 1, "1" + "0" * 40  # a bigint's largest; beyond any decimal(38)


@pytest.mark.parametrize(
    ("value", "reason", "typed"),
    [
        # integer: a bigint, -2**63 to 2**63 - 1 (docs/sources.md, "Declared fields")
        (f'{{"n": {BIGGEST}}}', None, BIGGEST),
        (f'{{"n": {-BIGGEST - 1}}}', None, -BIGGEST - 1),
        (f'{{"n": {BIGGEST + 1}}}', "out of range n", None),
        (f'{{"n": {-BIGGEST - 2}}}', "out of range n", None),
        (f'{{"n": {DIGITS_41}}}', "out of range n", None),
        (f'{{"n": -{DIGITS_41}}}', "out of range n", None),
        ('{"n": 3.0}', "wrong type n", None),  # JSON integers only
        ('{"n": 1e3}', "wrong type n", None),
        ('{"n": 1e40}', "wrong type n", None),
        # number: a decimal(20,6), 14 integer digits, six decimal places rounded half up
        ('{"x": 99999999999999.9999994}', None, Decimal("99999999999999.999999")),
        ('{"x": -99999999999999.9999994}', None, Decimal("-99999999999999.999999")),
        ('{"x": 99999999999999.9999995}', "out of range x", None),  # rounds to 15 digits
        ('{"x": 100000000000000}', "out of range x", None),
        ('{"x": -100000000000000}', "out of range x", None),
        (f'{{"x": {BIGGEST + 1}}}', "out of range x", None),
        ('{"x": -1.5e40}', "out of range x", None),
    ],
)
def test_a_json_value_beyond_its_column_at_either_end_is_out_of_range(
    spark: SparkSession, value: str, reason: str | None, typed: object
) -> None:
    fields = [JsonField("n", "integer", required=False), JsonField("x", "number", required=False)]
    [row] = parse_json(kafka_rows(spark, [value]), fields).collect()
    assert row.reason == reason
    if reason is None:
        assert (row.n if '"n"' in value else row.x) == typed


def test_a_csv_integer_beyond_a_bigint_at_either_end_is_out_of_range(spark: SparkSession) -> None:
    texts = [str(BIGGEST), str(-BIGGEST - 1), str(BIGGEST + 1), str(-BIGGEST - 2), DIGITS_41, "1.5"]
    rows = spark.createDataFrame(
        [(text.encode(), "a.csv", None) for text in texts],
        "line binary, source_file string, ingested_at timestamp",
    )
    parsed = parse_csv(rows, ["n"], {"n"}).collect()
    assert [(r.n, r.reason) for r in parsed] == [
        (BIGGEST, None), (-BIGGEST - 1, None), (None, "out of range n"), (None, "out of range n"),
        (None, "out of range n"), (None, "wrong type n"),
    ]  # fmt: skip


def test_workout_action_must_be_known(spark: SparkSession) -> None:
    base = '{"user_id": 1, "workout_id": 2, "session_id": 3, "timestamp": 5, "action": '
    parsed = parse_workout(kafka_rows(spark, [base + '"start"}', base + '"pause"}']))
    assert reasons(parsed) == [None, "unknown action"]


def test_csv_lines_need_every_column_and_numbers(spark: SparkSession) -> None:
    lines = [
        b"mac_address,gym,login,logout",  # a header line, as every file starts
        b"m1,5,100,200",
        b"m1,5,100,soon",
        b"",  # blank lines are skipped
        b"m1,,100,200",
        b"m1,5,1.5,200",
        b"m1,5,\xff100,200",
        b'"m,2", 5 ,100,200',  # quoted value; spaces around values are ignored
        b"\xef\xbb\xbfMAC_ADDRESS, gym, login, logout",  # a header with a byte order mark
    ]
    rows = spark.createDataFrame(
        [(line, "a.csv", None) for line in lines],
        "line binary, source_file string, ingested_at timestamp",
    )
    parsed = parse_gym_logins(rows).collect()
    expected = [None, "wrong type logout", "missing gym", "wrong type login", "not utf-8", None]
    assert [r.reason for r in parsed] == expected
    assert (parsed[0].login, parsed[0].logout, parsed[1].raw) == (100, 200, b"m1,5,100,soon")
    assert (parsed[4].raw, parsed[5].mac_address, parsed[5].gym) == (lines[6], "m,2", " 5 ")


def test_csv_rows_held_as_columns_by_earlier_bronze_tables_still_parse(
    spark: SparkSession,
) -> None:
    rows = spark.createDataFrame(
        [("m1", "5", "100", "200", "a.csv", None), ("m1", "5", "100", "soon", "a.csv", None)],
        "mac_address string, gym string, login string, logout string, source_file string, "
        "ingested_at timestamp",
    )
    parsed = parse_gym_logins(rows).collect()
    assert [(r.reason, r.raw) for r in parsed] == [
        (None, b"m1,5,100,200"),
        ("wrong type logout", b"m1,5,100,soon"),
    ]


def test_values_that_are_not_utf8_or_not_json_are_told_apart(spark: SparkSession) -> None:
    base = b'{"user_id": 1, "workout_id": 2, "session_id": 3, "timestamp": 5, "action": '
    values = [base + b'"start"}', b"\xff\xfe\xfa not utf8", None, b"", b"[" * 5000 + b"]" * 5000]
    parsed = parse_workout(kafka_rows(spark, values))
    assert reasons(parsed) == [
        None,
        "not utf-8",
        "malformed json",
        "malformed json",
        "malformed json",
    ]


def test_the_quarantine_keeps_the_bytes_and_shows_them_readably(spark: SparkSession) -> None:
    values = [b"\xff\xfe\xfa not utf8", '{"user_id": "é"}'.encode(), None]
    rows = kafka_quarantine(parse_workout(kafka_rows(spark, values))).orderBy("offset").collect()
    assert [(r.raw, r.raw_text) for r in rows] == [
        (b"\xff\xfe\xfa not utf8", "hex:fffefa206e6f742075746638"),
        ('{"user_id": "é"}'.encode(), '{"user_id": "é"}'),
        (None, None),
    ]


def test_values_held_as_text_by_earlier_bronze_tables_still_parse(spark: SparkSession) -> None:
    text = KAFKA.replace("key binary, value binary", "key string, value string")
    base = '{"user_id": 1, "workout_id": 2, "session_id": 3, "timestamp": 5, "action": '
    parsed = parse_workout(kafka_rows(spark, [base + '"stop"}', "{broken"], text))
    assert reasons(parsed) == [None, "malformed json"]
