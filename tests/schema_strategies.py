"""Hypothesis strategies derived from a bundled contract schema.

`valid_documents(schema)` draws documents the schema accepts, for the subset
of JSON Schema the contracts use. Every drawn document is checked with the
`jsonschema` library by the tests that use it, so a mistake here shows up as
a failing test, never as a silent gap. `mutated(document)` draws one small
change to a document: a key dropped, added or misspelled, or a value
replaced by one of another type, an edge value or a hostile string.

hypothesis-jsonschema would derive the first strategy too, but on these
schemas it needs minutes per thousand documents; this needs seconds.
"""

from __future__ import annotations

import importlib
import json
import re
from functools import cache
from typing import Any

from hypothesis import strategies as st

from plancontracts.runtime.core.schema_text import display_pattern

JSON_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


def valid_documents(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Documents valid against `schema`, a bundled schema with local `$defs` only.

    The strategy of a schema is built once and kept: hypothesis checks a new
    strategy's whole tree before its first draw, which cost more than the
    drawing itself where a test asked again for each example.
    """
    return _strategy(json.dumps(schema))


@cache
def _strategy(schema: str) -> st.SearchStrategy[Any]:
    parsed = json.loads(schema)
    return _Builder(parsed.get("$defs", {})).build(parsed)


class _Builder:
    def __init__(self, definitions: dict[str, Any]) -> None:
        self.definitions = definitions
        self.named: dict[str, st.SearchStrategy[Any]] = {}

    def build(self, schema: dict[str, Any]) -> st.SearchStrategy[Any]:
        if "$ref" in schema:
            name = schema["$ref"].removeprefix("#/$defs/")
            if name not in self.named:
                self.named[name] = st.deferred(lambda: self.build(self.definitions[name]))
            return self.named[name]
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        if "anyOf" in schema:
            return st.one_of(*(self.build(branch) for branch in schema["anyOf"]))
        if "oneOf" in schema:
            return st.one_of(*(self.build(branch) for branch in schema["oneOf"]))
        kind = schema.get("type")
        if kind == "string":
            return self.string(schema)
        if kind == "integer":
            return st.integers(schema.get("minimum", -(2**53)), schema.get("maximum", 2**53))
        if kind == "number":
            low, high = schema.get("minimum"), schema.get("maximum")
            floats = st.floats(low, high, allow_nan=False, allow_infinity=False)
            return floats | st.integers(
                int(low) if low is not None else -(2**53), int(high) if high is not None else 2**53
            )
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        if kind == "array" and "prefixItems" in schema:
            prefix = [self.build(item) for item in schema["prefixItems"]]
            # Nothing may follow the prefix: `"items": false`, or a `maxItems` that says so.
            closed = schema.get("items") is False or schema.get("maxItems", -1) <= len(prefix)
            assert closed, "prefixItems followed by more items"
            high = min(schema.get("maxItems", len(prefix)), len(prefix))
            return st.integers(schema.get("minItems", 0), high).flatmap(
                lambda size: st.tuples(*prefix[:size]).map(list)
            )
        if kind == "array" and schema.get("maxItems") == 0:
            return st.just([])
        if kind == "array":
            low = schema.get("minItems", 0)
            high = min(schema.get("maxItems", low + 2), low + 2)
            items = self.build(schema.get("items", {}))
            if schema.get("uniqueItems"):
                # Items told apart as JSON compares them: by their canonical text.
                return st.lists(items, min_size=low, max_size=high, unique_by=_canonical)
            return st.lists(items, min_size=low, max_size=high)
        if kind == "object":
            return self.object(schema)
        raise NotImplementedError(f"no strategy for {schema}")

    def string(self, schema: dict[str, Any]) -> st.SearchStrategy[str]:
        low = schema.get("minLength", 0)
        high = schema.get("maxLength")
        if "pattern" in schema:
            texts = matching(display_pattern(schema["pattern"]))
        else:
            # Mostly short text; sometimes exactly as long as allowed, to test the bound
            # (one repeated character, which costs hypothesis almost no entropy).
            texts = st.text(
                min_size=low, max_size=low + 12 if high is None else min(high, low + 12)
            )
            if high is not None:
                texts = texts | st.characters(codec="utf-8").map(lambda ch: ch * high)
        return texts.filter(
            lambda text: low <= len(text) <= (high if high is not None else len(text))
        )

    def object(self, schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
        low = schema.get("minProperties", 0)
        high = schema.get("maxProperties")
        if "properties" in schema:
            required = set(schema.get("required", ()))
            properties = schema["properties"]
            strategy = st.fixed_dictionaries(
                {name: self.build(sub) for name, sub in properties.items() if name in required},
                optional={
                    name: self.build(sub)
                    for name, sub in properties.items()
                    if name not in required
                },
            )
            return strategy.filter(lambda d: low <= len(d) <= (high or len(d)))
        values = schema.get("additionalProperties", True)
        keys = (
            self.build(schema["propertyNames"])
            if "propertyNames" in schema
            else st.text(max_size=8)
        )
        size = min(high if high is not None else low + 2, low + 2)
        return st.dictionaries(
            keys, JSON_VALUES if values is True else self.build(values), min_size=low, max_size=size
        )


# Patterns ---------------------------------------------------------------------

# Python's own regular-expression parser; `re._parser` has no type stubs, and the
# public alias `sre_parse` warns that it is deprecated.
_PARSER: Any = importlib.import_module("re._parser")
# Repetitions a `*` or `+` adds at most beyond its minimum: of one character, as many
# as `st.text` above; of a group, fewer, as groups nest and their lengths multiply.
UNBOUNDED_CHARACTERS = 12
UNBOUNDED_GROUPS = 4
# What `\s` matches in a `str` pattern: the characters `str.isspace` accepts, none past U+3000.
WHITESPACE = "".join(ch for ch in map(chr, range(0x3001)) if ch.isspace())


@cache
def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def matching(pattern: str) -> st.SearchStrategy[str]:
    """Strings `pattern` (a Python regular expression) fully matches.

    `st.from_regex` draws a pattern's strings character by character and
    keeps each group's text to check back-references, which made it most of
    the agreement test's time; `read_directly` draws the patterns the
    contracts use much faster. A pattern it cannot read is left to
    `st.from_regex`; every drawn document is checked against its schema
    either way.
    """
    direct = read_directly(pattern)
    return st.from_regex(re.compile(pattern), fullmatch=True) if direct is None else direct


def read_directly(pattern: str) -> st.SearchStrategy[str] | None:
    """Strings `pattern` fully matches, drawn part by part; None for a pattern it cannot read.

    The pattern is read with Python's own parser. A run of one character
    class is one hypothesis string, drawn in one choice; groups, repeats and
    alternatives are drawn as such. It cannot read flags, back-references,
    anchors other than at both ends, or classes such as `\\w` and `\\d`.
    """
    parsed = _PARSER.parse(pattern)
    nodes = list(parsed)
    if nodes and str(nodes[0][0]) == "AT" and str(nodes[0][1]) == "AT_BEGINNING":
        nodes = nodes[1:]
    if nodes and str(nodes[-1][0]) == "AT" and str(nodes[-1][1]) == "AT_END":
        nodes = nodes[:-1]
    if parsed.state.flags != re.UNICODE:  # the default flags of a `str` pattern
        return None
    try:
        return _sequence(nodes)
    except _Unknown:
        return None


class _Unknown(Exception):
    """A part of a pattern that `matching` leaves to `st.from_regex`."""


def _sequence(nodes: list[Any]) -> st.SearchStrategy[str]:
    parts = [_node(op, argument) for op, argument in nodes]
    if len(parts) == 1:
        return parts[0]
    return st.tuples(*parts).map("".join)


def _node(op: Any, argument: Any) -> st.SearchStrategy[str]:
    name = str(op)
    if name in ("LITERAL", "NOT_LITERAL", "IN", "ANY"):
        return st.text(_alphabet(name, argument), min_size=1, max_size=1)
    if name in ("MAX_REPEAT", "MIN_REPEAT"):
        low, high, body = argument
        unbounded = high == _PARSER.MAXREPEAT
        if len(body) == 1 and str(body[0][0]) in ("LITERAL", "NOT_LITERAL", "IN", "ANY"):
            high = low + UNBOUNDED_CHARACTERS if unbounded else high
            return st.text(_alphabet(str(body[0][0]), body[0][1]), min_size=low, max_size=high)
        high = low + UNBOUNDED_GROUPS if unbounded else high
        return st.lists(_sequence(list(body)), min_size=low, max_size=high).map("".join)
    if name == "SUBPATTERN":
        _group, add_flags, del_flags, body = argument
        if add_flags or del_flags:
            raise _Unknown
        return _sequence(list(body))
    if name == "BRANCH":
        return st.one_of(*(_sequence(list(branch)) for branch in argument[1]))
    raise _Unknown


def _alphabet(name: str, argument: Any) -> st.SearchStrategy[str]:
    """The characters one class, literal or `.` matches, as a one-character strategy."""
    if name == "LITERAL":
        return st.sampled_from([chr(argument)])
    if name == "NOT_LITERAL":
        return st.characters(codec="utf-8", exclude_characters=chr(argument))
    if name == "ANY":  # `.` matches anything but a newline
        return st.characters(codec="utf-8", exclude_characters="\n")
    negated = bool(argument) and str(argument[0][0]) == "NEGATE"
    chars: list[str] = []
    for op, value in argument[1:] if negated else argument:
        kind = str(op)
        if kind == "LITERAL":
            chars.append(chr(value))
        elif kind == "RANGE":
            chars.extend(map(chr, range(value[0], value[1] + 1)))
        elif kind == "CATEGORY" and str(value) == "CATEGORY_SPACE":
            chars.extend(WHITESPACE)
        else:
            raise _Unknown
    if negated:
        return st.characters(codec="utf-8", exclude_characters="".join(chars))
    return st.characters(codec="utf-8", categories=(), include_characters="".join(chars))


# Mutations --------------------------------------------------------------------

EDGE_VALUES = st.one_of(
    JSON_SCALARS,
    st.sampled_from(
        [
            1.0,
            -0.0,
            2**64,
            -(2**64),
            "",
            " ",
            "S001\n",
            "dice-roller\n",
            "<script>alert(1)</script>",
            "\u202egnp.exe",
            "x" * 5000,
            [],
            {},
            [None],
        ]
    ),
)


def locations(document: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths to every value in `document`, the document itself first."""
    found = [path]
    if isinstance(document, dict):
        for key, value in document.items():
            found += locations(value, (*path, key))
    elif isinstance(document, list):
        for index, value in enumerate(document):
            found += locations(value, (*path, index))
    return found


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> Any:
    """`document` with one small change, which may or may not keep it valid."""
    path = draw(st.sampled_from(locations(document)))
    target = _copy(document)
    parent: Any = None
    node = target
    for step in path:
        parent, node = node, node[step]
    kind = draw(st.sampled_from(["replace", "integral", "drop", "add", "misspell", "newline"]))
    if kind == "integral" and isinstance(node, int) and not isinstance(node, bool):
        return _replace(target, parent, path, float(node))
    if kind == "newline" and isinstance(node, str):
        return _replace(target, parent, path, node + "\n")
    if isinstance(node, dict) and kind in ("drop", "misspell") and node:
        key = draw(st.sampled_from(sorted(node)))
        value = node.pop(key)
        if kind == "misspell":
            node[key[:-1] + ("e" if key.endswith("a") else "a") if key else "x"] = value
        return target
    if isinstance(node, dict) and kind == "add":
        node[draw(st.text(min_size=1, max_size=12))] = draw(EDGE_VALUES)
        return target
    if isinstance(node, list) and kind == "drop" and node:
        node.pop(draw(st.integers(0, len(node) - 1)))
        return target
    return _replace(target, parent, path, draw(EDGE_VALUES))


def _replace(root: Any, parent: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent[path[-1]] = value
    return root


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_copy(child) for child in value]
    return value
