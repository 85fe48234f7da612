"""Writing `generated/` from `schemas/`, or checking that it is up to date.

The output is a pure function of the schema files: one module of typed models
per family, one self-contained schema per contract, and an index of both with
a typed handle per contract. Nothing in it depends on the time, the machine,
the order files are listed or the name the package is imported by.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import json
import keyword
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plancontracts.codegen.models import generate_module, rules_beyond_types, tidy
from plancontracts.runtime.core.errors import UnusableSchema
from plancontracts.runtime.core.schema_tree import (
    GENERATED_BY,
    SchemaTree,
    constant_name,
    is_generated_package,
    module_name,
    version_of,
)

OWN_IDS = "https://plancontracts.dev/schemas/"
"""Where the `$id` of each of plancontracts' own contracts begins: their package defines
`Contract`, and every other imports it. Known by the schemas, not by their folder, so that a copy
of schemas/ generates what generated/ holds."""

# Public names the index binds besides the family modules and the contracts' handles.
# Everything else it uses is private (`_typing`, `_Document`): no contract or family
# name, a lower-case word, can be one.
_INDEX_NAMES = frozenset({"CONTRACTS", "Contract", "FAMILIES", "SCHEMA_ONLY_RULES", "VERSIONS"})
# Builtins the index names in its annotations, read as `_builtins.X` when a family
# module takes the name X in the package.
_INDEX_BUILTINS = ("dict", "int", "str", "tuple")
# A family module may not be named as the folder of bundled schemas beside it.
_SCHEMA_FOLDER = "schemas"
# The mode `open` gives a new file under the process's umask, read without changing it.
_UMASK = os.umask(0o022)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK


def header(source: Path | Sequence[Path]) -> str:
    """The first lines of every generated Python file; names the schemas, not their path."""
    if isinstance(source, Path):
        what = f"the schemas in {Path(os.path.abspath(source)).name}/"
    else:
        what = "the schema file " + ", ".join(path.name for path in source)
    return (
        f"{GENERATED_BY} from {what}.\n"
        "# Do not edit: change the schema and run the generator again.\n\n"
    )


def _tree(source: Path | Sequence[Path], resources: Mapping[str, Any] | None) -> SchemaTree:
    if isinstance(source, Path):
        return SchemaTree(source, resources=resources)
    return SchemaTree(files=source, resources=resources)


def render(
    source: Path | Sequence[Path], *, resources: Mapping[str, Any] | None = None
) -> dict[str, str]:
    """Every file of the generated package, by path relative to it, as text.

    `source` is a schema folder, or schema files each of which is a contract
    (see `runtime.core.schema_tree.SchemaTree`, which also says what
    `resources` are). The package imports its own modules relatively, so it
    works under any name it is imported by; its handles are plancontracts'
    `Contract`, so that `plancontracts.decode` and the others take them.
    Raises `UnusableSchema` when the schemas break a rule of the schema tree
    or their names cannot be Python names.
    """
    tree = _tree(source, resources)
    schemas = source
    _check_python_names(tree)
    files: dict[str, str] = {}
    for family, contracts in tree.families().items():
        roots = [contract.class_name for contract in contracts]
        try:
            files[f"{module_name(family)}.py"] = generate_module(
                tree.family_bundle(family), family, header(schemas), roots
            )
        except RecursionError:  # the code generator recurses once per reference followed
            raise UnusableSchema(
                f"{family}: nests its references too deeply for the generator"
            ) from None
    bundles = {name: tree.bundle(contract) for name, contract in tree.contracts.items()}
    for name, bundle in bundles.items():
        files[f"schemas/{name}.json"] = json.dumps(bundle, indent=2, ensure_ascii=False) + "\n"
    rules = {name: rules_beyond_types(bundle) for name, bundle in bundles.items()}
    for name, contract in tree.contracts.items():
        if not tree.is_simple(contract):  # typed as any value: its schema judges it whole
            rules[name] = ("",)
    own = all(contract.uri.startswith(OWN_IDS) for contract in tree.contracts.values())
    files["__init__.py"] = tidy(_index(tree, rules, header(schemas), own=own))
    return dict(sorted(files.items()))


def _check_python_names(tree: SchemaTree) -> None:
    """Refuse contract and family names whose Python names would clash in the index.

    Class names need no check here: two contracts of a family with one class
    name are refused by bundling.
    """
    seen: dict[str, str] = {}
    for name, contract in tree.contracts.items():
        constant = constant_name(name)
        # `None`, `True` and `False` are keywords: no class can take them as a name.
        if keyword.iskeyword(contract.class_name):
            raise UnusableSchema(
                f"{contract.path}: its model class would be named {contract.class_name}, "
                "a Python keyword; rename the contract"
            )
        if constant in _INDEX_NAMES:
            raise UnusableSchema(f"{contract.path}: {constant} is a name the index uses itself")
        if constant in seen:
            raise UnusableSchema(
                f"{contract.path}: contracts {seen[constant]!r} and {name!r} would both be "
                f"{constant} in Python; rename one"
            )
        seen[constant] = name
    for family in tree.families():
        module = module_name(family)
        if keyword.iskeyword(module) or module in _INDEX_NAMES or module == _SCHEMA_FOLDER:
            raise UnusableSchema(f"{family}/: {module} cannot be a family's Python module name")


def _index(tree: SchemaTree, rules: dict[str, tuple[str, ...]], head: str, *, own: bool) -> str:
    """The index of a generated package; `own` for plancontracts' own, which defines `Contract`."""
    modules = sorted({module_name(contract.family) for contract in tree.contracts.values()})
    shadowed = {name for name in _INDEX_BUILTINS if name in modules}
    dict_, int_, str_, tuple_ = (
        f"_builtins.{name}" if name in shadowed else name for name in _INDEX_BUILTINS
    )
    contract_class = [
        "@_dataclasses.dataclass(frozen=True)",
        "class Contract(_typing.Generic[_Document]):",
        '    """One contract: its name, the generated type of its documents, and their package.',
        "",
        "    `type` is a msgspec Struct, or a union or map of them; the type parameter is",
        "    the same type, for type checkers. `package` is the generated package that holds",
        "    the contract's schema (`schemas/NAME.json` in it), which judges what the types",
        "    cannot.",
        '    """',
        "",
        f"    name: {str_}",
        "    type: _typing.Any",
        f"    package: {str_} = __name__",
        "",
        "",
    ]
    lines = [
        head.rstrip("\n"),
        '"""Typed models of every contract, a handle for each, and what only the schema can check.',
        "",
        "Each contract has a handle named after it (`tool-event` -> `TOOL_EVENT`): a `Contract`",
        "holding its name and the type of its documents, that type also as its type parameter,",
        "so that a function taking a handle can return documents typed (`plancontracts.decode`",
        "does). `CONTRACTS` maps each name to its handle.",
        "`SCHEMA_ONLY_RULES` maps each contract to the JSON Pointers of the schema keywords",
        "the models cannot enforce; validation runs the schema for those contracts.",
        "`FAMILIES` maps each contract to its family: the module of its models here, and, for",
        "plancontracts' own contracts, the package of `plancontracts.runtime` that holds the",
        "family's rules and runtime. `VERSIONS` maps each contract whose schema has an",
        "`x-version` to it (`plancontracts diff` tells when to raise it). `from ... import *`",
        "takes `Contract` and the handles.",
        '"""',
        "",
        *(["import builtins as _builtins"] if shadowed else []),
        *(["import dataclasses as _dataclasses"] if own else []),
        "import typing as _typing",
        "",
        *([] if own else ["from plancontracts.generated import Contract", ""]),
        f"from . import {', '.join(modules)}",
        "",
        # In the order ruff keeps `__all__` (RUF022): constants, then classes.
        "__all__ = [",
        *(f'    "{constant}",' for constant in sorted(map(constant_name, tree.contracts))),
        '    "Contract",',
        "]",
        "",
        *(['_Document = _typing.TypeVar("_Document")', "", "", *contract_class] if own else [""]),
    ]
    for name, contract in tree.contracts.items():
        root = f"{module_name(contract.family)}.{contract.class_name}"
        package = "" if own else ", __name__"
        lines.append(
            f"{constant_name(name)}: _typing.Final[Contract[{root}]] = "
            f"Contract({json.dumps(name)}, {root}{package})"
        )
    lines += ["", f"CONTRACTS: _typing.Final[{dict_}[{str_}, Contract[_typing.Any]]] = {{"]
    for name in tree.contracts:
        lines.append(f'    "{name}": {constant_name(name)},')
    lines += [
        "}",
        "",
        f"SCHEMA_ONLY_RULES: _typing.Final[{dict_}[{str_}, {tuple_}[{str_}, ...]]] = {{",
    ]
    for name in tree.contracts:
        pointers = "".join(f"{json.dumps(pointer)}, " for pointer in rules[name])
        lines.append(f'    "{name}": ({pointers}),')
    lines += ["}", "", f"FAMILIES: _typing.Final[{dict_}[{str_}, {str_}]] = {{"]
    for name, contract in tree.contracts.items():
        lines.append(f'    "{name}": "{module_name(contract.family)}",')
    lines += ["}", "", f"VERSIONS: _typing.Final[{dict_}[{str_}, {int_}]] = {{"]
    for name, contract in tree.contracts.items():
        version = version_of(contract.schema)
        if version is not None:
            lines.append(f'    "{name}": {version},')
    lines += ["}", ""]
    return "\n".join(lines)


