"""Typed msgspec models for one contract family.

datamodel-code-generator turns a family bundle's type view (see
`codegen.type_view`: the part of the schema the types hold exactly, or
loosened, never stricter) into `msgspec.Struct` classes. What it leaves out,
this module adds, in one pass over the generated syntax tree:

- closed structs: a schema object with `additionalProperties: false` becomes a
  struct with `forbid_unknown_fields=True` (the generator drops that keyword
  for msgspec), so a misspelled field is an error, never silently ignored; an
  open object (`additionalProperties` absent or `true`) is a struct that
  ignores unknown fields: the typed value keeps only the named ones;
- keyword-only construction (`kw_only=True`), so code that builds a contract
  names every field it sets;
- schema defaults as struct defaults, including those the generator drops
  (such as `null`), and no `UnsetType` on a field that has one;
- descriptions as docstrings only, so that a type reads as one short line;
- a string's pattern as `Meta(extra_json_schema={"pattern": ...})`, never as
  msgspec's own `Meta(pattern=...)`: msgspec does not match it (with `re`, on
  every conversion), plancontracts does, after conversion, and msgspec's
  JSON Schema of the type still shows it;
- snake_case Python names for every JSON name, including names such as
  `$comment` that the generator can only prefix with `field_`;
- immutable structs where the schema asks for them: an object schema marked
  `"x-frozen": true` becomes a `frozen=True` struct whose arrays are tuples
  (`tuple[X, ...]`, an empty default `()`), so a value of that type can be
  shared as it is, never copied for safety. Such a struct may hold only
  other frozen structs and no maps, or the generator refuses the schema.

`rules_beyond_types` names the schema keywords the type view leaves out (such
as `minProperties` on an object with named properties); validation runs the
authoritative schema for contracts that have any.
"""

from __future__ import annotations

import ast
import builtins
import json
import keyword
import re
import subprocess
import sys
import tempfile
import unicodedata
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from plancontracts.codegen.type_view import type_view
from plancontracts.runtime.core.errors import UnusableSchema
from plancontracts.runtime.core.schema_tree import JSONSchema


def rules_beyond_types(bundle: JSONSchema) -> tuple[str, ...]:
    """JSON Pointers of the keywords in `bundle` that the generated models do not enforce.

    The pointers `type_view` records: the models are generated from that view
    of the schema, and validation runs the schema for a contract with any.
    """
    return type_view(bundle).beyond


def python_name(json_name: str) -> str:
    """The Python name of a JSON member: `retryPolicy` -> `retry_policy`, `$comment` -> `comment`.

    Python keywords get a trailing underscore: `async` -> `async_`. Unlike the
    runtime's `snake_case` (keys from prose: accents folded, bounded, possibly
    empty), the result is always a valid Python identifier.
    """
    # Folded as Python folds identifiers (NFKC): full-width letters and ligatures such as
    # U+FB01 read as their plain letters (`full`, `file`).
    core = re.sub(r"[^0-9A-Za-z]+", "_", unicodedata.normalize("NFKC", json_name)).strip("_")
    core = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", core).lower()
    if not core or core[0].isdigit():
        core = "field_" + core
    return core + "_" if keyword.iskeyword(core) else core


def generate_module(bundle: JSONSchema, family: str, header: str, roots: Sequence[str] = ()) -> str:
    """The source of the generated module for one family bundle.

    The models are generated from the bundle's type view (`type_view`): they
    hold what it keeps of the schema, and accept
    what it drops. `roots` are the class names of the family's contracts
    (`$defs` keys of `bundle`): each root class is named so, whatever name it
    shares with what the module uses (`Struct`, `Any`, `Model`). Raises
    `UnusableSchema` for a schema the models cannot be written for (two types
    of one name).
    """
    bundle = type_view(bundle).schema
    source, metadata = _run_generator(bundle, family)
    tree = ast.parse(source)
    # Split once: a field's name is read from its line, and splitting the module for each
    # field took time quadratic in the schema (24 s of 42 for a 2 MB schema of 8,552 fields).
    lines = source.splitlines()
    tree.body = [statement for statement in tree.body if not _is_placeholder_root(statement)]
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef):
            schema = _schema_of(statement.name, metadata, bundle)
            _shape_struct(statement, schema, lines)
            if _is_frozen(statement.name, schema):
                _freeze(statement)
    _check_frozen(tree)
    tree = _MetaRewrite().visit(tree)
    _import_privately(tree)
    _qualify_shadowed_builtins(tree)
    _name_roots(tree, roots, metadata)
    return tidy(header + ast.unparse(tree) + "\n")


