"""Where a declaration file is wrong: errors naming the file, the line and the field, found from
the YAML document's nodes."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


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


class InvalidDeclaration(ValueError):
    """A declaration file that does not validate."""

    def __init__(self, errors: Sequence[DeclarationError]) -> None:
        super().__init__("\n".join(str(error) for error in errors))
        self.errors = list(errors)


def lines_of(path: Path) -> dict[tuple[Any, ...], int]:
    """The line of each field of a (valid YAML) declaration file."""
    node = yaml.compose(path.read_text(), Loader=yaml.SafeLoader)
    return dict(field_lines(node)) if node is not None else {}


def field_error(
    path: Path,
    lines: dict[tuple[Any, ...], int],
    loc: tuple[Any, ...],
    msg: str,
    kind: str = "",
    known: Iterable[str] = (),
) -> DeclarationError:
    """The error of the value at ``loc`` (a pydantic location), on that value's line, in words
    for the person editing the file (``known``: the fields a declaration has)."""
    field = ".".join(str(part) for part in loc)
    line = next((lines[loc[:n]] for n in range(len(loc), 0, -1) if loc[:n] in lines), 1)
    if kind == "extra_forbidden" and len(loc) == 1:
        msg = f"unknown field; a declaration has {', '.join(known)}"
    elif kind == "extra_forbidden":
        msg = "unknown field"
    elif kind == "literal_error":
        msg = msg.replace("Input should be", "must be")
    return DeclarationError(path, line, field, msg.removeprefix("Value error, "))


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
