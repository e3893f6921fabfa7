"""A declared expectation's ``check``, read with sqlglot's Spark dialect when the declaration
loads: the columns it names, or what is wrong with it, in words for the person editing the file
(sqlglot's own name its classes and internal fields, or say nothing: an unclosed quote)."""

from __future__ import annotations

import sqlglot
from sqlglot import Token, TokenType, exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ErrorLevel, ParseError, TokenError
from sqlglot.optimizer.annotate_types import annotate_types

EXAMPLE = "such as kwh >= 0"
NOT_SQL = "is not a Spark SQL condition: "
# Functions a check may not call: a verdict that changes between reads (the quarantine and
# the table would disagree), or one that is not of a single row. sqlglot knows some by class.
NOT_OF_ONE_ROW = (exp.AggFunc, exp.Window, exp.Explode, exp.Rand, exp.Uuid,
                  exp.CurrentTimestamp, exp.CurrentDate)  # fmt: skip
NOT_OF_ONE_ROW_NAMES = {
    "every", "some", "any", "bool_and", "bool_or", "count_if", "explode", "explode_outer",
    "posexplode", "posexplode_outer", "inline", "inline_outer", "stack", "now", "random",
    "randn", "rand", "uuid", "current_timestamp", "current_date", "localtimestamp",
    "monotonically_increasing_id", "spark_partition_id", "input_file_name",
}  # fmt: skip
# What a check may not be as a whole: a value, not a condition, or a statement.
NOT_A_CONDITION = (exp.Column, exp.Literal, exp.Null, exp.Star, exp.Tuple, exp.Neg, exp.Add,
                   exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.DPipe, exp.BitwiseAnd, exp.BitwiseOr,
                   exp.BitwiseXor, exp.BitwiseNot, exp.BitwiseLeftShift, exp.BitwiseRightShift,
                   exp.Command, exp.Drop, exp.Create, exp.Insert, exp.Delete, exp.Update,
                   exp.Alter, exp.Query)  # fmt: skip
PARAMETERS = (exp.Placeholder, exp.Parameter, exp.SessionParameter)
OPENING = {TokenType.L_PAREN: "(", TokenType.L_BRACKET: "["}
CLOSING = {TokenType.R_PAREN: TokenType.L_PAREN, TokenType.R_BRACKET: TokenType.L_BRACKET}


def check_columns(check: str) -> set[str]:
    """The columns a ``check`` reads (of a nested one, its top column).

    Raises:
        ValueError: it is not one Spark SQL condition of a single row, the same on every read;
            the message says what is wrong with it.
    """
    _words(check)
    condition = _parse(check)
    refusal = _refusal(condition)
    if refusal is not None:
        raise ValueError(refusal)
    return {column.parts[0].name for column in condition.find_all(exp.Column)}


def _words(check: str) -> None:
    """Refuse a check that is not words of one statement (sqlglot's tokens), brackets matched.

    Raises:
        ValueError: an unclosed quote or comment, no words, ``;``, a bracket unmatched.
    """
    try:
        tokens = Dialect.get_or_raise("spark").tokenize(check)
    except TokenError:
        raise ValueError(f"{NOT_SQL}{_unclosed(check)} is not closed") from None
    statements = _statements(tokens)
    if statements == 0:
        raise ValueError(f"is empty: write a condition of each row, {EXAMPLE}")
    if statements > 1:
        raise ValueError("holds several statements (separated by ';'): write one condition")
    if any(token.token_type == TokenType.SEMICOLON for token in tokens):
        raise ValueError("has a ';': write the condition alone")
    _matched(check, tokens)


def _statements(tokens: list[Token]) -> int:
    """How many statements ``tokens`` hold: runs of words between semicolons."""
    count, words = 0, 0
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            count, words = count + (words > 0), 0
        else:
            words += 1
    return count + (words > 0)


def _matched(check: str, tokens: list[Token]) -> None:
    """Refuse a check whose brackets do not match, naming the first one that does not.

    Raises:
        ValueError: naming the bracket and where it is.
    """
    opened: list[Token] = []
    for token in tokens:
        if token.token_type in OPENING:
            opened.append(token)
        elif token.token_type in CLOSING:
            if not opened or opened[-1].token_type != CLOSING[token.token_type]:
                where = _at(check, token.start)
                raise ValueError(f"{NOT_SQL}the {token.text!r} at {where} closes nothing")
            opened.pop()
    if opened:
        where = _at(check, opened[-1].start)
        closing = {"(": ")", "[": "]"}[opened[-1].text]
        raise ValueError(f"{NOT_SQL}the {opened[-1].text!r} at {where} has no {closing!r}")