# Names that the rewrite itself writes, with where they come from: the generator
# imports them only when its own output uses them.
_WRITTEN_NAMES = {"field": ("msgspec", "field")}


def _import_privately(tree: ast.Module) -> None:
    """Turn `from M import a` into `import M as _M`, and every use of `a` into `_M.a`.

    The module's own names are then only its types, and a type may be named
    like anything the module uses (`Struct`, `Meta`, `Any`, `field`): no
    contract or definition name can shadow, or be shadowed by, an import.
    """
    sources = dict(_WRITTEN_NAMES)
    body: list[ast.stmt] = []
    modules: list[str] = []
    for statement in tree.body:
        if isinstance(statement, ast.ImportFrom) and statement.module != "__future__":
            if statement.level or statement.module is None:
                raise UnusableSchema("the model generator wrote a relative import")
            for alias in statement.names:
                sources[alias.asname or alias.name] = (statement.module, alias.name)
            continue
        body.append(statement)
    for module, _ in sources.values():
        if module not in modules:
            modules.append(module)
    imports: list[ast.stmt] = [
        ast.Import(names=[ast.alias(name=module, asname=_private(module))]) for module in modules
    ]
    future = [s for s in body if isinstance(s, ast.ImportFrom)]
    rest = [s for s in body if not isinstance(s, ast.ImportFrom)]
    tree.body = [*future, *imports, *rest]
    _Qualify(sources).visit(tree)


def _private(module: str) -> str:
    return "_" + module.replace(".", "_")


class _Qualify(ast.NodeTransformer):
    """Reads each name of `sources` (name -> (module, attribute)) as `_module.attribute`."""

    def __init__(self, sources: dict[str, tuple[str, str]]) -> None:
        self.sources = sources

    def visit_Name(self, node: ast.Name) -> ast.AST:
        # Names the rewrite made have no `ctx`; they are all read.
        if isinstance(getattr(node, "ctx", None), ast.Store) or node.id not in self.sources:
            return node
        module, attribute = self.sources[node.id]
        return ast.copy_location(
            ast.Attribute(value=ast.Name(_private(module), ast.Load()), attr=attribute),
            node,
        )


def _qualify_shadowed_builtins(tree: ast.Module) -> None:
    """Read a builtin as `_builtins.X` inside a struct that has a field named X.

    msgspec resolves a struct's annotations with the struct's own names first,
    and a default such as `field(default_factory=list)` is read in the class
    body: a property named `list` or `str` would otherwise stand for the
    builtin there. Raises `UnusableSchema` if a field would shadow one of the
    module's own types, which cannot happen for generated names (fields are
    snake_case, types PascalCase) but would silently change a type if it did.
    """
    qualify = _Builtins()
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        qualify.owner = cls.name
        qualify.shadowed = {
            s.target.id
            for s in cls.body
            if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
        }
        for statement in cls.body:
            if isinstance(statement, ast.AnnAssign):
                statement.annotation = qualify.visit(statement.annotation)
                if statement.value is not None:
                    statement.value = qualify.visit(statement.value)
    private = _private("builtins")
    imported = any(
        isinstance(s, ast.Import) and any(a.asname == private for a in s.names) for s in tree.body
    )
    if qualify.used and not imported:
        index = next(i for i, s in enumerate(tree.body) if not _is_future_import(s))
        tree.body.insert(index, ast.Import(names=[ast.alias("builtins", private)]))


def _is_future_import(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.ImportFrom) and statement.module == "__future__"


class _Builtins(ast.NodeTransformer):
    """Reads each name in `shadowed` that is a builtin as `_builtins.name`."""

    def __init__(self) -> None:
        self.shadowed: set[str] = set()
        self.owner = ""
        self.used = False

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.shadowed:
            return node
        if not hasattr(builtins, node.id):
            raise UnusableSchema(f"{self.owner}: the field {node.id} hides the type {node.id}")
        self.used = True
        return ast.copy_location(
            ast.Attribute(value=ast.Name(_private("builtins"), ast.Load()), attr=node.id), node
        )


