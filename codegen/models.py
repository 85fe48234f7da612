"""Typed msgspec models for one contract family.

datamodel-code-generator turns a family bundle into `msgspec.Struct` classes.
What it leaves out, this module adds, in one pass over the generated syntax
tree:

- closed structs: a schema object with `additionalProperties: false` becomes a
  struct with `forbid_unknown_fields=True` (the generator drops that keyword
  for msgspec), so a misspelled field is an error, never silently ignored;
- keyword-only construction (`kw_only=True`), so code that builds a contract
  names every field it sets;
- schema defaults as struct defaults, including those the generator drops
  (such as `null`), and no `UnsetType` on a field that has one;
- descriptions as docstrings only, so that a type reads as one short line;
- snake_case Python names for every JSON name, including names such as
  `$comment` that the generator can only prefix with `field_`;
- immutable structs where the schema asks for them: an object schema marked
  `"x-frozen": true` becomes a `frozen=True` struct whose arrays are tuples
  (`tuple[X, ...]`, an empty default `()`), so a value of that type can be
  shared as it is, never copied for safety. Such a struct may hold only
  other frozen structs and no maps, or the generator refuses the schema.

It also works out which schema keywords the models cannot express (such as
`minProperties` on an object with named properties); validation runs the
authoritative schema for contracts that use them.
"""

from __future__ import annotations

import ast
import json
import keyword
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from plancontracts.codegen.schemas import JSONSchema, SchemaTreeError, walk

# Keywords that carry no validation, or that the generated models enforce
# wherever they appear.
_ANNOTATIONS = frozenset(
    {"$schema", "$id", "$comment", "$defs", "title", "description", "default", "examples"}
)
_TYPED = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "minItems",
        "maxItems",
        "minLength",
        "maxLength",
        "pattern",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "enum",
        "const",
        "$ref",
        # Formats are annotations in draft 2020-12 unless a format checker is
        # used; the contracts assert uuid and date-time with patterns instead.
        "format",
        "discriminator",
    }
)


def rules_beyond_types(bundle: JSONSchema) -> tuple[str, ...]:
    """JSON Pointers of the keywords in `bundle` that the generated models cannot enforce."""
    found: list[str] = []
    for pointer, node in walk(bundle):
        for key, value in node.items():
            if key == "const" and isinstance(value, bool):
                # The generator types a boolean constant as `bool`, which takes either value.
                found.append(f"{pointer}/{key}")
                continue
            if key in _ANNOTATIONS or key in _TYPED or key.startswith("x-"):
                continue  # `x-` keywords are the project's own annotations
            if key == "anyOf" and _is_nullable(value):
                continue
            if key == "oneOf" and "discriminator" in node:
                continue
            if key in ("minProperties", "maxProperties") and "properties" not in node:
                continue  # a map: its size is a msgspec length constraint
            if key == "propertyNames" and set(value) == {"$ref"}:
                continue  # a map with typed keys
            found.append(f"{pointer}/{key}")
    return tuple(found)


def _is_nullable(branches: list[JSONSchema]) -> bool:
    return len(branches) == 2 and {"type": "null"} in branches


def python_name(json_name: str) -> str:
    """The Python name of a JSON member: `retryPolicy` -> `retry_policy`, `$comment` -> `comment`.

    Python keywords get a trailing underscore: `async` -> `async_`. Unlike the
    runtime's `snake_case` (keys from prose: accents folded, bounded, possibly
    empty), the result is always a valid Python identifier.
    """
    core = re.sub(r"[^0-9A-Za-z]+", "_", json_name).strip("_")
    core = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", core).lower()
    if not core or core[0].isdigit():
        core = "field_" + core
    return core + "_" if keyword.iskeyword(core) else core


