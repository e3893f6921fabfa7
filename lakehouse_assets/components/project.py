"""The project's declared sources: the ``Source`` components of its defs tree
(``lakehouse_assets/defs``) and the files of a ``LAKEHOUSE_SOURCES`` folder, checked together."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

import lakehouse_assets
import lakehouse_assets.defs
from lakehouse_assets.components.source import Source
from lakehouse_assets.fitness.names import TABLES
from lakehouse_assets.sources.declaration.errors import DeclarationError, InvalidDeclaration
from lakehouse_assets.sources.declaration.files import checked_together, read_declarations
from lakehouse_assets.sources.declaration.model import SourceDeclaration


def project_tree() -> dg.ComponentTree:
    """The project's defs tree, wherever the package is installed (a checkout or a wheel)."""
    return dg.ComponentTree.from_module(
        defs_module=lakehouse_assets.defs,
        project_root=Path(lakehouse_assets.__file__).parent.parent,
    )


def declared_sources(
    folder: Path, tree: dg.ComponentTree
) -> tuple[list[SourceDeclaration], list[DeclarationError]]:
    """The valid declarations of the ``folder`` that the sources of the defs ``tree`` leave
    standing, and the errors of the others: a folder's file that does not validate is skipped, so
    that the other sources still load.

    Raises:
        InvalidDeclaration: a source of the tree is refused beside the others (its name is
            taken, an expectation references a table no pipeline has).
    """
    loaded, errors = read_declarations(folder)
    components = [component.source for component in tree.get_all_components(of_type=Source)]
    accepted, refused = checked_together([*loaded, *components], tables=TABLES)
    files = {source.path for source in loaded}
    in_tree = [error for error in refused if error.file not in files]
    if in_tree:
        raise InvalidDeclaration(in_tree)
    folder_sources = [source.declaration for source in accepted if source in loaded]
    return folder_sources, errors + refused