def _name_roots(tree: ast.Module, roots: Sequence[str], metadata: dict[str, list[str]]) -> None:
    """Give each contract's root class the name of its `$defs` key.

    The generator renames a type whose name its imports use (`Struct` becomes
    `StructModel`); once imports are private (`_import_privately`) the key is free.
    """
    generated = {tuple(path): name for name, path in metadata.items()}
    defined = {
        s.name if isinstance(s, ast.ClassDef) else s.target.id  # type: ignore[union-attr]
        for s in tree.body
        if isinstance(s, ast.ClassDef)
        or (isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
    }
    renames: dict[str, str] = {}
    for root in roots:
        name = generated.get(("$defs", root))
        if name is None or name not in defined:
            raise UnusableSchema(f"{root}: the model generator wrote no type for it")
        if name != root:
            if root in defined:
                raise UnusableSchema(f"{root}: two types of the family would be named {root}")
            renames[name] = root
    if renames:
        _Rename(renames).visit(tree)


class _Rename(ast.NodeTransformer):
    def __init__(self, renames: dict[str, str]) -> None:
        self.renames = renames

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.renames.get(node.id, node.id)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        self.generic_visit(node)
        node.name = self.renames.get(node.name, node.name)
        return node


def _run_generator(bundle: JSONSchema, family: str) -> tuple[str, dict[str, list[str]]]:
    from datamodel_code_generator import InputFileType, LiteralType, PythonVersion, generate
    from datamodel_code_generator.enums import DataModelType
    from datamodel_code_generator.format import Formatter

    with tempfile.TemporaryDirectory() as scratch:
        metadata_path = Path(scratch) / "metadata.json"
        with warnings.catch_warnings():
            # The generator warns about its own future defaults; the options
            # below are explicit, so the warnings say nothing about this output.
            warnings.simplefilter("ignore")
            source = generate(
                json.dumps(bundle),
                input_file_type=InputFileType.JsonSchema,
                input_filename=f"{family}.json",
                output_model_type=DataModelType.MsgspecStruct,
                target_python_version=PythonVersion.PY_311,
                enum_field_as_literal=LiteralType.All,
                use_annotated=True,
                field_constraints=True,
                snake_case_field=True,
                use_union_operator=True,
                use_standard_collections=True,
                disable_timestamp=True,
                use_schema_description=True,
                use_field_description=True,
                use_single_line_docstring=True,
                formatters=[Formatter.BUILTIN],
                emit_model_metadata=metadata_path,
            )
        metadata = json.loads(metadata_path.read_text(encoding="utf-8"))
    if not isinstance(source, str):
        raise UnusableSchema(f"{family}: the model generator produced more than one module")
    paths = {model["class_name"]: model["source_path"] for model in metadata["models"]}
    return source, paths


def _is_placeholder_root(statement: ast.stmt) -> bool:
    # A bundle made only of `$defs` has an empty root, which the generator
    # still names `Model: TypeAlias = Any`.
    return (
        isinstance(statement, ast.AnnAssign)
        and isinstance(statement.target, ast.Name)
        and statement.target.id == "Model"
    )


def _schema_of(class_name: str, metadata: dict[str, list[str]], bundle: JSONSchema) -> JSONSchema:
    if class_name not in metadata:
        raise UnusableSchema(f"generated class {class_name} has no source schema")
    node: Any = bundle
    for token in metadata[class_name]:
        # The generator writes a place in a list (`anyOf/0`) as a string too.
        node = node[int(token)] if isinstance(node, list) else node[token]
    if not isinstance(node, dict):
        raise UnusableSchema(f"generated class {class_name} comes from a non-schema")
    return node


def _shape_struct(cls: ast.ClassDef, schema: JSONSchema, lines: Sequence[str]) -> None:
    # An object closed by `"additionalProperties": false` forbids unknown fields; an open
    # one ignores them, as msgspec does: the typed value keeps only the named fields.
    wanted = ["forbid_unknown_fields", "kw_only"]
    if schema.get("additionalProperties") is not False:
        wanted.remove("forbid_unknown_fields")
        cls.keywords = [kw for kw in cls.keywords if kw.arg != "forbid_unknown_fields"]
    present = {kw.arg for kw in cls.keywords}
    for name in wanted:
        if name not in present:
            cls.keywords.append(ast.keyword(arg=name, value=ast.Constant(True)))
    properties: JSONSchema = schema.get("properties", {})
    fields = [
        (statement, _json_name(statement, lines))
        for statement in cls.body
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
    ]
    for _, json_name in fields:
        if json_name not in properties:
            raise UnusableSchema(f"{cls.name}.{json_name}: no such property")
    names = _unique_python_names([json_name for _, json_name in fields])
    for (statement, json_name), name in zip(fields, names, strict=True):
        assert isinstance(statement.target, ast.Name)
        statement.target.id = name
        if name != json_name:
            _set_field_keyword(statement, "name", ast.Constant(json_name))
        if "default" in properties[json_name]:
            _set_default(statement, properties[json_name]["default"], f"{cls.name}.{json_name}")
            statement.annotation = _without_unset(statement.annotation)


def _is_frozen(class_name: str, schema: JSONSchema) -> bool:
    frozen = schema.get("x-frozen", False)
    if not isinstance(frozen, bool):
        raise UnusableSchema(f"{class_name}: `x-frozen` must be true or false, not {frozen!r}")
    return frozen


def _freeze(cls: ast.ClassDef) -> None:
    """Make `cls` a frozen struct whose arrays are tuples, and whose empty array default is `()`."""
    cls.keywords.append(ast.keyword(arg="frozen", value=ast.Constant(True)))
    for statement in cls.body:
        if not isinstance(statement, ast.AnnAssign):
            continue
        statement.annotation = _ListsAsTuples().visit(statement.annotation)
        call = statement.value
        if (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "field"
        ):
            for kw in call.keywords:
                if kw.arg == "default_factory" and isinstance(kw.value, ast.Name):
                    if kw.value.id != "list":
                        raise UnusableSchema(f"{cls.name}: a frozen object has no map defaults")
                    kw.arg, kw.value = "default", ast.Tuple(elts=[], ctx=ast.Load())
            if len(call.keywords) == 1 and call.keywords[0].arg == "default":
                statement.value = call.keywords[0].value  # `field(default=())` reads as `= ()`


class _ListsAsTuples(ast.NodeTransformer):
    """`list[X]` becomes `tuple[X, ...]`: an array of any length, immutable."""

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "list":
            items = ast.Tuple(elts=[node.slice, ast.Constant(...)], ctx=ast.Load())
            return ast.Subscript(value=ast.Name("tuple", ast.Load()), slice=items, ctx=ast.Load())
        return node


_MUTABLE = frozenset({"list", "dict", "set"})


def _check_frozen(tree: ast.Module) -> None:
    """Refuse a frozen struct that could hold a mutable value: a map, or a struct not frozen.

    Its field types are followed through the module's type aliases.
    """
    classes = {s.name: s for s in tree.body if isinstance(s, ast.ClassDef)}
    aliases = {
        s.target.id: s.value
        for s in tree.body
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name) and s.value is not None
    }
    frozen = {name for name, cls in classes.items() if _keyword(cls, "frozen")}
    for name in sorted(frozen):
        pending = [s.annotation for s in classes[name].body if isinstance(s, ast.AnnAssign)]
        seen: set[str] = set()
        while pending:
            for node in ast.walk(pending.pop()):
                if not isinstance(node, ast.Name) or node.id in seen:
                    continue
                seen.add(node.id)
                if node.id in _MUTABLE:
                    raise UnusableSchema(f"{name}: a frozen object cannot hold a mutable {node.id}")
                if node.id in classes and node.id not in frozen:
                    raise UnusableSchema(
                        f'{name}: a frozen object holds {node.id}, which is not: mark it "x-frozen"'
                    )
                if node.id in aliases:
                    pending.append(aliases[node.id])


