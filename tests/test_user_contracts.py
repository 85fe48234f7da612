"""A user's own contracts, first-class: `load_contracts`, `validate --schema`, `generate --schema`.

Any schema a user already has is a contract: one file or several, of drafts
4 to 2020-12 (judged by the draft it declares), with or without `$id`,
whatever its root holds; its handle works with every function a bundled
handle works with. What cannot be judged is refused when the schemas are
read, in one line.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from commands import cli

import plancontracts
from plancontracts import (
    Contract,
    ContractError,
    ContractSet,
    UnknownContractError,
    UnusableSchema,
    contract_schema,
    decode,
    load_contracts,
    schema_text,
    violations,
)

DRAFT7 = "http://json-schema.org/draft-07/schema#"
DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT2019 = "https://json-schema.org/draft/2019-09/schema"


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may be fetched: any attempt fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a schema was fetched")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def schema_file(tmp_path: Path, name: str, schema: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(schema), encoding="utf-8")
    return path


def verdicts(contracts: ContractSet, values: list[Any]) -> list[bool]:
    """Whether each value is valid, by the set's only contract."""
    (name,) = contracts.names()
    return [not violations(contracts[name], value) for value in values]


def test_a_schema_file_is_a_contract_named_after_it(tmp_path: Path) -> None:
    path = schema_file(
        tmp_path,
        "Recipe.schema.json",
        {"type": "object", "properties": {"servings": {"type": "integer"}}, "required": ["name"]},
    )
    contracts = load_contracts(path)
    assert contracts.names() == ("recipe",)
    recipe = contracts["recipe"]
    assert isinstance(recipe, Contract)
    # Open objects stay open: the schema decides. The value is the parsed JSON.
    assert decode(recipe, '{"name": "Soup", "servings": 4, "note": "hot"}') == {
        "name": "Soup",
        "servings": 4,
        "note": "hot",
    }
    with pytest.raises(ContractError) as refused:
        decode(recipe, '{"servings": "four"}')
    assert [str(v) for v in refused.value.violations] == [
        '(document): missing required field "name"',
        '/servings: expected an integer, got the string "four"',
    ]
    assert contract_schema(recipe)["required"] == ["name"]
    assert schema_text(recipe).startswith("# recipe (`recipe`)")


def test_an_unknown_name_says_which_was_meant(tmp_path: Path) -> None:
    contracts = load_contracts(schema_file(tmp_path, "recipe.json", {}))
    with pytest.raises(UnknownContractError, match=r'"recipes" \(did you mean "recipe"\?\)'):
        contracts["recipes"]


@pytest.mark.parametrize(
    ("schema", "values", "valid"),
    [
        # No root `type`: still a contract.
        ({"minimum": 3}, [2, 3, "text"], [False, True, True]),
        # Boolean schemas.
        (True, [1, None, {}], [True, True, True]),
        (False, [1, None, {}], [False, False, False]),
        # No `$schema`: draft 2020-12, where `$ref` has siblings.
        (
            {
                "$defs": {"a": {"type": "integer"}},
                "properties": {"x": {"$ref": "#/$defs/a", "maximum": 5}},
            },
            [{"x": 3}, {"x": 10}],
            [True, False],
        ),
        # Draft 7: `$ref` ignores its siblings.
        (
            {
                "$schema": DRAFT7,
                "definitions": {"a": {"type": "integer"}},
                "properties": {"x": {"$ref": "#/definitions/a", "maximum": 5}},
            },
            [{"x": 3}, {"x": 10}, {"x": "a"}],
            [True, True, False],
        ),
        # Draft 4: `exclusiveMaximum` is a boolean beside `maximum`; `const` is no keyword.
        (
            {"$schema": DRAFT4, "maximum": 5, "exclusiveMaximum": True, "const": 1},
            [4, 5, 2],
            [True, False, True],
        ),
        # Draft 2019-09: `$recursiveRef`.
        (
            {
                "$schema": DRAFT2019,
                "$recursiveAnchor": True,
                "type": "object",
                "additionalProperties": {"anyOf": [{"type": "integer"}, {"$recursiveRef": "#"}]},
            },
            [{"a": 1, "b": {"c": 2}}, {"a": {"b": "x"}}],
            [True, False],
        ),
        # An anchor, and a pointer into a schema, not into `$defs`.
        (
            {
                "properties": {
                    "a": {"$anchor": "number", "type": "number"},
                    "b": {"$ref": "#number"},
                },
                "items": {"$ref": "#/properties/a"},
            },
            [{"b": 1}, {"b": "x"}, [1, 2], [1, "x"]],
            [True, False, True, False],
        ),
    ],
)
def test_each_schema_is_judged_by_its_draft_as_jsonschema_judges_it(
    tmp_path: Path, schema: Any, values: list[Any], valid: list[bool]
) -> None:
    contracts = load_contracts(schema_file(tmp_path, "thing.json", schema))
    assert verdicts(contracts, values) == valid
    checker = jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator)
    assert [checker(schema).is_valid(value) for value in values] == valid