def write(
    schemas: Path | Sequence[Path], out: Path, *, resources: Mapping[str, Any] | None = None
) -> list[str]:
    """Rewrite `out` from `schemas` (see `render`); returns the paths written or removed.

    `out` belongs to the generator: files in it that the schemas do not
    produce are removed. So it must be missing, empty, or written by the
    generator before; anything else raises `OutputFolderError`, before any
    change. Raises `UnusableSchema` for a schema folder it cannot use.
    """
    _check_output_folder(out)
    wanted = render(schemas, resources=resources)
    changed = stale_files(wanted, out)
    staged = _stage({relative: wanted[relative] for relative in changed if relative in wanted}, out)
    for relative in changed:
        target = out / relative
        if relative in wanted:
            os.replace(staged[relative], target)
        else:
            target.unlink()
    return changed


def _stage(files: dict[str, str], out: Path) -> dict[str, Path]:
    """Write each file beside its place under `out`, under a temporary name; returns where.

    Renaming them into place afterwards cannot fail for want of room or
    permission, so a folder that cannot be written is found before any file
    changes. Raises `OutputFolderError` naming why, having removed what it wrote:
    the staged files and the folders it made.
    """
    made: list[Path] = []
    staged: dict[str, Path] = {}
    try:
        for relative, text in files.items():
            target = out / relative
            missing = [target.parent, *target.parent.parents]
            missing = [folder for folder in missing if not os.path.lexists(folder)]
            for folder in reversed(missing):
                folder.mkdir()
                made.append(folder)
            # A fresh, exclusively created name: a fixed one could be a link planted
            # there, or a killed run's leftover that this run removes as extra.
            handle, name = tempfile.mkstemp(
                dir=target.parent, prefix=f".{target.name}.", suffix=".generating"
            )
            staged[relative] = Path(name)
            os.fchmod(handle, _FILE_MODE)  # mkstemp makes it private; a module is not
            with os.fdopen(handle, "w", encoding="utf-8", newline="\n") as stream:
                stream.write(text)
    except OSError as error:
        for temporary in staged.values():
            with contextlib.suppress(OSError):  # the one that failed may not exist
                temporary.unlink()
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        where = error.filename or out
        raise OutputFolderError(f"{out}: cannot be written: {where}: {error.strerror}") from None
    return staged