def _keyword(cls: ast.ClassDef, name: str) -> bool:
    return any(
        kw.arg == name and isinstance(kw.value, ast.Constant) and kw.value.value is True
        for kw in cls.keywords
    )


def _json_name(statement: ast.AnnAssign, lines: Sequence[str]) -> str:
    """The JSON name of a field the generator wrote: its `name=`, or its name as written.

    As written, not as parsed: Python reads an identifier NFKC-normalized, so
    a field the generator names `full` in full-width letters parses as `full`.
    `lines` are the generated module's lines, the field's among them.
    """
    assert isinstance(statement.target, ast.Name)
    call = statement.value
    if isinstance(call, ast.Call):
        for kw in call.keywords:
            if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                return str(kw.value.value)
    target = statement.target
    if target.end_col_offset is None:
        return target.id
    line = lines[target.lineno - 1].encode("utf-8")  # offsets count UTF-8 bytes
    return line[target.col_offset : target.end_col_offset].decode("utf-8")


def _unique_python_names(json_names: list[str]) -> list[str]:
    """The Python name of each JSON name of one object, no two alike.

    Names that clash (`full` and `full` in full-width letters, `retryPolicy` and
    `retry_policy`) are told apart by a number: the JSON name that is its own
    Python name keeps it, the others in schema order get `_2`, `_3`, and so on.
    Each field keeps its JSON name through `name=`.
    """
    wanted = [python_name(json_name) for json_name in json_names]
    taken = {name for name, json_name in zip(wanted, json_names, strict=True) if name == json_name}
    result: list[str] = []
    for name, json_name in zip(wanted, json_names, strict=True):
        if name == json_name:
            result.append(name)
            continue
        unique, number = name, 1
        while unique in taken:
            number += 1
            unique = f"{name}_{number}"
        taken.add(unique)
        result.append(unique)
    return result