def test_a_dynamic_reference_is_judged_as_the_specification_says(tmp_path: Path) -> None:
    # The strict tree of JSON Schema's own example: its nodes refuse unknown fields.
    tree = {
        "$id": "https://example.com/tree",
        "$dynamicAnchor": "node",
        "type": "object",
        "properties": {
            "data": True,
            "children": {"type": "array", "items": {"$dynamicRef": "#node"}},
        },
    }
    strict = {
        "$id": "https://example.com/strict-tree",
        "$dynamicAnchor": "node",
        "$ref": "tree",
        "unevaluatedProperties": False,
    }
    files = [
        schema_file(tmp_path, "tree.json", tree),
        schema_file(tmp_path, "strict-tree.json", strict),
    ]
    contracts = load_contracts(*files)
    document = {"children": [{"daat": 1}]}
    assert not violations(contracts["tree"], document)
    assert violations(contracts["strict-tree"], document)
    # The bundle is self-contained: any JSON Schema tool judges it alike.
    bundle = contract_schema(contracts["strict-tree"])
    assert not jsonschema.Draft202012Validator(bundle).is_valid(document)


def test_files_refer_to_each_other_by_their_paths_without_an_id(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    common = schema_file(
        tmp_path, "lib/common.json", {"$defs": {"name": {"type": "string", "minLength": 1}}}
    )
    order = schema_file(
        tmp_path, "order.json", {"properties": {"who": {"$ref": "lib/common.json#/$defs/name"}}}
    )
    contracts = load_contracts(order, common)
    assert contracts.names() == ("common", "order")
    assert [str(v) for v in violations(contracts["order"], {"who": ""})] == [
        "/who: is 0 characters long; needs at least 1"
    ]


def test_a_remote_reference_is_read_from_the_resources_given_never_fetched(tmp_path: Path) -> None:
    schema = {"properties": {"n": {"$ref": "http://localhost:1234/integer.json"}}}
    path = schema_file(tmp_path, "thing.json", schema)
    with pytest.raises(UnusableSchema, match=r"names no schema file given \(nothing is fetched\)"):
        load_contracts(path)
    contracts = load_contracts(
        path, resources={"http://localhost:1234/integer.json": {"type": "integer"}}
    )
    assert verdicts(contracts, [{"n": 1}, {"n": "x"}]) == [True, False]


@pytest.mark.parametrize("draft", [DRAFT2019, "https://json-schema.org/draft/2020-12/schema"])
def test_a_resource_is_found_under_its_uri_whatever_its_own_id(tmp_path: Path, draft: str) -> None:
    remote = {
        "$schema": draft,
        "$id": "http://ex.org/real.json",
        "$defs": {"s": {"type": "string"}},
    }
    remote["$ref"] = "#/$defs/s"
    schema = {"$schema": draft, "$ref": "http://ex.org/given.json"}
    path = schema_file(tmp_path, "thing.json", schema)
    contracts = load_contracts(path, resources={"http://ex.org/given.json": remote})
    assert verdicts(contracts, ["a", 1]) == [True, False]


def test_a_resource_that_cannot_be_used_is_refused_only_when_reached(tmp_path: Path) -> None:
    path = schema_file(tmp_path, "thing.json", {"type": "integer"})
    broken = {"http://ex.org/broken.json": {"type": "wrong"}}
    assert verdicts(load_contracts(path, resources=broken), [1, "a"]) == [True, False]
    reaching = schema_file(tmp_path, "reaching.json", {"$ref": "http://ex.org/broken.json"})
    with pytest.raises(UnusableSchema, match=r"names a resource: .*not a valid JSON Schema"):
        load_contracts(reaching, resources=broken)


@pytest.mark.parametrize(
    ("schema", "refusal"),
    [
        ({"$ref": "#"}, "leads back to itself"),
        (
            {
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}},
                "$ref": "#/$defs/a",
            },
            "leads back to itself",
        ),
        ({"anyOf": [{"type": "string"}, {"$ref": "#"}]}, "leads back to itself"),
        # Loops away from the root, through a pointer anywhere, or draft 7's `dependencies`.
        (
            {
                "items": {"$ref": "#/$defs/x"},
                "$defs": {
                    "x": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/y"}]},
                    "y": {"oneOf": [{"$ref": "#/$defs/x"}]},
                },
            },
            "leads back to itself",
        ),
        (
            {"properties": {"a": {"$ref": "#/properties/b"}, "b": {"$ref": "#/properties/a"}}},
            "leads back to itself",
        ),
        ({"$schema": DRAFT7, "dependencies": {"a": {"$ref": "#"}}}, "leads back to itself"),
        ({"$ref": "#/$defs/missing"}, "#/$defs/missing: no such definition"),
        ({"$dynamicRef": "#nowhere"}, "a reference names nothing"),
        ({"$ref": "http://10.255.255.1/x.json"}, "nothing is fetched"),
        ({"$ref": "file:///etc/passwd"}, "nothing is fetched"),
        ({"$schema": "http://json-schema.org/draft-03/schema#"}, "no draft read here"),
        ({"type": "wrong"}, "not a valid JSON Schema"),
    ],
)
def test_a_schema_that_cannot_be_judged_is_refused_in_one_line(
    tmp_path: Path, schema: Any, refusal: str
) -> None:
    path = schema_file(tmp_path, "thing.json", schema)
    with pytest.raises(UnusableSchema) as refused:
        load_contracts(path)
    assert refusal in str(refused.value)
    assert "\n" not in str(refused.value)
    (tmp_path / "doc.json").write_text("{}", encoding="utf-8")
    done = cli("validate", "--schema", str(path), str(tmp_path / "doc.json"))
    assert (done.returncode, done.stdout, done.stderr.count("\n")) == (2, "", 1)
    assert done.stderr.startswith(f"plancontracts: error: --schema {path}")


