"""Where a declaration file is wrong: errors naming the file, the line and the field, found from
the YAML document's nodes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError


@dataclass(frozen=True)
class DeclarationError:
    """Why a declaration file was not loaded: the file, the line and the field at fault."""

    file: Path
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f" (field '{self.field}')" if self.field else ""
        return f"{self.file}:{self.line}{where}: {self.message}"


# pydantic's words for a value of the wrong kind, by error type, in a YAML file editor's.
PLAIN = {
    "missing": "is required",
    "string_type": "must be text",
    "string_too_short": "must not be empty",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "tuple_type": "must be a list, such as [a, b]",
    "list_type": "must be a list, such as [a, b]",
    "dict_type": "must be a mapping, such as {name: value}",
    "model_type": "must be a mapping of fields, such as {name: value}",
    "model_attributes_type": "must be a mapping of fields, such as {name: value}",
}


class InvalidDeclaration(ValueError):
    """A declaration file that does not validate."""

    def __init__(self, errors: Sequence[DeclarationError]) -> None:
        super().__init__("\n".join(str(error) for error in errors))
        self.errors = list(errors)


def named_twice(columns: Sequence[str]) -> str | None:
    """What is wrong with a list of ``columns`` that names one twice, compared regardless of
    case as Spark compares column names; None when each is named once."""
    for n, column in enumerate(columns):
        earlier = next((c for c in columns[:n] if c.lower() == column.lower()), None)
        if earlier == column:
            return f"names the column {column!r} twice"
        if earlier is not None:
            return (
                f"names the column {earlier!r} twice, as {earlier!r} and {column!r}: column "
                "names compare regardless of case, as in Spark"
            )
    return None


def read_document(path: Path) -> tuple[yaml.Node, dict[str, Any]]:
    """The YAML document of the declaration file ``path``: its nodes (their lines), its data.

    Raises:
        InvalidDeclaration: it is not YAML, not a mapping, or gives a field twice.
    """
    text = path.read_text()
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark else 1
        problem = getattr(error, "problem", None) or str(error)
        where = f" (column {mark.column + 1})" if mark else ""
        raise InvalidDeclaration(
            [DeclarationError(path, line, "", f"not YAML: {problem}{where}")]
        ) from None
    if not isinstance(data, dict) or node is None:
        raise InvalidDeclaration([DeclarationError(path, 1, "", "must be a mapping of fields")])
    repeated = [
        DeclarationError(path, line, field, f"is given twice ({where}): keep one")
        for field, first, line in repeated_fields(node)
        for where in [f"line {line}" if first == line else f"lines {first} and {line}"]
    ]
    if repeated:
        raise InvalidDeclaration(repeated)
    return node, data


def validation_errors(
    path: Path, lines: dict[tuple[Any, ...], int], error: ValidationError, known: Iterable[str]
) -> list[DeclarationError]:
    """pydantic's errors of a declaration, each on its value's line, in words for the person
    editing the file (``known``: the fields a declaration has). A list too short because its
    items are wrong is not reported besides them."""
    found = error.errors()
    wrong_items = [e["loc"] for e in found if e["type"] != "too_short"]
    return [
        field_error(path, lines, e["loc"], e["msg"], e["type"], known, e.get("ctx") or {})
        for e in found
        if e["type"] != "too_short"
        or not any(loc[: len(e["loc"])] == e["loc"] for loc in wrong_items)
    ]


def field_error(
    path: Path,
    lines: dict[tuple[Any, ...], int],
    loc: tuple[Any, ...],
    msg: str,
    kind: str = "",
    known: Iterable[str] = (),
    ctx: dict[str, Any] | None = None,
) -> DeclarationError:
    """The error of the value at ``loc`` (a pydantic location), on that value's line, in words
    for the person editing the file (``known``: the fields a declaration has)."""
    field = ".".join(str(part) for part in loc)
    # The line of the value, else of the nearest field around it that has one (``()``: the
    # declaration's own, where it does not start the file), else the first.
    line = next((lines[loc[:n]] for n in range(len(loc), -1, -1) if loc[:n] in lines), 1)
    if kind == "extra_forbidden" and len(loc) == 1:
        msg = f"unknown field; a declaration has {', '.join(known)}"
    elif kind == "extra_forbidden":
        msg = "unknown field"
    else:
        msg = _plain(kind, msg, ctx or {})
    return DeclarationError(path, line, field, msg)


def _plain(kind: str, msg: str, ctx: dict[str, Any]) -> str:
    """pydantic's message of an error of type ``kind`` in words for a YAML file's editor."""
    if kind in PLAIN:
        return PLAIN[kind]
    if kind == "too_short":
        least = ctx.get("min_length", 1)
        return "must not be empty" if least == 1 else f"must hold at least {least} items"
    if kind == "greater_than":
        return f"must be greater than {ctx.get('gt')}"
    if kind == "greater_than_equal":
        return f"must be {ctx.get('ge')} or more"
    return msg.replace("Input should be", "must be").removeprefix("Value error, ")


def repeated_fields(node: yaml.Node, loc: tuple[Any, ...] = ()) -> Iterator[tuple[str, int, int]]:
    """``(dotted field, first line, next line)`` of each field a YAML mapping gives twice (a
    YAML loader keeps the last silently)."""
    if isinstance(node, yaml.MappingNode):
        first: dict[Any, int] = {}
        for key, value in node.value:
            line = key.start_mark.line + 1
            if key.value in first:
                yield ".".join(str(part) for part in (*loc, key.value)), first[key.value], line
            first.setdefault(key.value, line)
            yield from repeated_fields(value, (*loc, key.value))
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from repeated_fields(item, (*loc, index))


def rule_error(
    path: Path, lines: dict[tuple[Any, ...], int], field: str, msg: str
) -> DeclarationError:
    """The error of a rule across fields, on the line of ``field`` (a dotted path such as
    ``fields.3.type``)."""
    loc = tuple(int(part) if part.isdigit() else part for part in field.split("."))
    return field_error(path, lines, loc, msg)


def field_lines(node: yaml.Node, loc: tuple[Any, ...] = ()) -> Iterator[tuple[tuple, int]]:
    """``(field path, line)`` of every value in a composed YAML document (lines from 1)."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            path = (*loc, key.value)
            yield path, key.start_mark.line + 1
            yield from field_lines(value, path)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield (*loc, index), item.start_mark.line + 1
            yield from field_lines(item, (*loc, index))
