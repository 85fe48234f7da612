"""A user's own contracts: any schema file, folder or generated package, held as a `ContractSet`.

    contracts = load_contracts("schemas/recipe.json")
    recipe = contracts["recipe"]            # a handle, as `PLAN` is one
    problems = violations(recipe, value)    # every violation, with its JSON Pointer

The set judges as plancontracts' own contracts are judged (the same strict
parsing, messages, pointers and cap), by the schemas alone: a set read from
schemas has no generated types, and decodes to JSON values. The handles of a
package `plancontracts generate` wrote decode into its types.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import UnusableSchema
from .schema_tree import SchemaTree, is_generated_package
from .validation import PATTERN_SECONDS, ContractSet

__all__ = ["load_contracts"]


def load_contracts(
    *paths: str | os.PathLike[str], resources: Mapping[str, Any] | None = None
) -> ContractSet:
    """The contracts of a schema folder, of schema files, or of a generated package's folder.

    A folder laid out as plancontracts' schemas/ is (a folder per family, a
    file per contract) gives each of its contracts; one or more schema files
    are each a contract, named after the file (`Recipe.schema.json` is
    `recipe`); the folder of a package `plancontracts generate` wrote gives
    its contracts by their bundled schemas (no code of it is run: import the
    package for its typed handles). Schemas of drafts 4, 6, 7, 2019-09 and
    2020-12 are judged by the draft they declare (2020-12 when none); `$id`
    is optional. `resources` maps URIs to more schemas that references may
    name (a remote `$ref` is never fetched). Raises `UnusableSchema`, one
    line naming the file and the rule, for schemas that cannot be used, and
    TypeError when no path is given.
    """
    if not paths:
        raise TypeError("load_contracts() takes at least one path")
    return ContractSet(bundled(*paths, resources=resources), pattern_seconds=PATTERN_SECONDS)


def bundled(
    *paths: str | os.PathLike[str], resources: Mapping[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """Each contract of a schema folder, of files or of a generated package, bundled.

    Reads them as `load_contracts` does; raises `UnusableSchema`, one line
    naming the file (inside the folder, named first).
    """
    given = [Path(path) for path in paths]
    folder = given[0] if len(given) == 1 and given[0].is_dir() else None
    # Files given are named in messages as given; a folder's, inside it.
    generated = folder is not None and is_generated_package(folder)
    where = f"{folder}: " if folder is not None and not generated else ""
    try:
        if folder is not None:
            tree = _tree_of_folder(folder, generated, resources)
        else:
            for path in given:
                if path.is_dir():
                    raise UnusableSchema(f"{path}: is a folder; give it alone, or give files")
            tree = SchemaTree(files=given, resources=resources)
        return {name: tree.bundle(contract) for name, contract in tree.contracts.items()}
    except UnusableSchema as error:
        raise UnusableSchema(f"{where}{error}") from None
    except RecursionError:  # bundling and checking follow the schema's depth
        raise UnusableSchema(f"{where or f'{given[0]}: '}nests its references too deeply") from None


def _tree_of_folder(
    folder: Path, generated: bool, resources: Mapping[str, Any] | None
) -> SchemaTree:
    """A schema folder's tree, or, for a `generated` package's folder, that of its schemas."""
    if not generated:
        return SchemaTree(folder, resources=resources)
    files = sorted((folder / "schemas").glob("*.json"))
    if not files:
        raise UnusableSchema("a generated package with no schemas/ folder")
    return SchemaTree(files=files, resources=resources)