def test_keywords_beside_a_draft_7_reference_make_no_loop(tmp_path: Path) -> None:
    # In drafts 4 to 7 a `$ref` hides its siblings: this `allOf` is never followed.
    schema = {
        "$schema": DRAFT7,
        "definitions": {
            "a": {"$ref": "#/definitions/b", "allOf": [{"$ref": "#/definitions/a"}]},
            "b": {"type": "string"},
        },
        "$ref": "#/definitions/a",
    }
    assert verdicts(load_contracts(schema_file(tmp_path, "a.json", schema)), ["x", 1]) == [
        True,
        False,
    ]


def test_a_recursive_schema_with_structure_is_judged(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"child": {"$ref": "#"}},
        "additionalProperties": False,
    }
    contracts = load_contracts(schema_file(tmp_path, "node.json", schema))
    deep: dict[str, Any] = {}
    for _ in range(100):
        deep = {"child": deep}
    assert verdicts(contracts, [deep, {"child": {"x": 1}}]) == [True, False]


def test_two_files_claiming_one_id_are_refused(tmp_path: Path) -> None:
    one = schema_file(tmp_path, "one.json", {"$id": "https://ex.org/a.json"})
    two = schema_file(tmp_path, "two.json", {"$id": "https://ex.org/a.json"})
    with pytest.raises(
        UnusableSchema, match=r"two.json: `\$id` https://ex.org/a.json is used twice"
    ):
        load_contracts(one, two)


