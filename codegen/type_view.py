"""The type view of a schema: what the generated msgspec types hold of it, and what they do not.

The model generator (datamodel-code-generator, then msgspec) reads only a
part of JSON Schema right, and some of it wrongly: a `const` of a number
becomes `float`, which takes any number; `format: date-time` becomes
`datetime`, stricter than the schema, for which `format` is an annotation;
`prefixItems` or a union of two array types crash it or msgspec. So the
generator never reads a schema as written. `type_view` first rewrites it into
a *type view*: a schema in a small subset whose every keyword the generated
types enforce exactly, or loosened so that the types accept MORE than the
schema, never less. Removing an assertion keyword from a schema only ever
loosens it, and that is the tool: each keyword the view drops or loosens is
recorded by its JSON Pointer. Those pointers are the contract's schema-only
rules (`SCHEMA_ONLY_RULES` of a generated package): validation runs the
whole schema for a contract that has any, so its verdict is always the
schema's, and the types are never the stricter judge.

The subset, node by node:

- one `type`, or `[X, "null"]` and `anyOf: [X, {"type": "null"}]` as `X | None`;
- an object: `properties`, `required` (of names in `properties`; the others are
  dropped), `additionalProperties: false` (a struct that forbids unknown
  fields), absent or `true` (a struct that ignores them: msgspec drops them from
  the typed value); an object without properties is a map, whose
  `additionalProperties` schema, `minProperties`, `maxProperties` and
  `propertyNames` (a `$ref` to a string type) the types hold;
- an array: `items` (a schema), `minItems`, `maxItems`;
- a string: `minLength`, `maxLength` (msgspec counts code points, as JSON
  Schema does), a `pattern` that `re` reads as the schema's validator does
  (`reads_alike`, with `$` as the end of the text). The types carry it for
  plancontracts' own check, not as a msgspec constraint (as
  `extra_json_schema`: see `codegen.models`); it is no schema-only rule all
  the same, since plancontracts matches it on every conversion into the types;
- an integer: bounds (a fractional bound rounded to the integer it means),
  an integral `multipleOf`; a number: bounds within 2**52, where a float
  still tells every integer apart;
- `enum` and `const` of strings, as a `Literal`;
- a `$ref` beside annotations only, recursive or not;
- a `oneOf` tagged by a `discriminator`, each branch a `$ref` to an object that
  requires the tag and sets it with a string `const` (msgspec's tagged union).

Everything else is dropped from the view and recorded: `allOf`, `anyOf`,
`oneOf`, `not`, `if`, `then`, `else`, `dependent*`, `unevaluated*`,
`patternProperties`, `prefixItems`, `contains`, `uniqueItems`, `enum` and
`const` of anything but strings, a type union, `false`, and assertion keywords
with no `type` to hold them (`{"minimum": 1}` is typed as any value).
`format` is dropped unrecorded: draft 2020-12 makes it an annotation, and so
does validation. A `default` the types cannot hold (of another type, a
non-empty array or object) is left out of the types: it is an annotation too.
"""

from __future__ import annotations

import json
import math
import re
import warnings
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, TypeGuard

from plancontracts.runtime.core.patterns import python_pattern

JSONSchema = dict[str, Any]

# Kept in the view: the generator writes them as docstrings; `x-frozen` is the project's own.
_KEPT_ANNOTATIONS = ("title", "description", "x-frozen")
# Keywords that judge nothing: left out of the view, never recorded.
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$id",
        "$comment",
        "$defs",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        "definitions",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "format",
        "contentEncoding",
        "contentMediaType",
        "contentSchema",
        "discriminator",
    }
)
_NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_INT64 = 2**63 - 1
"msgspec holds an integer of any size, but only bounds, multiples and literals within int64."
_EXACT_FLOATS = 2**52
"A bound within this size compares with every integer as the integer does, once made a float."


@dataclass(frozen=True)
class TypeView:
    """A schema as the generated types hold it (`schema`), and what they do not (`beyond`)."""

    schema: JSONSchema
    beyond: tuple[str, ...]