class OutputFolderError(Exception):
    """The output folder is not the generator's to write."""


def _check_output_folder(out: Path) -> None:
    """Raise `OutputFolderError` unless `out` is the generator's to write, or can be made.

    A missing `out` can be made only below a folder: not below a file.
    """
    if not out.exists():
        for above in out.parents:
            if os.path.lexists(above):
                if not above.is_dir():
                    raise OutputFolderError(f"{out}: cannot be made: {above} is not a folder")
                break
        return
    if not out.is_dir():
        raise OutputFolderError(f"{out}: is not a folder")
    try:
        if not any(out.iterdir()):
            return
    except OSError as error:
        raise OutputFolderError(f"{out}: cannot be read: {error.strerror}") from None
    if not is_generated_package(out):
        raise OutputFolderError(
            f"{out}: holds files that `plancontracts generate` did not write, and it would "
            "remove them; give an empty folder or one it wrote"
        )


def check(
    schemas: Path | Sequence[Path], out: Path, *, resources: Mapping[str, Any] | None = None
) -> list[str]:
    """The paths under `out` whose meaning differs from what `schemas` produce.

    Stale, missing or extra files, compared by what they mean rather than by
    their bytes (see `stale_files`), so that a folder laid out by another
    version of ruff is up to date while any change to a type, a field, a
    default, a docstring, a schema or the index is not. Raises
    `UnusableSchema` as `render` does.
    """
    return stale_files(render(schemas, resources=resources), out, by_meaning=True)