@pytest.mark.parametrize("name", ["1.json", ".json", "___.json"])
def test_a_file_whose_name_gives_no_contract_name_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(UnusableSchema, match="rename the file"):
        load_contracts(schema_file(tmp_path, name, {}))


def test_a_folder_holds_contracts_whatever_their_root_and_libraries_of_definitions(
    tmp_path: Path,
) -> None:
    (tmp_path / "kitchen").mkdir()
    schema_file(tmp_path, "common.json", {"$defs": {"qty": {"type": "integer", "minimum": 1}}})
    schema_file(tmp_path, "kitchen/portion.json", {"$ref": "../common.json#/$defs/qty"})
    contracts = load_contracts(tmp_path)
    assert contracts.names() == ("portion",)
    assert [not violations(contracts["portion"], value) for value in (2, 0)] == [True, False]


def test_validate_takes_a_schema_file_as_the_contract(tmp_path: Path) -> None:
    schema = schema_file(tmp_path, "recipe.json", {"$schema": DRAFT7, "required": ["name"]})
    (tmp_path / "good.json").write_text('{"name": "Soup"}', encoding="utf-8")
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    good = cli("validate", "--schema", str(schema), str(tmp_path / "good.json"))
    assert (good.returncode, good.stderr) == (0, "")
    bad = cli(
        "validate", "--schema", str(schema), str(tmp_path / "good.json"), str(tmp_path / "bad.json")
    )
    assert bad.returncode == 1
    assert '  (document): missing required field "name"' in bad.stdout.splitlines()
    both = cli("validate", "recipe", "--schema", str(schema), "--schemas", str(tmp_path), "x.json")
    assert both.returncode == 2
    folder = cli("validate", "--schema", str(tmp_path), str(tmp_path / "good.json"))
    assert (folder.returncode, folder.stdout) == (2, "")


def test_documents_may_follow_options(tmp_path: Path) -> None:
    schema = schema_file(tmp_path, "thing.json", {"type": "integer"})
    for name, text in (("one.json", "1"), ("two.json", '"2"')):
        (tmp_path / name).write_text(text, encoding="utf-8")
    done = cli("validate", "--schema", str(schema), "one.json", "--json", "two.json", cwd=tmp_path)
    assert [json.loads(line)["file"] for line in done.stdout.splitlines()] == [
        "one.json",
        "two.json",
    ]
    unknown = cli(
        "validate", "--schema", str(schema), "one.json", "--bogus", "two.json", cwd=tmp_path
    )
    assert (unknown.returncode, unknown.stderr.splitlines()[-1]) == (
        2,
        "plancontracts: error: unrecognized arguments: --bogus",
    )
    elsewhere = cli("contracts", "extra")
    assert (elsewhere.returncode, elsewhere.stderr.splitlines()[-1]) == (
        2,
        "plancontracts: error: unrecognized arguments: extra",
    )


def test_the_version_is_the_distributions() -> None:
    done = cli("--version")
    # What follows, the native fast path's state, is test_cli.py's.
    assert done.returncode == 0
    assert done.stdout.startswith(f"plancontracts {plancontracts.__version__} (native fast path: ")


# A generated package's handles ---------------------------------------------------------


