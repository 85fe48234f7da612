"""Generated types are never stricter than the schema, and never claim to hold more than they do.

Each case is a schema, documents it accepts and documents it refuses, generated
into one package (one contract per case) and decoded with the package's handle:
the verdict must be the schema's (jsonschema's draft 2020-12, reading `$` in a pattern
as the end of the text, as ECMA-262 and validation do: `pattern_validator`), and no
exception but ContractError may escape. A case marked `exact` is held by the
types alone (its contract has no schema-only rules): the types' own verdict is
the schema's, so validation never runs the schema for it.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiers import examples_at_most

from plancontracts import ContractError, convert, decode
from plancontracts.codegen import generate
from plancontracts.codegen.type_view import known_patterns, reads_alike, type_view
from plancontracts.runtime.core.patterns import pattern_validator

DRAFT = "https://json-schema.org/draft/2020-12/schema"


class Case(NamedTuple):
    schema: dict[str, Any] | bool
    valid: list[Any]
    invalid: list[Any]
    exact: bool | None = None  # True: the types hold it all; False: the schema holds some


CASES: dict[str, Case] = {
    # Wrong verdicts of the generated types, each accepting an invalid document (issue 27).
    "number-const": Case({"type": "number", "const": 2.5}, [2.5], [3, 2], exact=False),
    "number-enum": Case({"enum": [0.5, 1.5]}, [0.5, 1.5], [2, "a"], exact=False),
    "small-multiple": Case(
        {"type": "number", "multipleOf": 0.0001}, [0.0075, 1], [0.00751], exact=False
    ),
    "empty-enum": Case({"enum": []}, [], ["a", 1, None, {}]),
    "object-const": Case({"const": {"a": 1}}, [{"a": 1}], [{"a": 2}, {}, 1]),
    "nullable-object": Case(
        {
            "type": ["object", "null"],
            "properties": {"at": {"$ref": "#/$defs/place"}},
            "required": ["at"],
            "$defs": {"place": {"type": "integer", "minimum": 0}},
        },
        [None, {"at": 1}, {"at": 1, "other": "x"}],
        [{}, {"at": -1}, {"at": "x"}, 3],
        exact=True,
    ),
    # Crashes: generating, or the types refusing what the schema accepts.
    "prefix-items": Case(
        {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
        [[], [1], [1, "a"]],
        [["a"], [1, 2], {}],
        exact=False,
    ),
    "items-false": Case(
        {"type": "array", "prefixItems": [{}], "items": False}, [[], [1]], [[1, 2]], exact=False
    ),
    "items-without-type": Case({"items": {"type": "integer"}}, [{"a": "x"}, [1], "x"], [["x"]]),
    "open-object": Case(
        {"type": "object", "properties": {"a": {"type": "integer"}}},
        [{}, {"a": 1}, {"a": 1, "b": [2]}],
        [{"a": "x"}, [], "x"],
        exact=True,
    ),
    "properties-without-type": Case(
        {"properties": {"a": {"type": "integer"}}}, [{"a": 1}, 5, "x", []], [{"a": "x"}]
    ),
    "type-union-pattern": Case(  # msgspec 0.22 segfaulted on the model made for it
        {"type": ["array", "string"], "pattern": "^a"}, ["ab", [1], []], ["b", 1, None]
    ),
    "array-or-object": Case(
        {"type": ["array", "object"], "items": {"type": "integer"}}, [[1], {"a": "x"}], [["x"], 1]
    ),
    "format-duration": Case(
        {"type": "string", "format": "duration"}, ["P1D", "not a duration"], [1], exact=True
    ),
    "false-in-all-of": Case({"allOf": [True, False]}, [], [1, "a"]),
    "false-in-any-of": Case({"anyOf": [False, {"type": "integer"}]}, [1], ["a"]),
    "false-in-one-of": Case({"oneOf": [{"type": "integer"}, False]}, [1], ["a"]),
    "object-branches": Case(
        {
            "anyOf": [
                {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                {"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]},
            ]
        },
        [{"a": 1}, {"b": "x"}],
        [{}, {"a": "x"}, 1],
    ),
    "property-names-false": Case(
        {"type": "object", "propertyNames": False}, [{}], [{"a": 1}], exact=False
    ),
    "pattern-properties": Case(
        {
            "type": "object",
            "properties": {"a": {}},
            "patternProperties": {"^x": {"type": "integer"}},
            "additionalProperties": False,
        },
        [{"a": 1}, {"x1": 2}],
        [{"b": 1}, {"x1": "s"}],
        exact=False,
    ),
    "unevaluated-items": Case(
        {"type": "array", "prefixItems": [{"type": "string"}], "unevaluatedItems": False},
        [["a"]],
        [["a", 1]],
        exact=False,
    ),
    "ref-with-siblings": Case(
        {
            "type": "object",
            "properties": {"a": {"$ref": "#/$defs/n", "maximum": 3}},
            "$defs": {"n": {"type": "integer"}},
        },
        [{"a": 2}],
        [{"a": 4}, {"a": "x"}],
        exact=False,
    ),
    "required-not-in-properties": Case(
        {"type": "object", "properties": {"a": {}}, "required": ["a", "b"]},
        [{"a": 1, "b": 2}],
        [{"a": 1}],
        exact=False,
    ),
    # What the types hold exactly.
    "string-enum": Case({"enum": ["a", "b"]}, ["a"], ["c", 1], exact=True),
    "integer-enum": Case({"type": "integer", "enum": [1, 2]}, [1, 2.0], [3, True], exact=True),
    "boolean-const": Case({"const": False}, [False], [True, 0], exact=False),
    "fractional-integer-bounds": Case(
        {"type": "integer", "minimum": 1.5, "exclusiveMaximum": 4.5}, [2, 4], [1, 5], exact=True
    ),
    "integer-multiple": Case({"type": "integer", "multipleOf": 3}, [3, 6.0], [4], exact=True),
    "big-integers": Case(
        {"type": "integer", "minimum": -(2**62)}, [2**70, 1e20], [-(2**80)], exact=True
    ),
    "bounds-beyond-64-bits": Case(
        {"type": "integer", "maximum": 2**70}, [2**70, -(2**80)], [2**70 + 1], exact=False
    ),
    "end-of-text": Case(
        {"type": "string", "pattern": "^a$", "maxLength": 2}, ["a"], ["a\n", "b"], exact=True
    ),
    "unicode-class": Case({"type": "string", "pattern": "^\\d+$"}, ["12"], ["a"], exact=False),
    "code-point-lengths": Case(
        {"type": "string", "minLength": 2, "maxLength": 2}, ["\U0001f600a"], ["\U0001f600"], True
    ),
    "map": Case(
        {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 1},
        [{}, {"a": 1}],
        [{"a": "x"}, {"a": 1, "b": 2}],
        exact=True,
    ),
    "nullable-any-of": Case(
        {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "null"}]},
        ["a", None],
        ["ab", 1],
        exact=True,
    ),
    "closed-empty-object": Case(
        {"type": "object", "additionalProperties": False}, [{}], [{"a": 1}], exact=True
    ),
    "defaults-the-types-cannot-hold": Case(
        {
            "type": "object",
            "properties": {
                "a": {"type": "array", "default": [1]},
                "b": {"type": "integer", "default": "x"},
                "c": {"type": "object", "properties": {"d": {}}, "default": {"d": 1}},
            },
        },
        [{}, {"a": [], "b": 1, "c": {}}],
        [{"b": "x"}],
        exact=True,
    ),
    "tree": Case(
        {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "children": {"type": "array", "items": {"$ref": "#"}},
            },
            "required": ["value"],
            "additionalProperties": False,
        },
        [{"value": 1, "children": [{"value": 2, "children": [{"value": 3}]}]}],
        [{"value": 1, "children": [{"value": "x"}]}, {"value": 1, "more": 2}],
        exact=True,
    ),
}


def _imported(name: str, folder: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        name, folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_PACKAGES = itertools.count()


def generated_package(folder: Path, schemas: dict[str, Any]) -> ModuleType:
    """The package `generate` writes for `schemas` (contract name -> schema), imported."""
    files = []
    (folder / "schemas").mkdir(parents=True)
    for name, schema in schemas.items():
        path = folder / "schemas" / f"{name}.json"
        declared = {"$schema": DRAFT, **schema} if isinstance(schema, dict) else schema
        path.write_text(json.dumps(declared), encoding="utf-8")
        files.append(path)
    name = f"typed_cases_{next(_PACKAGES)}"
    generate.write(files, folder / name)
    return _imported(name, folder / name)


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    folder = tmp_path_factory.mktemp("typed-cases")
    return generated_package(folder, {name: case.schema for name, case in CASES.items()})


def decodes(handle: Any, document: Any) -> bool:
    try:
        decode(handle, json.dumps(document))
    except ContractError:
        return False
    return True


@pytest.mark.parametrize("name", list(CASES))
def test_the_generated_types_give_the_schemas_verdict(package: ModuleType, name: str) -> None:
    case = CASES[name]
    schema = case.schema if isinstance(case.schema, bool) else {"$schema": DRAFT, **case.schema}
    validator = pattern_validator()(schema)
    handle = package.CONTRACTS[name]
    for document, expected in [(d, True) for d in case.valid] + [(d, False) for d in case.invalid]:
        assert validator.is_valid(document) is expected, (name, document)  # the case itself
        assert decodes(handle, document) is expected, (name, document)
    rules = package.SCHEMA_ONLY_RULES[name]
    if case.exact is not None:
        assert (not rules) is case.exact, rules
    if case.exact:
        for document in case.valid + case.invalid:
            # The types alone judge it (msgspec, then plancontracts' check of the patterns
            # they carry): `convert` runs the schema only once msgspec refuses, and raises
            # AssertionError if the schema then accepts. Integral floats are the one thing
            # the schema retypes.
            if any(isinstance(leaf, float) for leaf in _leaves(document)):
                continue
            try:
                convert(handle, document)
                held = True
            except ContractError:
                held = False
            assert held is validator.is_valid(document), (name, document)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def test_an_open_object_keeps_its_named_fields_and_drops_the_others(package: ModuleType) -> None:
    handle = package.CONTRACTS["open-object"]
    value = decode(handle, '{"a": 1, "b": [2]}')
    assert value.a == 1
    assert not hasattr(value, "b")
    assert not handle.type.__struct_config__.forbid_unknown_fields


def test_a_recursive_definition_generates_a_recursive_type(package: ModuleType) -> None:
    handle = package.CONTRACTS["tree"]
    tree = decode(handle, json.dumps(CASES["tree"].valid[0]))
    assert isinstance(tree, handle.type)
    assert isinstance(tree.children[0].children[0], handle.type)
    assert tree.children[0].children[0].value == 3


def test_a_deep_recursive_document_is_judged_without_a_crash(package: ModuleType) -> None:
    handle = package.CONTRACTS["tree"]
    valid: dict[str, Any] = {"value": 0}
    invalid: dict[str, Any] = {"value": "x"}
    for depth in range(200):
        valid = {"value": depth, "children": [valid]}
        invalid = {"value": depth, "children": [invalid]}
    assert decodes(handle, valid)
    assert not decodes(handle, invalid)  # the schema's verdict, or too deep to judge


def test_a_pattern_that_may_backtrack_is_left_to_the_schema(tmp_path: Path) -> None:
    # The types' patterns may be matched with `re`, which takes days on `^(a|a)*$` and
    # 40 `a` and a `!`; validation bounds the time a user's patterns take.
    schema = {"type": "string", "pattern": "^(a|a)*$"}
    assert type_view(schema).beyond == ("/pattern",)
    # plancontracts' own, which tests/test_patterns.py matches, are held by the types.
    own = {"type": "string", "pattern": "^[a-z][a-z0-9]*(_[a-z0-9]+)*$(?!\\n)"}
    assert own["pattern"] in known_patterns()
    assert type_view(own).beyond == ()
    package = generated_package(tmp_path, {"slow": schema, "own": own})
    assert "(a|a)" not in (tmp_path / package.__name__ / "slow.py").read_text()
    # Carried for plancontracts' own check, not as a constraint msgspec checks.
    typed = msgspec.inspect.type_info(package.CONTRACTS["own"].type)
    assert isinstance(typed, msgspec.inspect.Metadata)
    assert typed.type == msgspec.inspect.StrType()
    assert typed.extra_json_schema == {"pattern": own["pattern"]}


@pytest.mark.parametrize(
    ("pattern", "alike"),
    [
        ("^[a-z][a-z0-9_]{0,39}$(?!\\n)", True),
        ("^a$", True),
        ("^\\u00e9\\.x$", True),
        ("(?:ab)?c(?=d)", True),
        ("\\d", False),
        ("\\w+", False),
        ("\\bx", False),
        ("\\p{L}", False),
        ("\\u{1F600}", False),
        ("(?i)a", False),
        ("(?<name>a)", False),
        ("a{,3}", False),
        ("[]a]", False),
        ("[^]", False),
        ("[[a]", False),
        ("\\cA", False),
        ("(a|a)*", False),
        ("(", False),
    ],
)
def test_a_pattern_is_typed_only_where_re_reads_it_as_validation_does(
    pattern: str, alike: bool
) -> None:
    assert reads_alike(pattern) is alike


@pytest.mark.parametrize(
    ("schema", "beyond"),
    [
        ({"type": "array", "uniqueItems": True}, ("/uniqueItems",)),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, ()),
        ({"type": ["string", "null"], "maxLength": 3}, ()),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, ("/anyOf",)),
        ({"type": "object", "minProperties": 2, "properties": {"a": {}}}, ("/minProperties",)),
        ({"type": "object", "propertyNames": {"pattern": "^a"}}, ("/propertyNames",)),
        ({"const": True}, ("/const",)),
        ({"const": "log"}, ()),
        ({"type": "string", "format": "date-time"}, ()),
        ({"type": "integer", "multipleOf": 0.5}, ("/multipleOf",)),
        ({"type": "number", "maximum": 2**60}, ("/maximum",)),
        ({"type": "object", "properties": {"a": False}}, ("/properties/a",)),
        ({"minimum": 1, "type": "integer", "not": {"const": 3}}, ("/not",)),
        ({"$ref": "#/$defs/a~1b", "$defs": {"a/b": {"maxLength": 1}}}, ("/$defs/a~1b/maxLength",)),
        ({"type": "object", "properties": {"a": {}}, "additionalProperties": {}}, ()),
        (
            {"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}},
            ("/additionalProperties",),
        ),
    ],
)
def test_type_view_records_each_keyword_the_types_do_not_hold(
    schema: dict[str, Any], beyond: tuple[str, ...]
) -> None:
    assert type_view(schema).beyond == beyond


# Random schemas ---------------------------------------------------------------

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.5, 1.0, 2.5, 2**64]),
    st.sampled_from(["", "a", "ab", "a\n", "b"]),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abc"), inner),
    max_leaves=5,
)
_TYPES = st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])


def _schemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keywords: dict[str, st.SearchStrategy[Any]] = {
        "type": _TYPES | st.lists(_TYPES, min_size=1, max_size=2, unique=True),
        "enum": st.lists(_SCALARS, max_size=3),
        "const": _SCALARS,
        "minimum": st.sampled_from([0, 1.5, -2]),
        "exclusiveMaximum": st.sampled_from([2, 2.5]),
        "multipleOf": st.sampled_from([2, 0.5]),
        "minLength": st.integers(0, 2),
        "maxLength": st.integers(0, 2),
        "pattern": st.sampled_from(["^a", "^a$", "b$", "\\d", "^(a|b)*$"]),
        "format": st.just("date-time"),
        "items": inner,
        "prefixItems": st.lists(inner, min_size=1, max_size=2),
        "minItems": st.integers(0, 2),
        "uniqueItems": st.booleans(),
        "properties": st.dictionaries(st.sampled_from("abc"), inner, max_size=2),
        "required": st.lists(st.sampled_from("abcd"), max_size=2, unique=True),
        "additionalProperties": inner,
        "anyOf": st.lists(inner, min_size=1, max_size=2),
        "oneOf": st.lists(inner, min_size=1, max_size=2),
        "allOf": st.lists(inner, min_size=1, max_size=2),
        "not": inner,
        "default": _SCALARS,
    }
    return st.booleans() | st.dictionaries(
        st.sampled_from(list(keywords)), st.none(), max_size=4
    ).flatmap(
        lambda chosen: (
            st.fixed_dictionaries({key: keywords[key] for key in chosen}) if chosen else st.just({})
        )
    )


_SCHEMAS: st.SearchStrategy[Any] = st.recursive(
    st.booleans() | st.builds(dict), _schemas, max_leaves=4
)


@pytest.mark.slow  # each example generates and imports a package
@settings(
    max_examples=examples_at_most(15),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(
    schemas=st.lists(_SCHEMAS, min_size=1, max_size=12),
    documents=st.lists(_VALUES, min_size=1, max_size=12),
)
def test_random_schemas_generate_types_that_give_the_schemas_verdict(
    tmp_path_factory: pytest.TempPathFactory, schemas: list[Any], documents: list[Any]
) -> None:
    folder = tmp_path_factory.mktemp("random-schemas")
    checker = pattern_validator()
    valid = [schema for schema in schemas if checker(checker.META_SCHEMA).is_valid(schema)]
    named = {f"case-{index}": schema for index, schema in enumerate(valid)}
    if not named:
        return
    package = generated_package(folder, named)
    for name, schema in named.items():
        declared = {"$schema": DRAFT, **schema} if isinstance(schema, dict) else schema
        validator = checker(declared)
        for document in documents:
            expected = validator.is_valid(document)
            assert decodes(package.CONTRACTS[name], document) is expected, (schema, document)
