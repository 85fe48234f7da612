"""`validate --schemas DIR` on hostile schema folders and hostile documents: one line, bounded.

A schema folder is read like a document: regular files inside it only,
within a byte cap and a nesting cap, and nothing it names is read or fetched
from anywhere else. Its patterns end at the end of the text and are matched
within a deadline; `uniqueItems` takes linear time.
"""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import jsonschema._utils
import pytest
from commands import cli

from plancontracts.runtime.core import schema_sets
from plancontracts.runtime.core.errors import UnusableSchema
from plancontracts.runtime.core.schema_tree import (
    MAX_FOLDER_PATTERN_SIZE,
    MAX_FOLDER_PATTERNS,
    MAX_PATTERN_SIZE,
    MAX_SCHEMA_DEPTH,
    MAX_SCHEMA_FILE_BYTES,
    SchemaTree,
)
from plancontracts.runtime.core.validation import ContractSet

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def folder_of(tmp_path: Path, thing: dict[str, Any], **others: str) -> Path:
    """A schema folder whose one contract, `fam/thing.json`, is the object `thing`.

    `others` are more files, by path inside the folder, with their text.
    """
    folder = tmp_path / "schemas"
    (folder / "fam").mkdir(parents=True)
    schema = {"$schema": DRAFT, "$id": "https://example.org/thing.json", **thing}
    (folder / "fam" / "thing.json").write_text(json.dumps(schema), encoding="utf-8")
    for name, text in others.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def judged(folder: Path, tmp_path: Path, document: Any) -> tuple[int, list[str], list[str]]:
    """`validate --schemas folder thing` on `document`: status, output lines, error lines."""
    (tmp_path / "doc.json").write_text(json.dumps(document), encoding="utf-8")
    done = cli("validate", "--schemas", str(folder), "thing", str(tmp_path / "doc.json"))
    return done.returncode, done.stdout.splitlines(), done.stderr.splitlines()


def refused(folder: Path, tmp_path: Path) -> str:
    """The one line `validate --schemas` refuses `folder` with, exit status 2."""
    status, out, err = judged(folder, tmp_path, {})
    assert (status, out, len(err)) == (2, [], 1), (status, out, err)
    return err[0]


# Patterns ------------------------------------------------------------------------------


def test_a_pattern_ending_in_dollar_refuses_a_final_newline(tmp_path: Path) -> None:
    pattern = {"type": "string", "pattern": "^2d6$"}
    folder = folder_of(tmp_path, {"type": "object", "properties": {"roll": pattern}})
    assert judged(folder, tmp_path, {"roll": "2d6"})[0] == 0
    status, out, _ = judged(folder, tmp_path, {"roll": "2d6\n"})
    assert status == 1
    assert out[1] == '  /roll: "2d6\\n" does not match the pattern "^2d6$"'


def test_a_pattern_property_matches_the_whole_key(tmp_path: Path) -> None:
    thing = {
        "type": "object",
        "patternProperties": {"^a$": {"type": "integer"}},
        "additionalProperties": False,
    }
    folder = folder_of(tmp_path, thing)
    assert judged(folder, tmp_path, {"a": 1})[0] == 0
    status, out, _ = judged(folder, tmp_path, {"a\n": 1})
    assert (status, out[1]) == (1, '  /a\\u000a: unknown field "a\\n"')


def test_a_pattern_that_backtracks_without_end_is_cut_at_the_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `^(a|a)*$` against 40 `a` and a `!` would take days: it gets a one-line verdict.
    monkeypatch.setattr(schema_sets, "PATTERN_SECONDS", 0.2)
    pattern = {"type": "string", "pattern": "^(a|a)*$"}
    folder = folder_of(tmp_path, {"type": "object", "properties": {"name": pattern}})
    status, out, err = judged(folder, tmp_path, {"name": "a" * 40 + "!"})
    assert (status, err) == (1, [])
    assert (
        out[1] == '  (document): matching the pattern "^(a|a)*$" took more than 0.2 s: not judged'
    )


def test_a_document_slow_to_judge_is_not_cut_short_by_the_limit_on_patterns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The limit is on the time spent matching: 200,000 integers take the validator far longer
    # than 0.05 s, and the pattern after them matches at once. Under a deadline on the whole
    # judging, such a document, valid, was refused in the name of the pattern that came next.
    monkeypatch.setattr(schema_sets, "PATTERN_SECONDS", 0.05)
    numbers = {"type": "array", "items": {"type": "integer", "minimum": 0}}
    name = {"type": "string", "pattern": "^a$"}
    thing = {"type": "object", "properties": {"numbers": numbers, "name": name}}
    folder = folder_of(tmp_path, thing)
    status, out, err = judged(folder, tmp_path, {"numbers": [1] * 200_000, "name": "a"})
    assert (status, out[-1], err) == (0, "1 document checked: 1 valid, 0 invalid", [])