def generate_module(bundle: JSONSchema, family: str, header: str) -> str:
    """The source of the generated module for one family bundle."""
    source, metadata = _run_generator(bundle, family)
    tree = ast.parse(source)
    tree.body = [statement for statement in tree.body if not _is_placeholder_root(statement)]
    for statement in tree.body:
        if isinstance(statement, ast.ClassDef):
            schema = _schema_of(statement.name, metadata, bundle)
            _shape_struct(statement, schema)
            if _is_frozen(statement.name, schema):
                _freeze(statement)
    _check_frozen(tree)
    tree = _DescriptionsAsDocstringsOnly().visit(tree)
    return tidy(header + ast.unparse(tree) + "\n")


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
        raise SchemaTreeError(f"{family}: the model generator produced more than one module")
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
        raise SchemaTreeError(f"generated class {class_name} has no source schema")
    node: Any = bundle
    for token in metadata[class_name]:
        node = node[token]
    if not isinstance(node, dict):
        raise SchemaTreeError(f"generated class {class_name} comes from a non-schema")
    return node


def _shape_struct(cls: ast.ClassDef, schema: JSONSchema) -> None:
    if schema.get("additionalProperties") is not False:
        raise SchemaTreeError(
            f"{cls.name}: an object with named properties must say "
            '"additionalProperties": false, so that unknown keys are errors'
        )
    present = {kw.arg for kw in cls.keywords}
    for name in ("forbid_unknown_fields", "kw_only"):
        if name not in present:
            cls.keywords.append(ast.keyword(arg=name, value=ast.Constant(True)))
    properties: JSONSchema = schema.get("properties", {})
    python_names: set[str] = set()
    for statement in cls.body:
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        json_name = _json_name(statement)
        if json_name not in properties:
            raise SchemaTreeError(f"{cls.name}.{statement.target.id}: no such property")
        statement.target.id = python_name(json_name)
        if statement.target.id in python_names:
            raise SchemaTreeError(f"{cls.name}: two properties map to {statement.target.id}")
        python_names.add(statement.target.id)
        if statement.target.id != json_name:
            _set_field_keyword(statement, "name", ast.Constant(json_name))
        if "default" in properties[json_name]:
            _set_default(statement, properties[json_name]["default"], f"{cls.name}.{json_name}")
            statement.annotation = _without_unset(statement.annotation)


def _is_frozen(class_name: str, schema: JSONSchema) -> bool:
    frozen = schema.get("x-frozen", False)
    if not isinstance(frozen, bool):
        raise SchemaTreeError(f"{class_name}: `x-frozen` must be true or false, not {frozen!r}")
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
                        raise SchemaTreeError(f"{cls.name}: a frozen object has no map defaults")
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
                    raise SchemaTreeError(
                        f"{name}: a frozen object cannot hold a mutable {node.id}"
                    )
                if node.id in classes and node.id not in frozen:
                    raise SchemaTreeError(
                        f'{name}: a frozen object holds {node.id}, which is not: mark it "x-frozen"'
                    )
                if node.id in aliases:
                    pending.append(aliases[node.id])


def _keyword(cls: ast.ClassDef, name: str) -> bool:
    return any(
        kw.arg == name and isinstance(kw.value, ast.Constant) and kw.value.value is True
        for kw in cls.keywords
    )


def _json_name(statement: ast.AnnAssign) -> str:
    assert isinstance(statement.target, ast.Name)
    call = statement.value
    if isinstance(call, ast.Call):
        for kw in call.keywords:
            if kw.arg == "name" and isinstance(kw.value, ast.Constant):
                return str(kw.value.value)
    return statement.target.id


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
            raise SchemaTreeError(f"{where}: only empty lists and objects can be defaults")
        value: ast.expr = ast.Name("list" if isinstance(default, list) else "dict")
        arg = "default_factory"
    elif default is None or isinstance(default, str | int | float | bool):
        value, arg = ast.Constant(default), "default"
    else:
        raise SchemaTreeError(f"{where}: unsupported default {default!r}")
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


class _DescriptionsAsDocstringsOnly(ast.NodeTransformer):
    """Drops `description` and `title` from `Meta(...)`; the docstrings already carry them."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "Meta":
            node.keywords = [kw for kw in node.keywords if kw.arg not in ("description", "title")]
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
        raise SchemaTreeError(f"ruff {arguments[0]} failed on generated code: {done.stderr}")
    return done.stdout