def type_view(bundle: JSONSchema) -> TypeView:
    """The type view of `bundle`, a self-contained schema whose references are `#` or `#/$defs/X`.

    `beyond` lists, in schema order, the JSON Pointer (in `bundle`) of every
    keyword the view drops or loosens.
    """
    viewer = _Viewer(bundle)
    view = viewer.node(bundle, "")
    definitions = bundle.get("$defs")
    if isinstance(definitions, dict) and definitions:
        view["$defs"] = {
            name: viewer.node(sub, f"/$defs/{_token(name)}") for name, sub in definitions.items()
        }
    if "$schema" in bundle:
        view = {"$schema": bundle["$schema"], **view}
    return TypeView(view, tuple(viewer.beyond))


def _token(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


class _Viewer:
    def __init__(self, bundle: JSONSchema) -> None:
        self.bundle = bundle
        self.beyond: list[str] = []

    def drop(self, pointer: str, node: JSONSchema, keys: Any) -> None:
        """Record every assertion keyword of `keys` in `node` as beyond the types."""
        for key in keys:
            if key in node and key not in _ANNOTATIONS and not key.startswith("x-"):
                self.beyond.append(f"{pointer}/{_token(key)}")

    def node(self, schema: Any, pointer: str) -> JSONSchema:
        """The view of the subschema `schema`, found at `pointer`."""
        if schema is True or schema == {}:
            return {}
        if not isinstance(schema, dict):  # `false`, or no schema at all
            self.beyond.append(pointer)
            return {}
        kept = {key: schema[key] for key in _KEPT_ANNOTATIONS if key in schema}
        view = {**kept, **self._typed(schema, pointer)}
        if "default" in schema and self._default_fits(schema["default"], view):
            view["default"] = schema["default"]
        return view

    def _typed(self, schema: JSONSchema, pointer: str) -> JSONSchema:
        if "$ref" in schema:
            return self._reference(schema, pointer)
        nullable = _nullable_branch(schema.get("anyOf"))
        if "type" not in schema and nullable is not None:
            others = [key for key in schema if key != "anyOf"]
            self.drop(pointer, schema, others)
            inner = self.node(schema["anyOf"][nullable], f"{pointer}/anyOf/{nullable}")
            return _or_null(inner)
        if "type" not in schema and "oneOf" in schema and self._tagged_union(schema):
            self.drop(pointer, schema, [key for key in schema if key != "oneOf"])
            return {"oneOf": schema["oneOf"], "discriminator": schema["discriminator"]}
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = list(dict.fromkeys(kind))
            if len(kinds) == 2 and "null" in kinds:
                (other,) = (each for each in kinds if each != "null")
                return _or_null(self._of_type(other, schema, pointer, nullable=True))
            if len(kinds) == 1:
                return self._of_type(kinds[0], schema, pointer)
            self.drop(pointer, schema, schema)
            return {}
        if kind is None:
            return self._untyped(schema, pointer)
        return self._of_type(kind, schema, pointer)

    def _reference(self, schema: JSONSchema, pointer: str) -> JSONSchema:
        reference = schema["$ref"]
        siblings = [key for key in schema if key != "$ref"]
        asserting = [k for k in siblings if k not in _ANNOTATIONS and not k.startswith("x-")]
        if asserting or self.target(reference) is None:
            # A reference beside assertions is their conjunction, which no type writes.
            self.drop(pointer, schema, schema)
            return {}
        return {"$ref": reference}

    def target(self, reference: Any) -> Any:
        """The schema `reference` names in the bundle (`#` or `#/$defs/X`), or None."""
        if reference == "#":
            return self.bundle
        if not isinstance(reference, str) or not reference.startswith("#/$defs/"):
            return None
        name = reference.removeprefix("#/$defs/")
        if "/" in name:
            return None
        name = name.replace("~1", "/").replace("~0", "~")
        definitions = self.bundle.get("$defs")
        if not isinstance(definitions, dict):
            return None
        return definitions.get(name)

    def _tagged_union(self, schema: JSONSchema) -> bool:
        """Whether `schema` is a `oneOf` msgspec holds as a tagged union, exactly."""
        discriminator = schema.get("discriminator")
        if not isinstance(discriminator, dict) or set(discriminator) != {"propertyName"}:
            return False
        tag = discriminator["propertyName"]
        branches = schema["oneOf"]
        if not isinstance(branches, list) or not branches:
            return False
        tags: set[str] = set()
        for branch in branches:
            if not isinstance(branch, dict) or set(branch) != {"$ref"}:
                return False
            target = self.target(branch["$ref"])
            if not (
                isinstance(target, dict)
                and target.get("type") == "object"
                and tag in target.get("required", ())
                and isinstance(target.get("properties"), dict)
            ):
                return False
            value = target["properties"].get(tag)
            if not (isinstance(value, dict) and isinstance(value.get("const"), str)):
                return False
            if value["const"] in tags:  # two branches for one tag: oneOf would refuse both
                return False
            tags.add(value["const"])
        return True

    def _untyped(self, schema: JSONSchema, pointer: str) -> JSONSchema:
        """A node without `type`: a `Literal` of its strings, or any value."""
        values = _enumerated(schema)
        if values is not None and _literal(values):
            self.drop(pointer, schema, [key for key in schema if key not in ("enum", "const")])
            # Typed: the generator writes a Literal only beside a `type`, and `Any` without one.
            kind = "string" if isinstance(values[0], str) else "integer"
            return {
                "type": kind,
                **({"enum": values} if "enum" in schema else {"const": values[0]}),
            }
        kinds = {_json_type(value) for value in values or ()}
        if len(kinds) == 1 and (kind := kinds.pop()) in ("boolean", "null", "number"):
            # `{"const": true}`: a bool, which takes either value; the constant is the schema's.
            self.drop(pointer, schema, schema)
            return {"type": kind}
        # Keywords of objects, arrays, strings or numbers hold only for values of that
        # type, and the others pass: a struct, a list or a str would refuse them.
        self.drop(pointer, schema, schema)
        return {}

    def _of_type(
        self, kind: Any, schema: JSONSchema, pointer: str, *, nullable: bool = False
    ) -> JSONSchema:
        """The view of `schema` for values of the one type `kind`."""
        # Applicators only narrow what the rest of the node accepts: dropped, they loosen.
        view: JSONSchema = {"type": kind}
        rest = dict(schema)
        rest.pop("type")
        values = _enumerated(rest)
        rest.pop("enum", None)
        rest.pop("const", None)
        if kind == "string":
            strings = None if values is None else [v for v in values if isinstance(v, str)]
            if nullable and values is not None and None not in values:
                strings = None  # a Literal | None would take the null that the enum refuses
            if strings:
                # A string of the enum: its other string keywords are beyond the Literal.
                self.drop(pointer, schema, [k for k in rest if k in _STRING_KEYWORDS])
                for key in _STRING_KEYWORDS:
                    rest.pop(key, None)
                if "enum" in schema:
                    view["enum"] = strings
                else:
                    view["const"] = strings[0]
            elif values is not None:
                self.drop(pointer, schema, ("enum", "const"))
            view.update(self._string(rest, pointer))
        elif kind in ("integer", "number") and values is not None and _literal(values, str):
            view["enum" if "enum" in schema else "const"] = (
                values if "enum" in schema else values[0]
            )
            if nullable and None not in values:
                self.drop(pointer, schema, ("enum", "const"))  # X | None takes null too
            # The Literal is all the generator writes: the number's other keywords are beyond it.
            numeric = [key for key in rest if key in (*_NUMBER_BOUNDS, "multipleOf")]
            self.drop(pointer, schema, numeric)
            for key in numeric:
                rest.pop(key)
        elif values is not None:
            self.drop(pointer, schema, ("enum", "const"))
        if kind == "integer":
            view.update(self._integer(rest, pointer))
        elif kind == "number":
            view.update(self._number(rest, pointer))
        elif kind == "array":
            view.update(self._array(rest, pointer))
        elif kind == "object":
            view.update(self._object(rest, pointer))
        elif kind not in ("string", "boolean", "null"):
            self.drop(pointer, schema, schema)
            return {}
        self.drop(pointer, rest, rest)  # what no branch above took
        return view

    def _string(self, rest: JSONSchema, pointer: str) -> JSONSchema:
        view: JSONSchema = {}
        for key in ("minLength", "maxLength"):
            size = _count(rest.pop(key, None))
            if size is not None:
                view[key] = size
        if "pattern" in rest:
            pattern = rest["pattern"]
            if isinstance(pattern, str) and reads_alike(pattern, pattern in known_patterns()):
                rest.pop("pattern")
                view["pattern"] = _as_python_reads_it(pattern)
        return view

    def _integer(self, rest: JSONSchema, pointer: str) -> JSONSchema:
        view: JSONSchema = {}
        for key in _NUMBER_BOUNDS:
            bound = rest.get(key)
            # msgspec refuses an integer bound beyond 64 bits when it converts.
            if not _is_number(bound) or not abs(bound) < _INT64:
                continue
            rest.pop(key)
            # msgspec takes only integer bounds for an int: each bound as the integer it means.
            if key == "minimum":
                view["minimum"] = math.ceil(bound)
            elif key == "maximum":
                view["maximum"] = math.floor(bound)
            elif key == "exclusiveMinimum":
                if float(bound).is_integer():
                    view["exclusiveMinimum"] = int(bound)
                else:
                    view["minimum"] = max(math.ceil(bound), view.get("minimum", -math.inf))
            elif float(bound).is_integer():
                view["exclusiveMaximum"] = int(bound)
            else:
                view["maximum"] = min(math.floor(bound), view.get("maximum", math.inf))
        step = rest.get("multipleOf")
        if _is_number(step) and float(step).is_integer() and 0 < step < _INT64:
            rest.pop("multipleOf")
            view["multipleOf"] = int(step)
        return view

    def _number(self, rest: JSONSchema, pointer: str) -> JSONSchema:
        view: JSONSchema = {}
        for key in _NUMBER_BOUNDS:
            bound = rest.get(key)
            if _is_number(bound) and abs(bound) <= _EXACT_FLOATS:
                view[key] = rest.pop(key)
        return view  # `multipleOf` stays in `rest`: a float's remainder is not the schema's

    def _array(self, rest: JSONSchema, pointer: str) -> JSONSchema:
        view: JSONSchema = {}
        if "prefixItems" not in rest and "items" in rest:
            items = rest["items"]
            if items is True or isinstance(items, dict):
                rest.pop("items")
                view["items"] = self.node(items, f"{pointer}/items")
        for key in ("minItems", "maxItems"):
            size = _count(rest.get(key))
            if size is not None:
                rest.pop(key)
                view[key] = size
        if rest.get("uniqueItems") is False:
            rest.pop("uniqueItems")
        # `prefixItems` and the `items` after it, `contains`, `unevaluatedItems`: left in `rest`.
        return view

    def _object(self, rest: JSONSchema, pointer: str) -> JSONSchema:
        view: JSONSchema = {}
        properties = rest.get("properties")
        if isinstance(properties, dict) and not properties:
            rest.pop("properties")
            properties = None
        patterned = bool(rest.get("patternProperties"))
        if not patterned:
            rest.pop("patternProperties", None)
        extra = rest.get("additionalProperties", True)
        if extra == {}:
            extra = True
        if isinstance(properties, dict):
            rest.pop("properties")
            view["properties"] = {
                name: self.node(sub, f"{pointer}/properties/{_token(name)}")
                for name, sub in properties.items()
            }
            required = rest.get("required")
            if isinstance(required, list):
                known = [name for name in required if name in properties]
                if len(known) == len(required):
                    rest.pop("required")
                if known:
                    view["required"] = list(dict.fromkeys(known))
            # A struct takes named fields only: it forbids the others, or ignores them.
            if extra is True or (extra is False and not patterned):
                rest.pop("additionalProperties", None)
                if extra is False:
                    view["additionalProperties"] = False
            return view
        if rest.get("required") == []:
            rest.pop("required")
        if extra is False and not patterned and not any(key in rest for key in _MAP_KEYWORDS):
            rest.pop("additionalProperties")
            return {"additionalProperties": False}  # no field at all: a closed, empty struct
        if not patterned and (extra is True or isinstance(extra, dict)):
            rest.pop("additionalProperties", None)
            if extra is not True and extra != {}:
                view["additionalProperties"] = self.node(extra, f"{pointer}/additionalProperties")
            for key in ("minProperties", "maxProperties"):
                size = _count(rest.get(key))
                if size is not None:
                    rest.pop(key)
                    view[key] = size
            names = rest.get("propertyNames")
            if isinstance(names, dict) and set(names) == {"$ref"}:
                target = self.target(names["$ref"])
                if isinstance(target, dict) and target.get("type") == "string":
                    rest.pop("propertyNames")
                    view["propertyNames"] = names
        return view

    def _default_fits(self, default: Any, view: JSONSchema) -> bool:
        """Whether the types can hold `default` as the value of a missing field of `view`."""
        if "anyOf" in view:  # X | None
            return default is None or self._default_fits(default, view["anyOf"][0])
        if "$ref" in view:
            target = self.target(view["$ref"])
            # A definition's own view is not at hand: only what any type of it would take.
            return isinstance(target, dict) and _fits_type(default, target)
        return _fits_type(default, view)


_STRING_KEYWORDS = ("minLength", "maxLength", "pattern")
_MAP_KEYWORDS = ("required", "minProperties", "maxProperties", "propertyNames")


def _fits_type(default: Any, view: JSONSchema) -> bool:
    values = _enumerated(view)
    if values is not None:
        return isinstance(default, str) and default in values
    kind = view.get("type")
    if not isinstance(kind, str):
        return False
    if kind == "array":
        return default == [] and "minItems" not in view
    if kind == "object":
        return default == {} and "properties" not in view and "minProperties" not in view
    return {
        "string": isinstance(default, str),
        "integer": isinstance(default, int) and not isinstance(default, bool),
        "number": _is_number(default),
        "boolean": isinstance(default, bool),
        "null": default is None,
    }.get(kind, False)


def _literal(values: list[Any], without: type | None = None) -> bool:
    """Whether msgspec's `Literal` of `values` takes exactly them: strings, or int64 integers.

    A Literal of integers refuses `2.0`, which validation then takes as `2`.
    `without` is a type of value not allowed.
    """
    if not values:
        return False
    if all(isinstance(value, str) for value in values):
        return without is not str
    return all(
        isinstance(value, int) and not isinstance(value, bool) and abs(value) < _INT64
        for value in values
    )


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "other"


def _enumerated(schema: JSONSchema) -> list[Any] | None:
    """The values `enum` or `const` allow (both: those of both), or None if neither is there."""
    values: list[Any] | None = None
    if isinstance(schema.get("enum"), list):
        values = list(schema["enum"])
    if "const" in schema:
        const = schema["const"]
        values = [const] if values is None else [v for v in values if _same(v, const)]
    return values


def _same(one: Any, two: Any) -> bool:
    return type(one) is type(two) and one == two


def _is_number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(value: Any) -> int | None:
    """A length keyword's value as an int (`2.0` is 2), or None when it is not one."""
    if _is_number(value) and float(value).is_integer() and value >= 0:
        return int(value)
    return None


def _nullable_branch(branches: Any) -> int | None:
    """The index of the branch that is not `{"type": "null"}`, in an `anyOf` of two; or None."""
    if not isinstance(branches, list) or len(branches) != 2 or {"type": "null"} not in branches:
        return None
    index = 1 - branches.index({"type": "null"})
    return index if branches[index] != {"type": "null"} else None


def _is_any(view: JSONSchema) -> bool:
    return all(key in _KEPT_ANNOTATIONS for key in view)


def _or_null(inner: JSONSchema) -> JSONSchema:
    if _is_any(inner):
        return inner  # any value takes null already
    return {"anyOf": [inner, {"type": "null"}]}


# Patterns -----------------------------------------------------------------------

_SIMPLE_ESCAPES = frozenset("\\^$.*+?()[]{}|/-tnrfv")
_GROUPS = ("(?:", "(?=", "(?!", "(?<=", "(?<!")
_HEX = re.compile(r"u[0-9A-Fa-f]{4}|x[0-9A-Fa-f]{2}")


def reads_alike(pattern: str, trusted: bool = False) -> bool:
    """Whether Python's `re` (`$` written `\\Z`) reads `pattern` as validation does.

    Conservative: escapes of punctuation, `\\t \\n \\r \\f \\v`, `\\uXXXX` and
    `\\xXX` only (not the classes `\\d \\w \\s \\b`, which ECMA-262 reads as
    ASCII and Python as Unicode), groups `(?:`, lookarounds, no flags, no
    named groups, no `{,n}`, no empty class (`[]`, `[^]`), and nothing `re`
    refuses or warns about. Unless `trusted`, no repeated group (`(a|a)*`),
    which `re` may take days to match (the types' check has no time limit),
    and at most one repeat without an upper bound (`*`, `+`, `{n,}`), in a
    pattern that begins with `^`: `^a*a*a*b$` backtracks polynomially, and an unanchored
    `[a-z]+@` is tried at every place of the text (time quadratic in it).
    """
    index = 0
    in_class = False
    unbounded = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            following = pattern[index + 1 : index + 2]
            if following in _SIMPLE_ESCAPES and following:
                index += 2
                continue
            escape = _HEX.match(pattern, index + 1)
            if escape is None:
                return False
            index = escape.end()
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            if pattern.startswith(("[]", "[^]"), index):  # ECMA-262: no character, any one
                return False
            in_class = True
        elif _reads_otherwise(pattern, index, trusted):
            return False
        elif char in "*+" or _OPEN_REPEAT.match(pattern, index):
            unbounded += 1
        index += 1
    if not trusted and unbounded and (unbounded > 1 or not pattern.startswith("^")):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a nested set `[[`, read otherwise by ECMA-262
        try:
            re.compile(python_pattern(pattern))
        except (re.error, FutureWarning, DeprecationWarning, RecursionError, OverflowError):
            return False
    return True


def _reads_otherwise(pattern: str, index: int, trusted: bool) -> bool:
    """Whether what starts at `index`, outside a class, may read otherwise or backtrack long."""
    if pattern.startswith("(?", index):
        return not pattern.startswith(_GROUPS, index)  # flags, named groups, comments
    if pattern.startswith("{,", index):
        return True  # ECMA-262: the text `{,`; Python: a repeat from 0
    repeated = pattern.startswith(")", index) and pattern[index + 1 : index + 2] in ("*", "+", "{")
    return repeated and not trusted


_OPEN_REPEAT = re.compile(r"\{[0-9]+,\}")
"A repeat with no upper bound, `{2,}`."


@cache
def known_patterns() -> frozenset[str]:
    """The patterns of plancontracts' own schemas, known not to backtrack for long.

    tests/test_patterns.py matches each; the types' check matches them with
    `re`, which has no time limit. Known by value, so that a copy of the
    schemas generates as they do.
    """
    found: set[str] = set()
    for path in sorted(_PROJECT_SCHEMAS.rglob("*.json")):
        pending = [json.loads(path.read_text(encoding="utf-8"))]
        while pending:
            node = pending.pop()
            if isinstance(node, dict):
                if isinstance(node.get("pattern"), str):
                    found.add(node["pattern"])
                pending += node.values()
            elif isinstance(node, list):
                pending += node
    return frozenset(found)


_PROJECT_SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def _as_python_reads_it(pattern: str) -> str:
    """`pattern` with `$` as the end of the text for `re`, written as the project writes it.

    The project's own patterns say `$(?!\\n)`, which is already so; any other
    `$` that ends the text becomes `\\Z` (`python_pattern`).
    """
    translated = python_pattern(pattern)
    if translated.count("\\Z") == translated.count("\\Z(?!\\n)"):
        return pattern
    return translated
