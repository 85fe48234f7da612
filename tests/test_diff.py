"""`plancontracts diff`: every change of a contract, judged for readers and writers.

Pairs of schemas with the verdict written by hand, one per kind of change; a
property test that holds every `compatible` against documents drawn from the
schemas; the command in process, against git revisions, and the project's own
contracts against the revision that first gave them versions.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from commands import cli
from hypothesis import HealthCheck, assume, find, given, settings
from hypothesis import strategies as st
from tiers import examples_at_most

from plancontracts.runtime.core.diff import (
    BREAKING,
    COMPATIBLE,
    UNKNOWN,
    diff,
    diff_bundles,
    schemas_at,
)
from plancontracts.runtime.core.errors import UnusableSchema

ROOT = Path(__file__).resolve().parent.parent
C, B, U = COMPATIBLE, BREAKING, UNKNOWN
WIDER, NARROWER = (C, B), (B, C)

RECIPE: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 40},
        "servings": {"type": "integer", "minimum": 1},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "diet": {"enum": ["vegan", "vegetarian", "any"], "default": "any"},
    },
}


def edited(change: Any) -> dict[str, Any]:
    """RECIPE after `change(schema)`, which edits a copy in place."""
    schema = copy.deepcopy(RECIPE)
    change(schema)
    return schema


def verdicts(old: Any, new: Any) -> set[tuple[str, str, str, str]]:
    """(pointer, change, readers, writers) of each change from `old` to `new`."""
    return {
        (change.pointer, change.change, change.readers, change.writers)
        for change in diff_bundles({"recipe": old}, {"recipe": new})
    }


P = "/properties"
# Each pair's verdicts, written by hand from what documents each side accepts.
PAIRS: list[tuple[str, Any, set[tuple[str, str, str, str]]]] = [
    (
        "optional field added to a closed object",
        lambda s: s[P[1:]].update(note={"type": "string"}),
        {(f"{P}/note", "field-added", *WIDER)},
    ),
    (
        "required field added",
        lambda s: (s[P[1:]].update(note={"type": "string"}), s["required"].append("note")),
        {(f"{P}/note", "field-added", B, B)},
    ),
    (
        "field removed from a closed object",
        lambda s: s[P[1:]].pop("servings"),
        {(f"{P}/servings", "field-removed", *NARROWER)},
    ),
    (
        "required field removed",
        lambda s: (s[P[1:]].pop("name"), s.update(required=[])),
        {(f"{P}/name", "field-removed", B, B)},
    ),
    (
        "field renamed",
        lambda s: s[P[1:]].update(portions=s[P[1:]].pop("servings")),
        {(f"{P}/portions", "field-renamed", B, B)},
    ),
    (
        "field made required",
        lambda s: s["required"].append("servings"),
        {("/required", "field-required", *NARROWER)},
    ),
    (
        "field made optional",
        lambda s: s.update(required=[]),
        {("/required", "field-optional", *WIDER)},
    ),
    (
        "type widened",
        lambda s: s[P[1:]]["servings"].update(type="number"),
        {(f"{P}/servings/type", "type-widened", *WIDER)},
    ),
    (
        "type narrowed",
        lambda s: s[P[1:]]["tags"]["items"].update(enum=["a", "b"]),
        {(f"{P}/tags/items/enum", "enum-added", *NARROWER)},
    ),
    (
        "type changed",
        lambda s: s[P[1:]]["servings"].update(type="string"),
        {(f"{P}/servings/type", "type-changed", B, B)},
    ),
    (
        "null allowed",
        lambda s: s[P[1:]]["name"].update(type=["string", "null"]),
        {(f"{P}/name/type", "type-widened", *WIDER)},
    ),
    (
        "enum value added",
        lambda s: s[P[1:]]["diet"]["enum"].append("keto"),
        {(f"{P}/diet/enum", "enum-value-added", *WIDER)},
    ),
    (
        "enum value removed",
        lambda s: s[P[1:]]["diet"]["enum"].remove("vegetarian"),
        {(f"{P}/diet/enum", "enum-value-removed", *NARROWER)},
    ),
    (
        "length tightened",
        lambda s: s[P[1:]]["name"].update(maxLength=20),
        {(f"{P}/name/maxLength", "bound-tightened", *NARROWER)},
    ),
    (
        "length loosened",
        lambda s: s[P[1:]]["name"].update(minLength=0),
        {(f"{P}/name/minLength", "bound-loosened", *WIDER)},
    ),
    (
        "items tightened",
        lambda s: s[P[1:]]["tags"].update(maxItems=3),
        {(f"{P}/tags/maxItems", "bound-tightened", *NARROWER)},
    ),
    (
        "minimum loosened",
        lambda s: s[P[1:]]["servings"].pop("minimum"),
        {(f"{P}/servings/minimum", "bound-loosened", *WIDER)},
    ),
    (
        "pattern added",
        lambda s: s[P[1:]]["name"].update(pattern="^[A-Z]"),
        {(f"{P}/name/pattern", "pattern-added", *NARROWER)},
    ),
    (
        "additionalProperties opened",
        lambda s: s.update(additionalProperties=True),
        {("/additionalProperties", "additional-properties-opened", *WIDER)},
    ),
    (
        "default changed",
        lambda s: s[P[1:]]["diet"].update(default="vegan"),
        {(f"{P}/diet/default", "default-changed", B, B)},
    ),
    (
        "only a description changed",
        lambda s: s[P[1:]]["name"].update(description="The recipe's name."),
        set(),
    ),
    (
        "if/then/else added",
        lambda s: s.update({"if": {"required": ["tags"]}, "then": {"required": ["servings"]}}),
        {("/if", "keyword-changed", U, U)},
    ),
]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [(RECIPE, edited(change), expected) for _, change, expected in PAIRS],
    ids=[name for name, _, _ in PAIRS],
)
def test_each_kind_of_change_is_judged_for_readers_and_writers(
    old: Any, new: Any, expected: set[tuple[str, str, str, str]]
) -> None:
    assert verdicts(old, new) == expected


def test_a_field_added_to_an_open_object_may_break_old_documents_holding_that_name() -> None:
    old = {"type": "object", "properties": {"a": {"type": "string"}}}
    new = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}
    assert verdicts(old, new) == {(f"{P}/b", "field-added", *NARROWER)}
    # Compared with the schema `additionalProperties` gave it, where it gives one.
    typed = {**old, "additionalProperties": {"type": "integer"}}
    assert verdicts(typed, {**new, "additionalProperties": {"type": "integer"}}) == {
        (f"{P}/b", "field-added", C, C)
    }


def test_additional_properties_closed_breaks_readers() -> None:
    old = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert verdicts(old, {**old, "additionalProperties": False}) == {
        ("/additionalProperties", "additional-properties-closed", *NARROWER)
    }


def test_two_patterns_are_unknown_not_guessed() -> None:
    old = {"type": "string", "pattern": "^[a-z]+$"}
    assert verdicts(old, {"type": "string", "pattern": "^[a-z0-9]+$"}) == {
        ("/pattern", "pattern-changed", U, U)
    }


def test_a_reference_to_another_definition_is_judged_by_what_it_names() -> None:
    old: dict[str, Any] = {
        "$defs": {"name": {"type": "string"}, "label": {"type": ["string", "null"]}},
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/name"}},
    }
    new = copy.deepcopy(old)
    new["properties"]["a"]["$ref"] = "#/$defs/label"
    assert verdicts(old, new) == {
        ("/properties/a/$ref", "ref-target-changed", *WIDER),
        ("/$defs/label/type", "type-widened", *WIDER),
    }
    same = copy.deepcopy(old)
    same["$defs"]["copy"] = {"type": "string"}
    same["properties"]["a"]["$ref"] = "#/$defs/copy"
    assert verdicts(old, same) == {("/properties/a/$ref", "ref-target-changed", C, C)}


@pytest.mark.parametrize(
    ("where", "pointer"),
    [
        ({"properties": {"a": {"$ref": "#/$defs/d"}}}, "/$defs/d/maximum"),
        ({"items": {"$ref": "#/$defs/d"}}, "/$defs/d/maximum"),
        ({"anyOf": [{"$ref": "#/$defs/d"}, {"type": "string"}]}, "/$defs/d/maximum"),
        ({"additionalProperties": {"$ref": "#/$defs/d"}}, "/$defs/d/maximum"),
        ({"if": {"$ref": "#/$defs/d"}, "then": {"type": "integer"}}, "/if"),
    ],
)
def test_a_definition_changed_is_found_through_every_reference(
    where: dict[str, Any], pointer: str
) -> None:
    """Equal text that refers to a definition may still differ: by the definition."""
    old = {"$defs": {"d": {"type": "integer", "maximum": 3}}, **where}
    new = {"$defs": {"d": {"type": "integer"}}, **where}
    assert {change[0] for change in verdicts(old, new)} == {pointer}


def test_a_recursive_definition_is_compared_once() -> None:
    node: dict[str, Any] = {
        "type": "object",
        "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
    }
    old: dict[str, Any] = {"$defs": {"node": node}, "$ref": "#/$defs/node"}
    new = copy.deepcopy(old)
    new["$defs"]["node"]["properties"]["children"]["maxItems"] = 3
    assert verdicts(old, new) == {
        ("/$defs/node/properties/children/maxItems", "bound-tightened", *NARROWER)
    }


def test_a_branch_of_one_of_that_widens_is_unknown_for_readers() -> None:
    old = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    new = {"oneOf": [{"type": "string"}, {"type": "number"}]}
    # An old integer now takes the second branch only; but a wider branch may overlap another.
    assert verdicts(old, new) == {("/oneOf/1/type", "type-widened", U, B)}


def test_branches_told_apart_by_a_tag_are_compared_as_any_of() -> None:
    def tagged(kind: str, extra: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["kind"],
            "properties": {"kind": {"const": kind}, **extra},
        }

    old = {"oneOf": [tagged("a", {"n": {"type": "integer"}}), tagged("b", {})]}
    new = {"oneOf": [tagged("a", {"n": {"type": "number"}}), tagged("b", {})]}
    assert verdicts(old, new) == {("/oneOf/0/properties/n/type", "type-widened", *WIDER)}
    added = {"oneOf": [*old["oneOf"], tagged("c", {})]}
    assert verdicts(old, added) == {("/oneOf/2", "branch-added", *WIDER)}


def test_one_of_added_with_a_branch_taking_everything_still_refuses() -> None:
    # A value both branches take matches two: `oneOf` refuses it.
    old = {"type": ["string", "null"]}
    moved = ("/type", "type-widened", *WIDER)  # the type went into the branches
    assert verdicts(old, {"oneOf": [old, {}]}) == {moved, ("/oneOf", "constraint-added", B, C)}
    assert verdicts(old, {"anyOf": [old, {}]}) == {moved, ("/anyOf", "constraint-added", C, C)}


def test_inside_not_the_sides_trade_places() -> None:
    old = {"not": {"type": "string", "maxLength": 3}}
    new = {"not": {"type": "string", "maxLength": 5}}
    assert verdicts(old, new) == {("/not/maxLength", "bound-loosened", *NARROWER)}


def test_a_keyword_the_check_does_not_read_is_unknown() -> None:
    old = {"type": "object", "unevaluatedProperties": False, "properties": {"a": {}}}
    new = {**old, "properties": {"a": {}, "b": {}}}
    assert verdicts(old, new) == {("", "keyword-changed", U, U)}
    assert verdicts({"x-note": 1, "type": "string"}, {"x-note": 2, "type": "string"}) == set()


def test_contracts_added_and_removed() -> None:
    changes = diff_bundles({"a": {}, "b": {}}, {"b": {}, "c": {}})
    assert [(c.contract, c.change, c.readers, c.writers) for c in changes] == [
        ("a", "contract-removed", B, C),
        ("c", "contract-added", C, C),
    ]


# --- every `compatible` holds for documents drawn from the schemas ---------------------------

NAMES = ("a", "b", "c", "d")
LEAVES: list[dict[str, Any]] = [
    {"type": "string"},
    {"type": "string", "maxLength": 3},
    {"type": "string", "minLength": 2},
    {"type": "string", "pattern": "^x"},
    {"type": ["string", "null"]},
    {"type": "integer"},
    {"type": "integer", "minimum": 0, "maximum": 5},
    {"type": "number"},
    {"type": "boolean"},
    {"enum": ["p", "q"]},
    {"enum": ["p", "q", "r"]},
    {"const": "p"},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 2},
    {"type": "array", "items": {"type": "string"}},
    {"anyOf": [{"type": "string"}, {"type": "integer"}]},
    {"$ref": "#/$defs/small"},
    {"$ref": "#/$defs/word"},
    {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
    {"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}},
    {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": False},
    {},
]
DEFINITIONS = {"small": {"type": "integer", "maximum": 3}, "word": {"type": "string"}}


@st.composite
def objects(draw: st.DrawFn) -> dict[str, Any]:
    """An object schema of a few fields, each a leaf, closed, open or typed."""
    names = draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=4))
    properties = {name: draw(st.sampled_from(LEAVES)) for name in names}
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    if required:
        schema["required"] = required
    rest = draw(st.sampled_from([None, False, True, {"type": "string"}]))
    if rest is not None:
        schema["additionalProperties"] = rest
    if draw(st.booleans()):
        schema["maxProperties"] = draw(st.integers(1, 4))
    return {"$defs": DEFINITIONS, **schema}


@st.composite
def edits(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` after one to three small edits of the kinds `diff` tells apart."""
    new = copy.deepcopy(schema)
    for _ in range(draw(st.integers(1, 3))):
        properties = new["properties"]
        kind = draw(
            st.sampled_from(
                [
                    "add",
                    "remove",
                    "replace",
                    "require",
                    "unrequire",
                    "rest",
                    "bound",
                    "rename",
                    "enum",
                    "definition",
                    "keyword",
                    "keyword",
                    "wrap",
                ]
            )
        )
        free = [name for name in NAMES if name not in properties]
        if kind == "add" and free:
            properties[draw(st.sampled_from(free))] = draw(st.sampled_from(LEAVES))
        elif kind == "remove" and properties:
            name = draw(st.sampled_from(sorted(properties)))
            del properties[name]
            if name in new.get("required", []):
                new["required"].remove(name)
        elif kind == "replace" and properties:
            properties[draw(st.sampled_from(sorted(properties)))] = draw(st.sampled_from(LEAVES))
        elif kind == "require" and properties:
            name = draw(st.sampled_from(sorted(properties)))
            new["required"] = sorted({*new.get("required", []), name})
        elif kind == "unrequire" and new.get("required"):
            new["required"].remove(draw(st.sampled_from(new["required"])))
        elif kind == "rest":
            new["additionalProperties"] = draw(st.sampled_from([False, True, {"type": "string"}]))
        elif kind == "bound":
            new["maxProperties"] = draw(st.integers(0, 4))
        elif kind == "rename" and properties and free:
            name = draw(st.sampled_from(sorted(properties)))
            properties[draw(st.sampled_from(free))] = properties.pop(name)
        elif kind == "enum" and properties:
            name = draw(st.sampled_from(sorted(properties)))
            properties[name] = {
                "enum": draw(st.lists(st.sampled_from(["p", "q", "r"]), unique=True, min_size=1))
            }
        elif kind == "definition":
            new["$defs"] = {**new["$defs"], "small": draw(st.sampled_from(LEAVES[5:8]))}
        elif kind == "keyword" and properties:
            name = draw(st.sampled_from(sorted(properties)))
            keyword, values = draw(st.sampled_from(KEYWORDS))
            edited = dict(properties[name])
            if keyword in edited and draw(st.booleans()):
                del edited[keyword]
            else:
                edited[keyword] = draw(values)
            properties[name] = edited
        elif kind == "wrap" and properties:
            name = draw(st.sampled_from(sorted(properties)))
            combinator = draw(st.sampled_from(["anyOf", "oneOf", "allOf", "not"]))
            other = draw(st.sampled_from(LEAVES))
            was = properties[name]
            if isinstance(was, dict) and set(was) <= {"anyOf", "oneOf", "allOf"} and was:
                (branches,) = was.values()
                properties[name] = branches[0]  # unwrapped
            elif combinator == "not":
                properties[name] = {**was, "not": other}
            else:
                properties[name] = {combinator: [was, other]}
    return new