def stale_files(wanted: dict[str, str], out: Path, *, by_meaning: bool = False) -> list[str]:
    """The paths under `out` that differ from `wanted` (text by relative path), sorted.

    A path is listed when its file is missing, differs, or is not in
    `wanted`. Files differ by their bytes; with `by_meaning`, a Python
    module differs by its header comment lines and its syntax tree
    (docstrings included, other comments and layout not), a JSON file by the
    value it parses to, and any other file by its bytes. Files that cannot
    be read or parsed differ.
    """
    present = {
        path.relative_to(out).as_posix()
        for path in out.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    same = _same_meaning if by_meaning else _same_bytes
    stale = [
        relative
        for relative, text in wanted.items()
        if relative not in present or not same(relative, (out / relative).read_bytes(), text)
    ]
    return sorted(stale + [relative for relative in present if relative not in wanted])


def _same_bytes(relative: str, present: bytes, wanted: str) -> bool:
    return present == wanted.encode("utf-8")


def _same_meaning(relative: str, present: bytes, wanted: str) -> bool:
    """Whether the file at `relative` holding `present` means what `wanted` does.

    The generator writes modules through the installed ruff, whose layout
    (line breaks, parentheses, trailing commas, quotes, blank lines) moves
    between its versions: those never make a file stale. What the code does
    and says does.
    """
    if _same_bytes(relative, present, wanted):
        return True
    try:
        text = present.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if relative.endswith(".py"):
        same_header = _header(text) == _header(wanted)
        return same_header and _module_meaning(text) == _module_meaning(wanted)
    if relative.endswith(".json"):
        return _json_meaning(text) == _json_meaning(wanted)
    return False


def _header(code: str) -> list[str]:
    """The comment lines a module starts with: the generator's own, which say what wrote it."""
    lines: list[str] = []
    for line in code.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.rstrip())
    return lines


def _module_meaning(code: str) -> str | None:
    """The module's syntax tree as text, docstrings cleaned as `help()` shows them.

    None when the text is not Python (a hand edit can leave it so): never
    equal to a module's. Comments, layout and the spelling of literals are
    not in the tree; every name, type, default, keyword and docstring is.
    """
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        # A string alone as a statement is a docstring: the module's, a class's, a
        # function's, or a field's after its annotation. ruff re-indents them and
        # trims their blank edges, as inspect.cleandoc reads them anyway.
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            node.value.value = inspect.cleandoc(node.value.value)
    try:
        return ast.dump(tree)
    except RecursionError:
        return None


def _json_meaning(text: str) -> str | None:
    """The JSON value as canonical text (keys sorted), or None when it is not strict JSON.

    Text, not the parsed value: Python holds `true == 1 == 1.0`, JSON does not.
    """
    try:
        value = json.loads(text, parse_constant=_not_json)
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (ValueError, RecursionError):
        return None


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