@pytest.fixture
def recipes_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A package `generate --schema` wrote from one schema file, imported."""
    schema = {
        "title": "Recipe",
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1},
            "servings": {"type": "integer", "minimum": 1},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    path = schema_file(tmp_path, "recipe.json", schema)
    done = cli(
        "generate",
        "--schema",
        str(path),
        "--out",
        str(tmp_path / "kitchen"),
        "--package",
        "kitchen",
    )
    assert done.returncode == 0, done.stderr
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module("kitchen")
    for name in [name for name in sys.modules if name == "kitchen" or name.startswith("kitchen.")]:
        del sys.modules[name]


def test_a_generated_packages_handle_works_with_every_function(recipes_package: Any) -> None:
    recipe = recipes_package.RECIPE
    typed = decode(recipe, '{"name": "Soup", "servings": 2}')
    assert type(typed).__name__ == "Recipe"
    assert (typed.name, typed.servings) == ("Soup", 2)
    with pytest.raises(ContractError) as refused:
        decode(recipe, '{"name": "", "servings": 0, "salt": 1}')
    # Every violation, where msgspec alone stops at the first.
    assert [str(v) for v in refused.value.violations] == [
        "/name: is 0 characters long; needs at least 1",
        '/salt: unknown field "salt"',
        "/servings: 0 is less than the minimum 1",
    ]
    assert contract_schema(recipe)["title"] == "Recipe"
    assert schema_text(recipe).startswith("# Recipe (`recipe`)")
    assert violations(recipe, {"name": "x"}) == ()
    # The package's folder loads as a set judged by its schemas alone.
    folder = Path(recipes_package.__file__).parent
    assert load_contracts(folder).names() == ("recipe",)


TYPED_USE = """\
from typing import assert_type

from kitchen import RECIPE
from kitchen.recipe import Recipe
from plancontracts import decode