# Keywords one edit sets or removes on a field's schema, with the values it draws.
KEYWORDS: list[tuple[str, st.SearchStrategy[Any]]] = [
    ("maxLength", st.integers(0, 4)),
    ("minLength", st.integers(0, 3)),
    ("minimum", st.integers(-1, 4)),
    ("maximum", st.integers(0, 6)),
    ("exclusiveMaximum", st.integers(0, 6)),
    ("multipleOf", st.sampled_from([1, 2, 4, 0.5])),
    ("pattern", st.sampled_from(["^x", "^y", "z"])),
    (
        "type",
        st.sampled_from(["string", "integer", "number", ["string", "null"], ["integer", "string"]]),
    ),
    ("maxItems", st.integers(0, 3)),
    ("uniqueItems", st.booleans()),
    ("const", st.sampled_from(["p", 1, None])),
    ("default", st.sampled_from(["p", 1])),
]


def values_of(schema: Any, definitions: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values mostly valid under `schema` (the test keeps only those jsonschema accepts)."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 8),
        st.floats(-3, 8, allow_nan=False),
        st.sampled_from(["", "p", "q", "r", "x", "xyz", "abcd"]),
    )
    if schema is True or schema == {}:
        return scalars | st.lists(scalars, max_size=2)
    if "$ref" in schema:
        return values_of(definitions[schema["$ref"].removeprefix("#/$defs/")], definitions)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in schema:
            branches = schema[combinator]
            return st.one_of(*(values_of(branch, definitions) for branch in branches))
    kind = schema.get("type")
    if kind == "object":
        properties = schema.get("properties", {})
        fields = st.fixed_dictionaries(
            {}, optional={name: values_of(sub, definitions) for name, sub in properties.items()}
        )
        rest = schema.get("additionalProperties", True)
        if rest is False:
            return fields
        extra = st.dictionaries(
            st.sampled_from((*NAMES, "e")), values_of(rest, definitions), max_size=2
        )
        return st.tuples(extra, fields).map(lambda both: {**both[0], **both[1]})
    if kind == "array":
        rest = schema.get("items", True)
        items = st.lists(values_of(True if rest is False else rest, definitions), max_size=2)
        prefix = [values_of(item, definitions) for item in schema.get("prefixItems", [])]
        return st.tuples(st.tuples(*prefix), items).map(lambda both: [*both[0], *both[1]])
    return scalars