def test_a_pattern_the_matcher_cannot_use_is_refused_in_one_line(tmp_path: Path) -> None:
    # A group that names no group: neither `re` (jsonschema's check) nor `regex` compiles it.
    pattern = {"type": "string", "pattern": "^(?P<x>a)(?P=y)$"}
    folder = folder_of(tmp_path, {"type": "object", "properties": {"name": pattern}})
    assert refused(folder, tmp_path).startswith("plancontracts: error: --schemas ")


# uniqueItems -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([{"a": 1, "b": [2]}, {"b": [2.0], "a": 1}], False),
        ([True, 1], True),
        ([False, 0, None, "0", [0], {"0": 0}], True),
        (["a", '"a"'], True),
        ([[1, 2], [2, 1]], True),
        ([{"a": "b"}, {"a": "b", "c": None}], True),
    ],
)
def test_unique_items_compares_as_json_does(items: list[Any], unique: bool) -> None:
    contracts = ContractSet({"list": {"type": "array", "uniqueItems": True}})
    problems = contracts.violations("list", items)
    assert (problems == ()) is unique, problems


def test_unique_items_over_8000_objects_compares_no_pair(monkeypatch: pytest.MonkeyPatch) -> None:
    # jsonschema compared every pair (32 million for 8,000 objects, 29 s); the
    # items are now hashed in a canonical form, once each.
    compared = 0
    equal = jsonschema._utils.equal

    def counted(one: Any, two: Any) -> bool:
        nonlocal compared
        compared += 1
        return equal(one, two)

    monkeypatch.setattr(jsonschema._utils, "equal", counted)
    contracts = ContractSet({"list": {"type": "array", "uniqueItems": True}})
    items = [{"id": n, "tags": [n, {"n": n}]} for n in range(8000)]
    assert contracts.violations("list", items) == ()
    again = {"tags": [7999.0, {"n": 7999}], "id": 7999}
    problems = contracts.violations("list", [*items, again])
    assert [str(each) for each in problems] == [
        "(document): items 7999 and 8000 are equal; items must be unique"
    ]
    assert compared == 0