def _parse(check: str) -> exp.Expr:
    """The check parsed (``_words`` has found one statement).

    Raises:
        ValueError: it does not parse, said in words.
    """
    try:
        [condition] = sqlglot.parse(check, dialect="spark", error_level=ErrorLevel.RAISE)
    except ParseError as error:
        raise ValueError(NOT_SQL + _parse_error(check, error)) from None
    except Exception:  # sqlglot failing on text it cannot read: said in words, not its own
        raise ValueError(f"{NOT_SQL}it does not parse: write one condition, {EXAMPLE}") from None
    if condition is None:
        raise ValueError(f"is empty: write a condition of each row, {EXAMPLE}")
    return condition


def _refusal(condition: exp.Expr) -> str | None:
    """Why a parsed check is not one condition of a single row, the same on every read."""
    if isinstance(condition, exp.Alias):
        return (
            f"has {condition.alias!r} after the condition {condition.this.sql('spark')!r}: "
            "write the condition alone"
        )
    if isinstance(condition, NOT_A_CONDITION):
        return f"must be a condition (true or false for a row), {EXAMPLE}"
    if any(condition.find_all(*PARAMETERS)):
        return "has a parameter marker ($1, @x, ? or :x): write the value itself"
    if any(condition.find_all(exp.Select, exp.Subquery)):
        return "is a condition of one row: it cannot query a table"
    called = {f.name.lower() for f in condition.find_all(exp.Anonymous)}
    if any(condition.find_all(*NOT_OF_ONE_ROW)) or called & NOT_OF_ONE_ROW_NAMES:
        return (
            "is a condition of one row, the same on every read: no aggregate, window, "
            "generator, random or current-time function"
        )
    kind = _kind(condition)
    if kind is not None:
        return f"is of type {kind}, not a condition (true or false for a row), {EXAMPLE}"
    return None


def _kind(condition: exp.Expr) -> str | None:
    """The type of the check's value when it is evidently not boolean (``upper(site)``,
    ``if(kwh > 0, 1, 0)``); None when it is boolean or its type depends on the records."""
    try:
        kind = annotate_types(condition.copy(), dialect="spark").type
    except Exception:  # no type found: Spark judges it on the records, before any write
        return None
    unknown = (exp.DataType.Type.BOOLEAN, exp.DataType.Type.UNKNOWN)
    return None if kind is None or kind.this in unknown else kind.sql("spark").lower()


def _parse_error(check: str, error: ParseError) -> str:
    """sqlglot's first parse error in words: where, and what is wrong there."""
    first = error.errors[0] if error.errors else {}
    description, word = str(first.get("description", "")), str(first.get("highlight", ""))
    line, end = int(first.get("line") or 1), int(first.get("col") or 1)
    where = f"{word!r} (line {line}, column {end - len(word) + 1})" if "\n" in check else (
        f"{word!r} (column {end - len(word) + 1})"
    )  # fmt: skip
    if "'high' missing" in description:
        return "BETWEEN needs AND and an upper bound, such as kwh BETWEEN 0 AND 10"
    if description.startswith("Required keyword"):
        return f"it is incomplete at {where}: a value or a column is missing there"
    if description.startswith("Invalid expression / Unexpected token"):
        return f"{where} is not expected there"
    if description.startswith("Expect"):
        return f"{description[0].lower()}{description[1:]}, at {where}"
    return f"it does not parse at {where}"


def _unclosed(check: str) -> str:
    """The quote or comment left open in a check that sqlglot cannot split into words."""
    at = 0
    while at < len(check):
        if check.startswith("--", at):
            newline = check.find("\n", at)
            at = len(check) if newline < 0 else newline + 1
        elif check.startswith("/*", at):
            end = check.find("*/", at + 2)
            if end < 0:
                return f"the comment opened by /* at {_at(check, at)}"
            at = end + 2
        elif check[at] in "'\"`":
            end = at + 1
            while end < len(check) and check[end] != check[at]:
                end += 2 if check[end] == "\\" and check[at] != "`" else 1
            if end >= len(check):
                return f"the quote {check[at]} at {_at(check, at)}"
            at = end + 1
        else:
            at += 1
    return "a quote or a comment"


def _at(check: str, index: int) -> str:
    """Where the character at ``index`` is: its column, and line when the check has several."""
    line = check.count("\n", 0, index) + 1
    column = index - (check.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}" if "\n" in check else f"column {column}"