def _set_field_keyword(statement: ast.AnnAssign, arg: str, value: ast.expr) -> None:
    call = statement.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        keywords = [] if call is None else [ast.keyword(arg="default", value=call)]
        call = ast.Call(func=ast.Name("field"), args=[], keywords=keywords)
        statement.value = call
    call.keywords = [kw for kw in call.keywords if kw.arg != arg] + [ast.keyword(arg, value)]


def _set_default(statement: ast.AnnAssign, default: Any, where: str) -> None:
    if isinstance(default, list | dict):
        if default:
            raise UnusableSchema(f"{where}: only empty lists and objects can be defaults")
        value: ast.expr = ast.Name("list" if isinstance(default, list) else "dict")
        arg = "default_factory"
    elif default is None or isinstance(default, str | int | float | bool):
        value, arg = ast.Constant(default), "default"
    else:
        raise UnusableSchema(f"{where}: unsupported default {default!r}")
    if isinstance(statement.value, ast.Call) and isinstance(statement.value.func, ast.Name):
        keywords = statement.value.keywords
        keep = [kw for kw in keywords if kw.arg not in ("default", "default_factory")]
        statement.value.keywords = [ast.keyword(arg, value), *keep]
        if len(statement.value.keywords) == 1 and arg == "default":
            statement.value = value  # `field(default=x)` alone reads better as `= x`
    elif arg == "default":
        statement.value = value
    else:
        statement.value = ast.Call(ast.Name("field"), [], [ast.keyword(arg, value)])


def _without_unset(annotation: ast.expr) -> ast.expr:
    members = _union_members(annotation)
    kept = [m for m in members if not (isinstance(m, ast.Name) and m.id == "UnsetType")]
    result = kept[0]
    for member in kept[1:]:
        result = ast.BinOp(left=result, op=ast.BitOr(), right=member)
    return result


def _union_members(annotation: ast.expr) -> list[ast.expr]:
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _union_members(annotation.left) + _union_members(annotation.right)
    return [annotation]


class _MetaRewrite(ast.NodeTransformer):
    """Rewrites every `Meta(...)`: no `description` or `title`, a `pattern` msgspec does not check.

    The docstrings already carry descriptions and titles. A pattern moves
    into `extra_json_schema`, the same string: msgspec would match it with
    `re` on every conversion, the dominant cost of decoding; plancontracts
    checks it itself after conversion, by walking the typed value, and
    `msgspec.json.schema` and `msgspec.inspect` still show it. Every `Meta`
    is rewritten, a map key's type's too. Raises `UnusableSchema` if
    the generator wrote an `extra_json_schema` of its own (the versions
    tried write none), which the pattern's would replace.
    """

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not (isinstance(node.func, ast.Name) and node.func.id == "Meta"):
            return node
        node.keywords = [kw for kw in node.keywords if kw.arg not in ("description", "title")]
        pattern = next((kw for kw in node.keywords if kw.arg == "pattern"), None)
        if pattern is None:
            return node
        if any(kw.arg == "extra_json_schema" for kw in node.keywords):
            raise UnusableSchema("the model generator wrote an extra_json_schema of its own")
        carried = ast.Dict(keys=[ast.Constant("pattern")], values=[pattern.value])
        node.keywords.remove(pattern)
        node.keywords.append(ast.keyword("extra_json_schema", carried))
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "Annotated":
            assert isinstance(node.slice, ast.Tuple)
            target, *extras = node.slice.elts
            extras = [extra for extra in extras if not _is_empty_meta(extra)]
            if not extras:
                return target
            node.slice.elts = [target, *extras]
        return node


def _is_empty_meta(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "Meta"
        and not node.args
        and not node.keywords
    )


def tidy(code: str) -> str:
    """Drop imports the rewrite made unused, sort imports, and format, as ruff does.

    The settings are given in full (`--isolated`), so the output does not
    depend on any configuration file around it.
    """
    settings = ["--isolated", "--line-length", "100", "--target-version", "py311"]
    fixed = _ruff(["check", *settings, "--select", "F401,I", "--fix-only", "-"], code)
    return _ruff(["format", *settings, "-"], fixed)


def _ruff(arguments: list[str], stdin: str) -> str:
    command = [sys.executable, "-m", "ruff", *arguments]
    done = subprocess.run(command, input=stdin, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UnusableSchema(f"ruff {arguments[0]} failed on generated code: {done.stderr}")
    return done.stdout