# References ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "reference",
    [
        {"$dynamicRef": "http://10.255.255.1/x.json#meta"},
        {"$dynamicRef": "#meta"},
        {"$ref": "http://10.255.255.1/x.json"},
        {"$ref": "file:///etc/passwd"},
        {"$ref": "../../outside.json"},
        {"$ref": "#/$defs/nowhere"},
        {"$ref": "http://["},
    ],
)
def test_no_reference_leaves_the_folder(
    reference: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_fetching(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("fetched")

    monkeypatch.setattr(urllib.request, "urlopen", no_fetching)
    (tmp_path / "outside.json").write_text(json.dumps({"$schema": DRAFT, "type": "object"}))
    folder = folder_of(tmp_path, {"type": "object", "properties": {"x": reference}})
    assert refused(folder, tmp_path).startswith(f"plancontracts: error: --schemas {folder}: fam/")
    # `generate` reads and bundles the folder the same way.
    with pytest.raises(UnusableSchema):
        SchemaTree(folder).family_bundle("fam")


def test_the_judging_schema_retrieves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    from referencing.exceptions import Unresolvable

    def no_fetching(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("fetched")

    monkeypatch.setattr(urllib.request, "urlopen", no_fetching)
    contracts = ContractSet({"thing": {"$ref": "http://127.0.0.1:9/x.json"}})
    with pytest.raises(Unresolvable):
        contracts.violations("thing", {})


def test_definitions_named_with_slash_tilde_or_space_are_followed(tmp_path: Path) -> None:
    # RFC 6901: `~1` is `/` and `~0` is `~`; a URI fragment is percent-decoded first.
    thing = {
        "type": "object",
        "properties": {
            "slash": {"$ref": "#/$defs/a~1b"},
            "tilde": {"$ref": "#/$defs/c~0d"},
            "space": {"$ref": "#/$defs/with%20space"},
        },
        "$defs": {"a/b": {"type": "integer"}, "c~d": {"type": "null"}, "with space": {}},
    }
    folder = folder_of(tmp_path, thing)
    assert judged(folder, tmp_path, {"slash": 1, "tilde": None, "space": 0})[0] == 0
    status, out, _ = judged(folder, tmp_path, {"slash": "x", "tilde": 0})
    assert status == 1
    assert out[1:3] == [
        '  /slash: expected an integer, got the string "x"',
        "  /tilde: expected null, got an integer",
    ]


# Hostile files ---------------------------------------------------------------------------


def test_a_schema_nesting_deeply_is_refused_in_one_line(tmp_path: Path) -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(150):
        deep = {"not": deep}
    folder = folder_of(tmp_path, {"type": "object", "properties": {"x": deep}})
    line = refused(folder, tmp_path)
    assert line.endswith(f"fam/thing.json: nests more than {MAX_SCHEMA_DEPTH} levels deep")


def test_a_schema_nesting_to_the_cap_is_judged(tmp_path: Path) -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(MAX_SCHEMA_DEPTH - 3):  # the root and `properties` are two levels
        deep = {"not": deep}
    folder = folder_of(tmp_path, {"type": "object", "properties": {"x": deep}})
    # An odd number of `not`: what is not a string is valid, and each level is judged.
    assert judged(folder, tmp_path, {"x": 1})[0] == 0
    assert judged(folder, tmp_path, {"x": "text"})[0] == 1


def test_a_symbolic_link_leaving_the_folder_is_refused_unread(tmp_path: Path) -> None:
    folder = folder_of(tmp_path, {"type": "object"})
    (folder / "zero.json").symlink_to("/dev/zero")
    assert refused(folder, tmp_path).endswith(
        "zero.json: is a symbolic link that leaves the folder"
    )


def test_a_fifo_is_refused_unopened(tmp_path: Path) -> None:
    folder = folder_of(tmp_path, {"type": "object"})
    os.mkfifo(folder / "fifo.json")
    assert refused(folder, tmp_path).endswith("fifo.json: is not a regular file (a FIFO)")


def test_a_file_over_the_cap_is_refused_unread(tmp_path: Path) -> None:
    huge = {"type": "object", "description": "x" * MAX_SCHEMA_FILE_BYTES}
    folder = folder_of(tmp_path, huge)
    line = refused(folder, tmp_path)
    assert line.endswith(f"fam/thing.json: holds more than {MAX_SCHEMA_FILE_BYTES} bytes")


# Hostile patterns and numbers ------------------------------------------------------------


@pytest.mark.parametrize(
    "thing",
    [
        {"type": "string", "pattern": "a{4294967295}"},
        {"type": "array", "contains": {"pattern": "a{4294967295}"}},
        {"type": "object", "patternProperties": {"^x{4294967295}$": {}}},
    ],
    ids=["pattern", "inside contains", "patternProperties"],
)
def test_a_repeat_count_past_what_re_holds_is_refused_in_one_line(
    thing: dict[str, Any], tmp_path: Path
) -> None:
    # `re` raised OverflowError inside jsonschema's check of the schema: a traceback.
    folder = folder_of(tmp_path, thing)
    line = refused(folder, tmp_path)
    assert line.startswith(f"plancontracts: error: --schemas {folder}: fam/thing.json#/")
    assert f"may come to at most {MAX_PATTERN_SIZE:,} characters" in line
    out = tmp_path / "kitchen" / "models"
    done = cli(
        "generate", "--schemas", str(folder), "--out", str(out), "--package", "kitchen.models"
    )
    assert (done.returncode, done.stdout, len(done.stderr.splitlines())) == (2, "", 1)
    assert f"may come to at most {MAX_PATTERN_SIZE:,} characters" in done.stderr


@pytest.mark.parametrize(
    "pattern", ["a{10001}", "^(a{101}){100}$", "((a{1000}){1000}){1000}", "(?:ab){0,5001}"]
)
def test_a_pattern_that_repeats_past_the_cap_is_refused_uncompiled(
    pattern: str, tmp_path: Path
) -> None:
    # `regex` writes repeats out when compiling: `a{10000000}` took 2 GB, these more.
    folder = folder_of(tmp_path, {"type": "string", "pattern": pattern})
    assert refused(folder, tmp_path).endswith(
        f"fam/thing.json#/pattern: the pattern {pattern!r} repeats too much: written out, "
        f"a pattern may come to at most {MAX_PATTERN_SIZE:,} characters, classes and groups"
    )


def test_a_pattern_that_repeats_to_the_cap_is_judged(tmp_path: Path) -> None:
    folder = folder_of(tmp_path, {"type": "string", "pattern": "^a{9998}$"})
    assert judged(folder, tmp_path, "a" * 9998)[0] == 0
    assert judged(folder, tmp_path, "a" * 9997)[0] == 1


def test_the_folder_s_patterns_are_capped_together(tmp_path: Path) -> None:
    # Each one under the cap, but the matcher keeps 512 compiled patterns at once.
    count = MAX_FOLDER_PATTERN_SIZE // MAX_PATTERN_SIZE + 1
    properties = {f"p{n}": {"type": "string", "pattern": f"^{n}a{{9990}}"} for n in range(count)}
    folder = folder_of(tmp_path, {"type": "object", "properties": properties})
    assert refused(folder, tmp_path).endswith(
        "the folder's patterns repeat too much together: written out, they may come to at "
        f"most {MAX_FOLDER_PATTERN_SIZE:,} characters, classes and groups"
    )


def test_a_folder_of_too_many_patterns_is_refused(tmp_path: Path) -> None:
    # 90,000 patternProperties took 42 s per document, then blamed a harmless pattern.
    named = {f"^k{n}$": {"type": "integer"} for n in range(MAX_FOLDER_PATTERNS + 1)}
    folder = folder_of(tmp_path, {"type": "object", "patternProperties": named})
    assert refused(folder, tmp_path).endswith(
        f"#/patternProperties/^k{MAX_FOLDER_PATTERNS}$: a schema folder may hold at most "
        f"{MAX_FOLDER_PATTERNS:,} different patterns"
    )


def test_groups_nested_past_what_re_reads_are_refused_in_one_line(tmp_path: Path) -> None:
    pattern = "(" * 5000 + "a" + ")" * 5000
    folder = folder_of(tmp_path, {"type": "string", "pattern": pattern})
    assert refused(folder, tmp_path).endswith("nests its groups too deeply to be read")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"const": ' + "9" * 5000 + "}", "an integer of 5000 digits; at most 4300 are read"),
        ('{"const": -' + "9" * 5000 + "}", "an integer of 5000 digits; at most 4300 are read"),
        ('{"const": NaN}', "cannot read as JSON: NaN is not a JSON number"),
        ('{"enum": [Infinity]}', "cannot read as JSON: Infinity is not a JSON number"),
        ('{"const": -Infinity}', "cannot read as JSON: -Infinity is not a JSON number"),
        ('{"const": 1e400}', "the number 1e400 is too large for a float"),
        ('{"type": "string", "type": "integer"}', "the key 'type' is written twice in one object"),
    ],
    ids=["long integer", "long negative", "NaN", "Infinity", "-Infinity", "1e400", "twice"],
)
def test_a_schema_file_that_is_not_strict_json_is_refused_in_one_line(
    text: str, message: str, tmp_path: Path
) -> None:
    # Python's json took NaN and Infinity, which `generate` copied into schemas/*.json, kept
    # the last of two keys, and raised ValueError past 4,300 digits.
    body = text.removeprefix("{").removesuffix("}")
    head = f'"$schema": "{DRAFT}", "$id": "https://example.org/lib.json"'
    folder = folder_of(tmp_path, {"type": "object"}, **{"lib.json": f"{{{head}, {body}}}"})
    assert refused(folder, tmp_path).endswith(f"--schemas {folder}: lib.json: {message}")


# $id ------------------------------------------------------------------------------------


def test_an_id_inside_a_schema_is_the_base_of_its_references(tmp_path: Path) -> None:
    # Its `$ref` means other/x.json (an integer): bundling once followed fam/x.json (a string).
    folder = folder_of(
        tmp_path,
        {"type": "object", "properties": {"a": {"$id": "https://ex.org/other/", "$ref": "x.json"}}},
    )
    (folder / "lib").mkdir()
    for name, kind in (("fam", "string"), ("other", "integer")):
        text = json.dumps(
            {
                "$schema": DRAFT,
                "$id": f"https://ex.org/{name}/x.json",
                "$defs": {"x": {"type": kind}},
                "$ref": "#/$defs/x",
            }
        )
        (folder / "lib" / f"{name}.json").write_text(text, encoding="utf-8")
    thing = json.loads((folder / "fam" / "thing.json").read_text())
    thing["$id"] = "https://ex.org/fam/thing.json"
    (folder / "fam" / "thing.json").write_text(json.dumps(thing), encoding="utf-8")
    assert judged(folder, tmp_path, {"a": 1})[0] == 0
    status, out, _ = judged(folder, tmp_path, {"a": "one"})
    assert (status, out[1]) == (1, '  /a: expected an integer, got the string "one"')


@pytest.mark.parametrize("uri", ["urn:example:thing", "https://example.org/thing.json#"])
def test_a_fragment_reference_resolves_whatever_the_id(uri: str, tmp_path: Path) -> None:
    thing = {
        "$id": uri,
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/s"}},
        "$defs": {"s": {"type": "string"}},
    }
    folder = folder_of(tmp_path, thing)
    assert judged(folder, tmp_path, {"a": "x"})[0] == 0
    status, out, _ = judged(folder, tmp_path, {"a": 5})
    assert (status, out[1]) == (1, "  /a: expected a string, got an integer")