assert_type(decode(RECIPE, b"{}"), Recipe)
servings: str = decode(RECIPE, b"{}").servings
"""


@pytest.mark.process  # mypy, as a user runs it on their code
def test_a_generated_handle_decodes_typed_for_mypy(recipes_package: Any, tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("dev", Path(__file__).parents[1] / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    view: Path = dev.type_check_view()  # the package as installed, for mypy to follow
    use = tmp_path / "use.py"
    use.write_text(TYPED_USE, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--no-incremental",
            str(use),
        ],
        cwd=tmp_path,
        env={**os.environ, "MYPYPATH": f"{view}{os.pathsep}{tmp_path}"},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    errors = re.findall(r"^(.+?):(\d+): error: .*\[([a-z-]+)\]$", done.stdout, flags=re.M)
    # Only the misuse: `servings` is an `int | None`-like field, never a str.
    assert [(Path(path).name, int(line), code) for path, line, code in errors] == [
        ("use.py", 8, "assignment")
    ], done.stdout


def test_a_users_contract_has_a_decoding_profile_or_says_why_not(tmp_path: Path) -> None:
    from plancontracts.runtime.core.profiles import contract_profile

    order = {
        "type": "object",
        "properties": {"line": {"$ref": "#/$defs/line"}},
        "required": ["line"],
        "$defs": {"line": {"type": "object", "properties": {"sku": {"type": "string"}}}},
    }
    contracts = load_contracts(schema_file(tmp_path, "order.json", order))
    profile = contract_profile(contracts["order"])
    assert profile["properties"]["line"]["properties"]["sku"]["type"] == "string"
    assert jsonschema.Draft202012Validator(profile).is_valid({"line": {"sku": "a"}})
    # A `$ref` key inside a value is data, not a reference left unwritten.
    constant = {"type": "object", "properties": {"a": {"const": {"$ref": "x"}}}}
    handle = load_contracts(schema_file(tmp_path, "constant.json", constant))["constant"]
    assert contract_profile(handle)["properties"]["a"] == {"const": {"$ref": "x"}}
    for name, schema, why in (
        (
            "tree.json",
            {"type": "object", "properties": {"child": {"$ref": "#"}}},
            "refers to itself",
        ),
        ("loose.json", {"properties": {"child": {"$ref": "#"}}}, "without a `type`"),
        ("old.json", {"$schema": DRAFT7, "type": "object"}, "draft 2020-12"),
        (
            "anchored.json",
            {"$defs": {"a": {"$anchor": "a"}}, "$ref": "#a"},
            "`.anchor` at /.defs/a",
        ),
        ("either.json", {"type": ["string", "null"]}, "list of types at /type"),
        ("all.json", {"allOf": [{"type": "string"}]}, "`allOf` at /"),
    ):
        handle = load_contracts(schema_file(tmp_path, name, schema))[name.removesuffix(".json")]
        with pytest.raises(UnusableSchema, match=why):
            contract_profile(handle)


def test_schema_prints_a_users_contract_self_contained(tmp_path: Path) -> None:
    (tmp_path / "lib").mkdir()
    schema_file(tmp_path, "lib/common.json", {"$defs": {"name": {"type": "string"}}})
    schema_file(
        tmp_path,
        "lib/order.json",
        {"type": "object", "properties": {"who": {"$ref": "common.json#/$defs/name"}}},
    )
    bundled = cli("schema", "order", "--schemas", str(tmp_path))
    assert bundled.returncode == 0, bundled.stderr
    assert json.loads(bundled.stdout)["$defs"] == {"name": {"type": "string"}}
    text = cli("schema", "--schema", str(tmp_path / "lib" / "common.json"), "--text")
    assert (text.returncode, text.stdout.splitlines()[0]) == (0, "# common (`common`)")
    for arguments in (
        ("schema",),
        ("schema", "order", "--schema", str(tmp_path / "lib" / "order.json")),
    ):
        refused = cli(*arguments)
        assert (refused.returncode, refused.stdout, refused.stderr.count("\n")) == (2, "", 1)


@pytest.mark.slow
def test_every_suite_schema_has_schema_text_and_a_profile_or_one_line_why_not(
    tmp_path: Path,
) -> None:
    # The official suite's schemas are a catalogue of every keyword in every shape: none
    # may crash what a user renders into a prompt or writes a model's answer under.
    from json_schema_suite import GENERATED_DRAFT, cases, remotes, suite_folder

    from plancontracts.runtime.core.profiles import contract_profile

    folder = suite_folder()
    if folder is None:
        pytest.skip("the JSON-Schema-Test-Suite is not fetched: `python3 dev.py setup` fetches it")
    given = remotes(folder, GENERATED_DRAFT)
    texts = profiles = 0
    refusals: list[str] = []
    for case in cases(folder, GENERATED_DRAFT):
        path = schema_file(tmp_path, "case.json", case.declared_schema())
        try:
            handle = load_contracts(path, resources=given)["case"]
        except UnusableSchema:
            continue  # the suite's vocabulary cases, counted by its own test
        assert schema_text(handle).startswith("# ")
        texts += 1
        try:
            contract_profile(handle)
        except UnusableSchema as why:
            refusals.append(str(why))
        else:
            profiles += 1
    assert texts >= 360
    assert profiles > 100
    assert all("\n" not in why for why in refusals)


def test_a_number_past_a_floats_range_is_one_violation_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The schema takes any number; the generated type is a float, which cannot hold 10**400.
    schema = {"type": "object", "properties": {"n": {"type": "array", "items": {"type": "number"}}}}
    path = schema_file(tmp_path, "reading.json", schema)
    done = cli(
        "generate", "--schema", str(path), "--out", str(tmp_path / "meters"), "--package", "meters"
    )
    assert done.returncode == 0, done.stderr
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        reading = importlib.import_module("meters").READING
        assert decode(reading, '{"n": [1, 2.5]}').n == [1.0, 2.5]
        with pytest.raises(ContractError) as refused:
            decode(reading, '{"n": [1, 1' + "0" * 400 + "]}")
        assert [str(v) for v in refused.value.violations] == [
            "/n/1: is a number past the range of a float, which the generated type holds"
        ]
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == "meters"]:
            del sys.modules[name]


@pytest.mark.parametrize("draft", [DRAFT7, DRAFT4, DRAFT2019])
def test_the_bounded_validator_judges_below_the_root_too(
    tmp_path: Path, draft: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A `$ref` back to a root that names its draft: jsonschema's own evolve took its stock
    # validator there, reading `$` as Python does and matching patterns without a limit.
    schema = {
        "$schema": draft,
        "type": "object",
        "properties": {
            "name": {"type": "string", "pattern": "^a$"},
            "slow": {"type": "string", "pattern": "^(a|a)*$"},
            "child": {"$ref": "#"},
        },
    }
    contracts = load_contracts(schema_file(tmp_path, "node.json", schema))
    assert verdicts(contracts, [{"child": {"name": "a"}}, {"child": {"name": "a\n"}}]) == [
        True,
        False,
    ]
    monkeypatch.setattr(contracts, "_pattern_seconds", 0.2)
    (slow,) = violations(contracts["node"], {"child": {"child": {"slow": "a" * 40 + "!"}}})
    assert slow.message == 'matching the pattern "^(a|a)*$" took more than 0.2 s: not judged'


def test_more_schema_files_are_what_the_first_refers_to(tmp_path: Path) -> None:
    first = schema_file(tmp_path, "order.json", {"properties": {"n": {"$ref": "qty.json"}}})
    qty = schema_file(tmp_path, "qty.json", {"type": "integer"})
    (tmp_path / "doc.json").write_text('{"n": "many"}', encoding="utf-8")
    done = cli("validate", "--schema", str(first), "--schema", str(qty), str(tmp_path / "doc.json"))
    assert done.returncode == 1
    assert '  /n: expected an integer, got the string "many"' in done.stdout.splitlines()
    # The first is the contract: a second never replaces it.
    swapped = cli(
        "validate", "--schema", str(qty), "--schema", str(first), str(tmp_path / "doc.json")
    )
    assert "  (document): expected an integer, got an object" in swapped.stdout.splitlines()


@pytest.mark.parametrize(
    ("schema", "refusal"),
    [
        ({"$schema": ["x"]}, '`$schema` must be a string naming a draft, not ["x"]'),
        (
            {"$schema": DRAFT7, "definitions": {"p": {"pattern": "[[:foo:]]"}}},
            "#/definitions/p/pattern: the pattern '[[:foo:]]' cannot be used",
        ),
        ({"contains": {"pattern": "[[:foo:]]"}}, "#/contains/pattern: the pattern"),
    ],
)
def test_odd_schemas_are_refused_in_one_line_where_they_raised(
    tmp_path: Path, schema: Any, refusal: str
) -> None:
    path = schema_file(tmp_path, "odd.json", schema)
    (tmp_path / "doc.json").write_text('"a"', encoding="utf-8")
    done = cli("validate", "--schema", str(path), str(tmp_path / "doc.json"))
    assert (done.returncode, done.stdout, done.stderr.count("\n")) == (2, "", 1), done.stderr
    assert refusal in done.stderr


def test_a_folder_given_as_a_schema_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "doc.json").write_text("1", encoding="utf-8")
    for command in ("validate", "schema"):
        arguments = [command, "--schema", str(tmp_path)]
        done = cli(*arguments, *([str(tmp_path / "doc.json")] if command == "validate" else []))
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.endswith("is a folder; give --schemas DIR CONTRACT\n")


@pytest.mark.parametrize("pattern", ["^a*a*a*a*a*a*a*b$", "[a-z]+@"])
def test_a_pattern_that_backtracks_is_left_to_the_schemas_time_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pattern: str
) -> None:
    # msgspec matches the types' patterns with `re`, without a limit: 400 `a` took minutes.
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    path = schema_file(tmp_path, "poly.json", schema)
    package = f"poly{abs(hash(pattern))}"
    done = cli(
        "generate", "--schema", str(path), "--out", str(tmp_path / package), "--package", package
    )
    assert done.returncode == 0, done.stderr
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module = importlib.import_module(package)
        assert module.SCHEMA_ONLY_RULES["poly"] == ("/properties/s/pattern",)
        with pytest.raises(ContractError):
            decode(module.POLY, json.dumps({"s": "a" * 4000}))
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == package]:
            del sys.modules[name]


def test_odd_but_usable_schemas_are_read_as_they_mean(tmp_path: Path) -> None:
    # A relative root `$id` is read against the file's own place.
    (tmp_path / "rel").mkdir()
    common = schema_file(
        tmp_path, "rel/common.json", {"$id": "common.json", "$defs": {"q": {"type": "integer"}}}
    )
    main = schema_file(tmp_path, "rel/main.json", {"$ref": "common.json#/$defs/q"})
    contracts = load_contracts(main, common)
    assert [not violations(contracts["main"], value) for value in (1, "x")] == [True, False]
    # Draft 4's exclusive bounds are said as such.
    bounded = load_contracts(
        schema_file(
            tmp_path, "d4.json", {"$schema": DRAFT4, "maximum": 5, "exclusiveMaximum": True}
        )
    )
    assert [str(v) for v in violations(bounded["d4"], 5)] == ["(document): 5 is not less than 5"]
    # A reference to nothing in a large schema is one short line.
    big = {"$ref": "#nowhere", "description": "x" * 100_000}
    with pytest.raises(UnusableSchema) as refused:
        load_contracts(schema_file(tmp_path, "big.json", big))
    assert len(str(refused.value)) < 400
    with pytest.raises(TypeError, match="resources map URIs to schemas, not list"):
        load_contracts(main, resources=[])  # type: ignore[arg-type]


def test_a_file_name_with_a_space_generates_its_contract(tmp_path: Path) -> None:
    path = schema_file(
        tmp_path, "order line.json", {"type": "object", "properties": {"n": {"type": "integer"}}}
    )
    done = cli(
        "generate", "--schema", str(path), "--out", str(tmp_path / "lines"), "--package", "lines"
    )
    assert done.returncode == 0, done.stderr
    assert "class OrderLine(" in (tmp_path / "lines" / "order_line.py").read_text()


@pytest.mark.parametrize(("length", "refused"), [(250, False), (500, True)])
def test_a_chain_of_references_past_what_the_validator_follows_is_refused_when_read(
    tmp_path: Path, length: int, refused: bool
) -> None:
    # Reached from the middle first, too: `p` starts at the chain's half.
    chain = {f"a{i}": {"$ref": f"#/definitions/a{i + 1}"} for i in range(length)}
    chain[f"a{length}"] = {"type": "string"}
    schema = {
        "$schema": DRAFT7,
        "properties": {
            "p": {"$ref": f"#/definitions/a{length // 2}"},
            "q": {"$ref": "#/definitions/a0"},
        },
        "definitions": chain,
    }
    path = schema_file(tmp_path, "chain.json", schema)
    if refused:
        with pytest.raises(UnusableSchema, match="more than 300 schemas judge one value"):
            load_contracts(path)
    else:
        assert verdicts(load_contracts(path), [{"q": "x"}, {"q": 1}]) == [True, False]


def test_references_nested_past_pythons_limit_are_one_line(tmp_path: Path) -> None:
    chain: dict[str, Any] = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(1000)}
    chain["d1000"] = {"type": "string"}
    path = schema_file(tmp_path, "chain.json", {"$defs": chain, "$ref": "#/$defs/d0"})
    with pytest.raises(UnusableSchema) as refused:
        load_contracts(path)
    assert str(refused.value) in (
        f"{path}: nests its references too deeply",
        f"{path}: more than 300 schemas judge one value in a chain (`$ref` to `$ref`, "
        "`allOf` in `allOf`), past what the validator follows",
    )
