"""Declarations as files: a source's YAML read and validated field by field, then by the rules
across its fields, and the sources of a project checked against each other (names, references),
each error naming the file, the line and the field.

A declaration is a file of a ``LAKEHOUSE_SOURCES`` folder (the file's name is the source's), or
the ``attributes`` of a ``defs.yaml`` in the project's defs tree (``components.Source``: the
folder's name is the source's); Dagster validates the latter's fields itself.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from lakehouse_assets.constants import BRONZE, QUARANTINE_SUFFIX, REPLAYS_SUFFIX, SILVER
from lakehouse_assets.sources.declaration.errors import (
    DeclarationError,
    InvalidDeclaration,
    field_lines,
    read_document,
    rule_error,
    validation_errors,
)
from lakehouse_assets.sources.declaration.expectations import reference_errors
from lakehouse_assets.sources.declaration.model import SourceDeclaration
from lakehouse_assets.sources.declaration.rules import rule_errors

FIELDS = tuple(SourceDeclaration.model_fields)  # named by the error of an unknown field
Lines = Mapping[tuple[Any, ...], int]  # a field's path in the declaration -> its line


@dataclass(frozen=True)
class DeclaredSource:
    """A valid declaration, with the file it was read from and the line of each field."""

    declaration: SourceDeclaration
    path: Path
    lines: Lines


def declared(data: dict[str, Any], path: Path, lines: Lines) -> DeclaredSource:
    """The declaration of ``data`` (its fields; ``avro_schema`` relative to ``path``'s folder),
    read from ``path`` whose fields stand on ``lines``.

    Raises:
        InvalidDeclaration: a field is invalid, or the fields break a rule across them.
    """
    if isinstance(data.get("avro_schema"), str):  # relative to the declaration
        data = {**data, "avro_schema": str((path.parent / data["avro_schema"]).resolve())}
    try:
        declaration = SourceDeclaration.model_validate(data)
    except ValidationError as error:
        raise InvalidDeclaration(validation_errors(path, dict(lines), error, FIELDS)) from None
    problems = [rule_error(path, dict(lines), f, msg) for f, msg in rule_errors(declaration)]
    if problems:
        raise InvalidDeclaration(problems)
    return DeclaredSource(declaration, path, lines)


def read_declaration(path: Path) -> DeclaredSource:
    """The declaration in the file ``path`` (its name defaults to the file's).

    Raises:
        InvalidDeclaration: the file is not YAML, or does not declare a valid source.
    """
    node, data = read_document(path)
    return declared({"name": path.stem, **data}, path, dict(field_lines(node)))


def load_declaration(path: Path) -> SourceDeclaration:
    """The declaration ``read_declaration`` reads, without its file and lines."""
    return read_declaration(path).declaration


def load_declarations(
    folder: Path, tables: Collection[str] = ()
) -> tuple[list[SourceDeclaration], list[DeclarationError]]:
    """Every valid declaration in ``folder`` (``*.yaml``, ``*.yml``; none when it does not
    exist), and the errors of the others (``checked_together``)."""
    loaded, errors = read_declarations(folder)
    accepted, refused = checked_together(loaded, tables)
    return [source.declaration for source in accepted], errors + refused


def read_declarations(folder: Path) -> tuple[list[DeclaredSource], list[DeclarationError]]:
    """The declarations of the files in ``folder`` (``*.yaml``, ``*.yml``; none when it does
    not exist) that are valid each by itself, and the errors of the others."""
    paths = sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")]) if folder.is_dir() else []
    loaded: list[DeclaredSource] = []
    errors: list[DeclarationError] = []
    for path in paths:
        try:
            loaded.append(read_declaration(path))
        except InvalidDeclaration as invalid:
            errors.extend(invalid.errors)
    return loaded, errors


def checked_together(
    sources: Sequence[DeclaredSource], tables: Collection[str] = ()
) -> tuple[list[DeclaredSource], list[DeclarationError]]:
    """The ``sources`` that hold together, and the errors of the others. ``tables``: the built-in
    pipeline's, as ``<layer>.<table>``. Two sources of one name are both refused, and so is a
    name whose bronze or silver tables would be among ``tables``, and an expectation
    ``references`` to a table neither among ``tables`` nor an accepted source's."""
    reserved = {t.split(".", 1)[1] for t in tables if t.split(".", 1)[0] in (BRONZE, SILVER)}
    names = [source.declaration.name for source in sources]
    errors: list[DeclarationError] = []
    named_once: list[DeclaredSource] = []
    for source in sources:
        name = source.declaration.name
        quarantine = f"{name}{QUARANTINE_SUFFIX}"
        taken = {name, quarantine, f"{quarantine}{REPLAYS_SUFFIX}"} & reserved
        if taken:
            message = f"the name {name!r} is taken: a table {sorted(taken)[0]} exists"
        elif names.count(name) > 1:
            others = [str(s.path) for s in sources if s.declaration.name == name and s != source]
            message = f"the name {name!r} is also declared by {', '.join(others)}"
        else:
            named_once.append(source)
            continue
        errors.append(
            DeclarationError(source.path, source.lines.get(("name",), 1), "name", message)
        )
    # A reference may name the tables of the sources accepted (not of those refused above).
    known = set(tables)
    for source in named_once:
        name = source.declaration.name
        known |= {f"{BRONZE}.{name}", f"{SILVER}.{name}", f"{SILVER}.{name}{QUARANTINE_SUFFIX}"}
    accepted = []
    for source in named_once:
        unknown = list(reference_errors(source.declaration.expectations, known))
        errors.extend(rule_error(source.path, dict(source.lines), f, m) for f, m in unknown)
        if not unknown:
            accepted.append(source)
    return accepted, errors