def _valid(schema: dict[str, Any], document: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(document)


@settings(
    max_examples=examples_at_most(500),
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
@given(st.data())
def test_what_diff_calls_compatible_holds_for_every_document(data: st.DataObject) -> None:
    old = data.draw(objects())
    new = data.draw(edits(old))
    changes = diff_bundles({"c": old}, {"c": new})
    readers = all(change.readers == COMPATIBLE for change in changes)
    writers = all(change.writers == COMPATIBLE for change in changes)
    assume(readers or writers)
    for _ in range(5):
        if readers:
            document = data.draw(values_of(old, DEFINITIONS))
            if _valid(old, document):
                assert _valid(new, document), (changes, document)
        if writers:
            document = data.draw(values_of(new, DEFINITIONS))
            if _valid(new, document):
                assert _valid(old, document), (changes, document)


def test_the_property_test_finds_a_wrong_verdict() -> None:
    """The documents drawn do reach what a wrong `compatible` would let through."""
    old = {"$defs": DEFINITIONS, "type": "object", "properties": {"a": {"type": "integer"}}}
    new = {**old, "properties": {"a": {"type": "integer", "maximum": 5}}}
    # A search with a budget of its own, not a property: it must find one in any tier.
    found = find(
        values_of(old, DEFINITIONS),
        lambda document: _valid(old, document) and not _valid(new, document),
        settings=settings(max_examples=2_000, database=None),
    )
    assert found["a"] > 5


# --- the command ---------------------------------------------------------------------------


def write(path: Path, schema: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(schema), encoding="utf-8")
    return path


def test_two_files_print_a_line_per_change_and_exit_1_when_one_breaks(tmp_path: Path) -> None:
    old = write(tmp_path / "recipe.json", RECIPE)
    new = write(tmp_path / "recipe-2.json", edited(lambda s: s["required"].append("servings")))
    done = cli("diff", str(old), str(new))
    assert (done.returncode, done.stdout) == (
        1,
        "recipe-2 #/required: field required: readers breaking, writers compatible: "
        "'servings' is now required: old documents may leave it out\n",
    )
    assert done.stderr == "plancontracts: 1 change: 1 breaking for readers\n"


def test_compatible_changes_exit_0(tmp_path: Path) -> None:
    old = write(tmp_path / "old.json", RECIPE)
    new = write(tmp_path / "new.json", edited(lambda s: s.update(title="Recipe")))
    done = cli("diff", str(old), str(new))
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "",
        "plancontracts: no change to any contract\n",
    )


def test_json_lines_carry_every_field(tmp_path: Path) -> None:
    old = write(tmp_path / "old" / "food" / "recipe.json", RECIPE)
    write(
        tmp_path / "new" / "food" / "recipe.json",
        edited(lambda s: s[P[1:]]["diet"]["enum"].append("keto")),
    )
    write(tmp_path / "new" / "food" / "menu.json", {"type": "array"})
    done = cli("diff", "--json", str(old.parent.parent), str(tmp_path / "new"))
    assert done.returncode == 1
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        {
            "contract": "menu",
            "pointer": "",
            "change": "contract-added",
            "readers": "compatible",
            "writers": "compatible",
            "why": "no document was stored under it",
        },
        {
            "contract": "recipe",
            "pointer": "/properties/diet/enum",
            "change": "enum-value-added",
            "readers": "compatible",
            "writers": "breaking",
            "why": '"keto" allowed: old code refuses it',
        },
    ]


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ((), "give OLD and NEW (or --against REV), not 0 paths"),
        (("one.json",), "give OLD and NEW (or --against REV), not 1 paths"),
        (("nowhere.json", "one.json"), "nowhere.json: no such file or folder"),
        (("one.json", "folder"), "OLD and NEW are two files or two folders, not one of each"),
        (("one.json", "broken.json"), "broken.json#/type: not a valid JSON Schema"),
        (("--against", "HEAD", "a", "b"), "with --against, give one FOLDER (or none: schemas)"),
        (("--against", "HEAD", "nowhere"), "nowhere: no such folder (name the schema folder)"),
        (("--against=-x", "folder"), "'-x' is not a revision"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(
    tmp_path: Path, arguments: tuple[str, ...], said: str
) -> None:
    write(tmp_path / "one.json", RECIPE)
    (tmp_path / "broken.json").write_text('{"type": 7}', encoding="utf-8")
    (tmp_path / "folder").mkdir()
    done = cli("diff", *arguments, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("plancontracts: error: ")
    assert said in done.stderr
    assert done.stderr.count("\n") == 1


# --- against a git revision ----------------------------------------------------------------

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    git("init", "-q", "-b", "main", cwd=tmp_path)
    git("config", "user.email", "someone@example.org", cwd=tmp_path)
    git("config", "user.name", "Someone", cwd=tmp_path)
    write(tmp_path / "schemas" / "food" / "recipe.json", {"x-version": 1, **RECIPE})
    write(tmp_path / "schemas" / "common.json", {"$defs": {"x": {"type": "string"}}})
    git("add", ".", cwd=tmp_path)
    git("commit", "-q", "-m", "first", cwd=tmp_path)
    git("tag", "v1", cwd=tmp_path)
    return tmp_path


@needs_git
@pytest.mark.process
def test_against_a_revision_reads_it_with_git_and_leaves_the_tree_alone(repository: Path) -> None:
    recipe = repository / "schemas" / "food" / "recipe.json"
    write(recipe, {"x-version": 1, **edited(lambda s: s.update(required=["name", "tags"]))})
    before = git("status", "--porcelain", cwd=repository)
    done = cli("diff", "--against", "v1", cwd=repository)
    assert done.returncode == 1
    assert done.stdout.startswith("recipe #/required: field required: readers breaking")
    assert git("status", "--porcelain", cwd=repository) == before
    # Raising the version is what --unless-bumped asks.
    bumped = cli("diff", "--against", "v1", "--unless-bumped", cwd=repository)
    assert bumped.returncode == 1
    assert "recipe: a change that is not compatible, and x-version 1 -> 1: raise it" in (
        bumped.stderr
    )
    write(recipe, {"x-version": 2, **edited(lambda s: s.update(required=["name", "tags"]))})
    assert cli("diff", "--against", "v1", "--unless-bumped", cwd=repository).returncode == 0
    # From a folder below the repository's top, named as the user names it.
    inside = cli("diff", "--against", "v1", ".", cwd=repository / "schemas")
    assert inside.returncode == 1
    assert inside.stdout.startswith("recipe #/required")


@needs_git
@pytest.mark.process
def test_a_folder_the_revision_lacks_makes_every_contract_added(repository: Path) -> None:
    write(repository / "more" / "food" / "menu.json", {"type": "array"})
    done = cli("diff", "--against", "v1", "more", cwd=repository)
    assert (done.returncode, done.stdout.split(":")[:2]) == (0, ["menu #", " contract added"])


@needs_git
@pytest.mark.process
@pytest.mark.parametrize(
    ("revision", "said"),
    [
        ("nosuch", "'nosuch' is not a commit of the repository schemas is in"),
        ("v1:schemas", "'v1:schemas' is not a commit of the repository schemas is in"),
    ],
)
def test_a_revision_that_is_not_a_commit_is_a_usage_error(
    repository: Path, revision: str, said: str
) -> None:
    done = cli("diff", "--against", revision, cwd=repository)
    assert (done.returncode, done.stderr) == (2, f"plancontracts: error: {said}\n")


@needs_git
@pytest.mark.process
def test_outside_a_repository_is_one_line(tmp_path: Path) -> None:
    write(tmp_path / "schemas" / "food" / "recipe.json", RECIPE)
    done = cli(
        "diff",
        "--against",
        "HEAD",
        cwd=tmp_path,
        env={"GIT_CEILING_DIRECTORIES": str(tmp_path.parent)},
    )
    assert done.returncode == 2
    assert done.stderr == "plancontracts: error: schemas is not in a git repository\n"


@needs_git
@pytest.mark.process
def test_schemas_at_yields_the_revision_files(repository: Path) -> None:
    with schemas_at("v1", repository / "schemas") as folder:
        assert folder is not None
        assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.json")) == [
            "common.json",
            "food/recipe.json",
        ]
        kept = folder
    assert not kept.exists()
    with pytest.raises(UnusableSchema, match="is not a revision"), schemas_at("-x", repository):
        pass


def test_diff_of_two_folders_from_python(tmp_path: Path) -> None:
    old = write(tmp_path / "old.json", RECIPE)
    new = write(tmp_path / "new.json", edited(lambda s: s[P[1:]].pop("tags")))
    (change,) = diff(old, new)
    assert (change.contract, change.change, change.readers, change.writers) == (
        "new",
        "field-removed",
        B,
        C,
    )


# --- the project's own contracts -----------------------------------------------------------


def _first_release() -> str | None:
    """The last tag, or, until there is one, the first commit whose schemas carry a version."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return None
    tags = subprocess.run(
        ["git", "describe", "--tags", "--abbrev=0"], cwd=ROOT, capture_output=True, text=True
    )
    if tags.returncode == 0:
        return tags.stdout.strip()
    found = git("log", "--reverse", "--format=%H", "-S", '"x-version"', "--", "schemas", cwd=ROOT)
    return found.split()[0] if found.split() else None


@pytest.mark.process
@pytest.mark.slow
def test_no_bundled_contract_breaks_without_raising_its_version() -> None:
    release = _first_release()
    if release is None:
        pytest.skip("not a git checkout with a versioned release of the schemas")
    done = cli("diff", "--against", release, "--unless-bumped", str(ROOT / "schemas"), cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_bundled_contract_has_a_version() -> None:
    from plancontracts.generated import CONTRACTS, VERSIONS

    assert set(VERSIONS) == set(CONTRACTS)
    assert all(isinstance(version, int) and version >= 1 for version in VERSIONS.values())


def test_a_generated_package_lists_versions_and_is_compared_by_its_schemas(
    tmp_path: Path,
) -> None:
    from plancontracts.codegen import generate

    write(tmp_path / "v1" / "food" / "recipe.json", {"x-version": 3, **RECIPE})
    write(tmp_path / "v1" / "food" / "menu.json", {"type": "array"})
    generate.write(tmp_path / "v1", tmp_path / "old")
    index = (tmp_path / "old" / "__init__.py").read_text(encoding="utf-8")
    assert 'VERSIONS: _typing.Final[dict[str, int]] = {\n    "recipe": 3,\n}' in index
    write(
        tmp_path / "v2" / "food" / "recipe.json",
        {"x-version": 4, **edited(lambda s: s[P[1:]].pop("diet"))},
    )
    write(tmp_path / "v2" / "food" / "menu.json", {"type": "array"})
    generate.write(tmp_path / "v2", tmp_path / "new")
    done = cli("diff", "--unless-bumped", str(tmp_path / "old"), str(tmp_path / "new"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("recipe #/properties/diet: field removed: readers breaking")


@needs_git
@pytest.mark.process
def test_a_revision_schema_that_cannot_be_used_is_named_at_the_revision(repository: Path) -> None:
    (repository / "schemas" / "food" / "recipe.json").write_text('{"type": 7}', encoding="utf-8")
    git("commit", "-q", "-am", "broken", cwd=repository)
    write(repository / "schemas" / "food" / "recipe.json", RECIPE)
    done = cli("diff", "--against", "HEAD", cwd=repository)
    assert done.returncode == 2
    assert done.stderr.startswith(
        "plancontracts: error: schemas at HEAD: food/recipe.json#/type: not a valid JSON Schema"
    )


@pytest.mark.parametrize("kind", ["socket", "fifo", "missing"])
def test_a_path_that_is_no_schema_file_or_folder_is_one_line(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "odd"
    with socket.socket(socket.AF_UNIX) as unix:
        if kind == "fifo":
            os.mkfifo(target)  # never opened: reading one would wait for a writer
        elif kind == "socket":
            unix.bind(str(target))
        done = cli("diff", str(target), str(target), cwd=tmp_path, timeout=60)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"plancontracts: error: {target}")


# --- pairs a hostile reading found, each with a document that tells the two apart -----------

D4, D7 = "http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-07/schema#"


def _typed(real: str) -> dict[str, Any]:
    return {"type": real}


def _decoy_id(real: str) -> dict[str, Any]:  # an `$id` inside `examples` names nothing
    return {
        "type": "object",
        "$defs": {"r": {"$id": "http://ex.com/r.json", "type": real}},
        "properties": {"x": {"$ref": "http://ex.com/r.json"}},
        "examples": [{"$id": "http://ex.com/r.json", "type": "string"}],
    }


def _decoy_anchor(real: str) -> dict[str, Any]:
    return {
        "type": "object",
        "$defs": {"r": {"$anchor": "foo", "type": real}},
        "properties": {"x": {"$ref": "#foo"}},
        "default": {"$anchor": "foo", "type": "string"},
    }


def _draft4_id(real: str) -> dict[str, Any]:  # `id`, not `$id`, moves the base in draft 4
    return {
        "$schema": D4,
        "type": "object",
        "definitions": {"a": {"type": "string"}},
        "properties": {
            "x": {
                "id": "http://ex.com/sub.json",
                "definitions": {"a": {"type": real}},
                "properties": {"y": {"$ref": "#/definitions/a"}},
            }
        },
    }


def _draft7_anchor(real: str) -> dict[str, Any]:  # `"$id": "#foo"` is draft 7's anchor
    return {
        "$schema": D7,
        "type": "object",
        "definitions": {
            "r": {"$id": "#foo", "type": real},
            "decoy": {"$anchor": "foo", "type": "string"},
        },
        "properties": {"x": {"$ref": "#foo"}},
    }


def _dynamic(real: str) -> dict[str, Any]:
    return {
        "type": "object",
        "$defs": {"a": {"type": real}},
        "properties": {"x": {"$dynamicRef": "#/$defs/a"}},
    }


def _if_through_a_reference(least: int) -> dict[str, Any]:
    return {
        "type": "object",
        "$defs": {"T": {"minProperties": least}},
        "properties": {"a": {"$ref": "#/$defs/T"}},
        "if": {"$ref": "#/$defs/T"},
        "then": {"required": ["z"]},
    }


TAG_A = {"type": "object", "required": ["k"], "properties": {"k": {"const": "a"}}}
TAG_B = {"required": ["k"], "properties": {"k": {"const": "b"}}}
POSIX = {"^[[:alpha:]]+$": {"type": "string"}}
# (name, old, new, a document valid under old and not under new)
TOLD_APART: list[tuple[str, Any, Any, Any]] = [
    ("dynamic reference", _dynamic("string"), _dynamic("integer"), {"x": "s"}),
    ("decoy $id in examples", _decoy_id("string"), _decoy_id("integer"), {"x": "s"}),
    ("decoy $anchor in default", _decoy_anchor("string"), _decoy_anchor("integer"), {"x": "s"}),
    ("draft 4 id", _draft4_id("string"), _draft4_id("integer"), {"x": {"y": "s"}}),
    ("draft 7 anchor", _draft7_anchor("string"), _draft7_anchor("integer"), {"x": "s"}),
    (
        "draft changed",
        {"$schema": D7, "type": "object", "dependentRequired": {"a": ["b"]}},
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        {"a": 1},
    ),
    (
        "draft 7 reference hides its siblings",
        {"$schema": D7, "definitions": {"a": {"type": "string"}}, "$ref": "#/definitions/a"},
        {"$schema": D7, "definitions": {"a": {"type": "string", "maxLength": 2}},
         "$ref": "#/definitions/a", "maxLength": 2},
        "abc",
    ),
    (
        "dependencies beside dependentSchemas",
        {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}},
         "dependencies": {"a": {}}},
        {"type": "object", "dependentSchemas": {"a": {"required": ["b", "c"]}},
         "dependencies": {"a": {}}},
        {"a": 1, "b": 1},
    ),
    (
        "a tag that holds only for objects",
        {"oneOf": [TAG_A, TAG_B]},
        {"oneOf": [{key: TAG_A[key] for key in ("required", "properties")}, TAG_B]},
        "hello",
    ),
    (
        "tags 1 and 1.0 are one",
        {"oneOf": [
            {"type": "object", "required": ["k"],
             "properties": {"k": {"const": 1}, "x": {"type": "string"}}},
            {"type": "object", "required": ["k"],
             "properties": {"k": {"const": 1.0}, "x": {"type": "integer"}}},
        ]},
        {"oneOf": [
            {"type": "object", "required": ["k"],
             "properties": {"k": {"const": 1}, "x": {"type": "string"}}},
            {"type": "object", "required": ["k"],
             "properties": {"k": {"const": 1.0}, "x": {"type": ["integer", "string"]}}},
        ]},
        {"k": 1, "x": "s"},
    ),
    ("if reached by a reference", _if_through_a_reference(2), _if_through_a_reference(1),
     {"b": 1}),
    ("fractional multipleOf", {"type": "number", "multipleOf": 0.3},
     {"type": "number", "multipleOf": 0.1}, 0.3),
    (
        "a POSIX class in patternProperties",
        {"type": "object", "patternProperties": POSIX, "additionalProperties": False},
        {"type": "object", "patternProperties": POSIX, "additionalProperties": False,
         "properties": {"abc": {"type": "integer"}}},
        {"abc": "x"},
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("old", "new", "document"),
    [case[1:] for case in TOLD_APART],
    ids=[case[0] for case in TOLD_APART],
)
def test_no_reader_is_told_compatible_where_a_document_breaks(
    tmp_path: Path, old: Any, new: Any, document: Any
) -> None:
    from plancontracts import load_contracts, violations

    (old_file, new_file) = (write(tmp_path / "old.json", old), write(tmp_path / "new.json", new))
    # The document tells them apart, as plancontracts validates.
    assert not violations(load_contracts(old_file)["old"], document)
    assert violations(load_contracts(new_file)["new"], document)
    changes = diff(old_file, new_file)
    assert any(change.readers != COMPATIBLE for change in changes), changes


@needs_git
@pytest.mark.process
def test_a_revision_link_inside_the_folder_is_followed_as_in_the_working_tree(
    repository: Path,
) -> None:
    food = repository / "schemas" / "food"
    (food / "alias.json").symlink_to("recipe.json")
    git("add", ".", cwd=repository)
    git("commit", "-q", "-m", "alias", cwd=repository)
    (food / "alias.json").unlink()
    write(food / "alias.json", {"x-version": 1, **edited(lambda s: s.update(required=[]))})
    done = cli("diff", "--json", "--against", "HEAD", cwd=repository)
    assert [json.loads(line)["change"] for line in done.stdout.splitlines()] == ["field-optional"]
    # One that leaves the folder is refused, as the working tree refuses it.
    (food / "alias.json").unlink()
    (food / "alias.json").symlink_to("../../outside.json")
    write(repository / "outside.json", RECIPE)
    git("add", ".", cwd=repository)
    git("commit", "-q", "-m", "outside", cwd=repository)
    done = cli("diff", "--against", "HEAD", cwd=repository)
    assert (done.returncode, done.stderr) == (
        2,
        "plancontracts: error: schemas at HEAD: food/alias.json: is a symbolic link that leaves "
        "the folder\n",
    )


@needs_git
@pytest.mark.process
def test_a_schema_folder_at_the_top_of_the_repository(tmp_path: Path) -> None:
    git("init", "-q", "-b", "main", cwd=tmp_path)
    write(tmp_path / "food" / "recipe.json", RECIPE)
    git("add", ".", cwd=tmp_path)
    git("-c", "user.email=a@b.c", "-c", "user.name=A", "commit", "-q", "-m", "x", cwd=tmp_path)
    write(tmp_path / "food" / "recipe.json", edited(lambda s: s.update(required=[])))
    done = cli("diff", "--against", "HEAD", ".", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("recipe #/required: field optional")


def test_two_files_of_other_names_refer_within_themselves(tmp_path: Path) -> None:
    schema = {
        "$defs": {"a": {"$anchor": "foo", "type": "string"}},
        "properties": {"x": {"$ref": "#foo"}},
    }
    done = cli(
        "diff", str(write(tmp_path / "one.json", schema)), str(write(tmp_path / "two.json", schema))
    )
    assert (done.returncode, done.stdout) == (0, "")
