"""Reading JSON as it is written: `PartialJSON` and `prefix_violations` (runtime/core/partial.py).

Each partial value is the value of the longest complete prefix of the text
read: closed strings, numbers with a character after them, whole literals,
and containers as soon as they open. The parser is as strict as the
project's strict parser, and says so at the piece that holds the fault, in
one line with its offset. The properties: for documents of every bundled
contract and for any JSON value, cut into pieces at random or fed one
character at a time, every partial is a prefix of the final value, no
partial breaks the contract except for what is still missing, and the final
value is the parsed document.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from schema_strategies import valid_documents
from tiers import examples_at_most

from plancontracts import (
    PLAN,
    ContractError,
    MalformedJSON,
    UnknownContractError,
    contract_names,
    contract_schema,
    convert,
    decode,
    load_contracts,
    violations,
)
from plancontracts.runtime.core.jsontext import TOO_DEEP, TOO_LARGE, copy_json, parse
from plancontracts.runtime.core.partial import MISSING, PartialJSON, prefix_violations

# The largest documents: even the fast tier's thirty of each take seconds, one character at a time.
LARGEST = {"story-draft", "story-package"}


# Helpers --------------------------------------------------------------------------------


def same(one: Any, two: Any) -> bool:
    """Whether two JSON values are equal with the same types throughout (1, 1.0 and True differ)."""
    if type(one) is not type(two):
        return False
    if isinstance(one, dict):
        return list(one) == list(two) and all(same(one[key], two[key]) for key in one)
    if isinstance(one, list):
        return len(one) == len(two) and all(map(same, one, two))
    return bool(one == two)


def is_prefix(partial: Any, final: Any) -> bool:
    """Whether `partial` is a prefix of the JSON value `final`.

    `MISSING` is a prefix of everything. An object is a prefix when its keys
    are the first keys of `final`'s, in order, each with the same value but
    the last, whose value is a prefix of `final`'s; an array likewise, with
    its items. A scalar is a prefix only of itself (strings and numbers
    appear whole).
    """
    if partial is MISSING:
        return True
    if type(partial) is not type(final):
        return False
    if isinstance(partial, dict):
        keys, final_keys = list(partial), list(final)
        if keys != final_keys[: len(keys)]:
            return False
        earlier = all(same(partial[key], final[key]) for key in keys[:-1])
        return earlier and (not keys or is_prefix(partial[keys[-1]], final[keys[-1]]))
    if isinstance(partial, list):
        if len(partial) > len(final):
            return False
        earlier = all(map(same, partial[:-1], final))
        return earlier and (not partial or is_prefix(partial[-1], final[len(partial) - 1]))
    return same(partial, final)


def pieces(text: str, seed: int, longest: int = 24) -> list[str]:
    """`text` cut at random into pieces of 1 to `longest` characters."""
    chosen = random.Random(seed)
    cut, at = [], 0
    while at < len(text):
        size = chosen.randint(1, longest)
        cut.append(text[at : at + size])
        at += size
    return cut


def partials(parts: list[str]) -> tuple[list[Any], Any]:
    """Each value `PartialJSON` shows as `parts` are fed (copied when it changes), and the end."""
    parser = PartialJSON()
    seen = [copy_json(parser.value) for part in parts if parser.feed(part)]
    return seen, parser.finish()


def refusal(parts: list[str]) -> MalformedJSON:
    """What `PartialJSON` raises as `parts` are fed; AssertionError if it reads them all."""
    parser = PartialJSON()
    try:
        for part in parts:
            parser.feed(part)
    except MalformedJSON as error:
        return error
    raise AssertionError("the text was read without a fault")


def fed(text: str) -> PartialJSON:
    parser = PartialJSON()
    for character in text:
        parser.feed(character)
    return parser


# The value of the longest complete prefix -------------------------------------------------


def test_nothing_is_there_before_a_value_begins() -> None:
    parser = PartialJSON()
    assert parser.value is MISSING
    assert repr(MISSING) == "MISSING"
    assert parser.feed("") is False
    assert parser.feed(" \n\t") is False
    assert parser.value is MISSING
    assert parser.complete(()) is False
    assert parser.feed("{") is True
    assert parser.value == {}


def test_values_appear_as_they_complete() -> None:
    text = '{"name": "Ada", "tags": ["x", 12], "age": 36, "ok": true, "none": null}'
    seen, final = partials(list(text))
    assert seen == [
        {},
        {"name": "Ada"},
        {"name": "Ada", "tags": []},
        {"name": "Ada", "tags": ["x"]},
        {"name": "Ada", "tags": ["x", 12]},  # 12 ends as the array closes
        {"name": "Ada", "tags": ["x", 12], "age": 36},
        {"name": "Ada", "tags": ["x", 12], "age": 36, "ok": True},
        {"name": "Ada", "tags": ["x", 12], "age": 36, "ok": True, "none": None},
        {"name": "Ada", "tags": ["x", 12], "age": 36, "ok": True, "none": None},  # closed
    ]
    assert same(final, json.loads(text))


def test_a_number_is_there_only_once_a_character_follows_it() -> None:
    parser = PartialJSON()
    parser.feed("[12")
    assert parser.value == []
    assert parser.feed("3") is False
    assert parser.value == []
    assert parser.feed(".5e1") is False
    assert parser.feed(" ") is True
    assert same(parser.value, [123.5e1])
    for text, number in (("12", 12), ("-0", 0), ("-0.0", -0.0), ("1E2", 100.0), ("0.5", 0.5)):
        root = fed(text)
        assert root.value is MISSING  # the text may go on: `12` may become `123`
        assert same(root.finish(), number)
        assert same(fed(text + " ").value, number)


def test_a_literal_is_there_once_whole() -> None:
    parser = PartialJSON()
    parser.feed("[tr")
    assert parser.value == []
    parser.feed("ue, fals")
    assert parser.value == [True]
    parser.feed("e, nul")
    assert parser.value == [True, False]
    parser.feed("l")
    assert parser.value == [True, False, None]
    assert fed("true").value is True  # at the root too: no character can follow it


def test_a_string_is_there_only_once_closed() -> None:
    parser = PartialJSON()
    parser.feed('{"key": "a long')
    assert parser.value == {}
    parser.feed(" text")
    assert parser.value == {}
    parser.feed('"')
    assert parser.value == {"key": "a long text"}


def test_a_key_is_there_once_its_value_is() -> None:
    parser = PartialJSON()
    parser.feed('{"a": 1, "b')
    assert parser.value == {"a": 1}
    parser.feed('": ')
    assert parser.value == {"a": 1}
    parser.feed("[")
    assert parser.value == {"a": 1, "b": []}
    parser.feed('{"c": {')
    assert parser.value == {"a": 1, "b": [{"c": {}}]}


@pytest.mark.parametrize(
    ("text", "string"),
    [
        (r'"a\nb\"c\\d\/e\tf\bg\fh\ri"', 'a\nb"c\\d/e\tf\bg\fh\ri'),
        (r'"caf\u00e9 \u00E9"', "café é"),
        (r'"\ud83d\ude00 and \uD83D\uDE00"', "\U0001f600 and \U0001f600"),
        ('"\U0001f600 and é written as they are"', "\U0001f600 and é written as they are"),
    ],
)
def test_a_string_cut_anywhere_reads_the_same(text: str, string: str) -> None:
    # Every cut: mid-escape, between the halves of a surrogate pair, inside either half.
    for cut in range(len(text) + 1):
        parser = PartialJSON()
        parser.feed(text[:cut])
        parser.feed(text[cut:])
        assert parser.finish() == string, cut
    assert fed(text).finish() == string


def test_complete_tells_what_is_closed() -> None:
    parser = PartialJSON()
    parser.feed('{"a": [1, {"b": "x"}, [2')
    assert not parser.complete(())
    assert not parser.complete(("a",))
    assert parser.complete(("a", 0))
    assert parser.complete(("a", 1))
    assert parser.complete(("a", 1, "b"))
    assert not parser.complete(("a", 2))
    assert not parser.complete(("a", 2, 0))  # 2 is there once a character follows it
    # Paths that are not there (yet): a missing key or index, a key into an array, or
    # into a scalar, a bool for an index, a negative index.
    for path in (("z",), ("a", 3), ("a", "0"), ("a", 0, 0), ("a", True), ("a", -1), (0,)):
        assert not parser.complete(path), path
    parser.feed("]]")
    assert parser.complete(("a", 2))
    assert parser.complete(("a",))
    assert not parser.complete(())
    parser.feed("}")
    assert parser.complete(())
    assert not PartialJSON().complete(())


def test_a_scalar_document_is_complete_once_there() -> None:
    parser = fed('"text"')
    assert parser.complete(())
    assert parser.value == "text"


# Strictness: the fault, at the piece that holds it, in one line ------------------------

# Text, the index of the character where it stops being JSON, and what the message says.
FAULTS = [
    ('{"a": 1, "a": 2}', 11, 'duplicate key "a" in one object'),
    ('{"a": {"b": [{"c": 1, "c": 2}]}}', 24, 'duplicate key "c"'),
    ("[1e400]", 6, TOO_LARGE),
    ("[-1e400]", 7, TOO_LARGE),
    ("[" + "9" * 4301 + "]", 4302, TOO_LARGE),
    ("[-" + "9" * 4300 + "]", 4302, TOO_LARGE),
    ('["\\ud800"]', 8, "half of a UTF-16 surrogate pair"),
    ('["\\ud800\\n"]', 9, "half of a UTF-16 surrogate pair"),
    ('["\\ud800\\u0041"]', 13, "half of a UTF-16 surrogate pair"),
    ('["\\udc00"]', 7, "half of a UTF-16 surrogate pair"),
    ('["\\x"]', 3, "invalid escape \\x in a string"),
    ('["\\u12G4"]', 6, "expected 4 hexadecimal digits"),
    ('["a\nb"]', 3, "control character U+000A in a string"),
    ('["a\x00b"]', 3, "control character U+0000"),
    ('["a\ud800b"]', 3, "lone surrogate U+D800"),
    ("[01]", 2, 'unexpected "1"'),
    ("[1.]", 3, 'expected a digit, got "]"'),
    ("[1.e5]", 3, 'expected a digit, got "e"'),
    ("[-]", 2, "expected a digit"),
    ("[+1]", 1, 'expected a value, got "+"'),
    ("[.5]", 1, "expected a value"),
    ("[1e]", 3, "expected a digit"),
    ("[trux]", 4, 'expected "true", got "x"'),
    ("[nul]", 4, 'expected "null", got "]"'),
    ("[NaN]", 1, "expected a value"),
    ("[Infinity]", 1, "expected a value"),
    ("[1,]", 3, 'expected a value, got "]"'),
    ('{"a": 1,}', 8, 'expected a key, got "}"'),
    ("{1: 2}", 1, 'expected a key or "}"'),
    ('{"a" 1}', 5, 'expected ":"'),
    ("[1 2]", 3, 'expected "," or "]"'),
    ('{"a": 1]', 7, 'expected "," or "}"'),
    ("[1}", 2, 'expected "," or "]"'),
    ("{} {}", 3, "expected the end of the text after the document"),
    ("1 2", 2, "expected the end of the text"),
    ("\ufeff{}", 0, "expected a value"),
    ("'a'", 0, "expected a value"),
]


@pytest.mark.parametrize(("text", "at", "problem"), FAULTS)
def test_a_fault_is_refused_at_the_piece_that_reads_it(text: str, at: int, problem: str) -> None:
    parser = PartialJSON()
    for character in text[:at]:
        parser.feed(character)  # everything before the fault is read without a word
    with pytest.raises(MalformedJSON) as raised:
        parser.feed(text[at:])
    message = str(raised.value)
    assert problem in message
    # Where it says: the fault's character; where the value at fault began, for a
    # duplicate key (its opening quote) and a number (its first character).
    where = at
    if problem.startswith("duplicate"):
        where = text.rindex('"', 0, at)
    elif problem == TOO_LARGE:
        where = 1
    assert f"(character {where})" in message
    assert "\n" not in message
    assert message.isprintable()
    assert raised.value.offset == len(text[:where].encode("utf-8", "surrogatepass"))
    # The parser stays refused: it does not read on past a fault.
    with pytest.raises(MalformedJSON, match="character"):
        parser.feed("")
    with pytest.raises(MalformedJSON):
        parser.finish()
    # The same text at once is refused alike, and the strict parser refuses it too.
    with pytest.raises(MalformedJSON, match=f"character {where}"):
        PartialJSON().feed(text)
    with pytest.raises(MalformedJSON):
        parse(text.encode("utf-8", "surrogatepass"))


def test_a_duplicate_key_names_its_place_and_byte() -> None:
    text = '{"é": [{"ü": 1, "ü": 2}]}'
    for parts in ([text], list(text)):
        refused = refusal(parts)
        assert refused.pointer == "/é/0/ü"
        assert "(character 16)" in str(refused)
        assert refused.offset == len(text[:16].encode())


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty document: expected a JSON value (character 0)"),
        ("  \n ", "empty document"),
        ("[1, 2", "the text ends inside a value (character 5)"),
        ('{"a": "b', "ends inside a value"),
        ('"\\u00', "ends inside a value"),
        ("tru", "ends inside a value"),
        ("-", "expected a digit, got the end of the text"),
        ("1.", "expected a digit"),
    ],
)
def test_finish_refuses_text_that_is_not_one_whole_value(text: str, problem: str) -> None:
    parser = fed(text)
    with pytest.raises(MalformedJSON, match=r"^malformed JSON: ") as raised:
        parser.finish()
    assert problem in str(raised.value)


def test_numbers_are_read_as_msgspec_reads_them() -> None:
    texts = ["0", "-0", "-0.0", "1e-400", "1.5E+3", "9" * 4300, "-" + "9" * 4299, "1e308", "0.1"]
    texts += ["18446744073709551616", "-9223372036854775809", "0." + "0" * 500 + "1"]
    for text in texts:
        assert same(fed(text + " ").value, msgspec.json.decode(text)), text


def test_nesting_past_the_strict_parsers_limit_is_refused() -> None:
    deep = "[" * 5000
    parser = PartialJSON()
    with pytest.raises(MalformedJSON, match=TOO_DEEP.replace("(", r"\(").replace(")", r"\)")):
        parser.feed(deep)
    shallow = "[" * 400 + "]" * 400
    assert PartialJSON().feed(shallow)
    assert fed(shallow).finish() == parse(shallow.encode())


def test_a_long_string_fed_a_character_at_a_time_reads_whole() -> None:
    # 100,000 characters of one string, fed one at a time, kept as pieces and joined once.
    parser = PartialJSON()
    parser.feed('["')
    for _ in range(100_000):
        parser.feed("abcdefghij"[_ % 10])
    parser.feed('"]')
    assert parser.finish() == ["abcdefghij" * 10_000]


# The properties ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "contract",
    [
        pytest.param(name, marks=pytest.mark.slow if name in LARGEST else ())
        for name in contract_names()
    ],
)
def test_every_partial_of_a_contracts_document_is_a_prefix_it_accepts(contract: str) -> None:
    schema = contract_schema(contract)
    drawn = {"documents": 0}
    # The largest documents have thousands of partials, each judged whole: fewer of them.
    most = examples_at_most(40 if contract in LARGEST else 200)

    @settings(max_examples=most)
    @given(document=valid_documents(schema), seed=st.integers(0, 2**32))
    def check(document: Any, seed: int) -> None:
        text = msgspec.json.encode(document).decode()
        final = msgspec.json.decode(text)
        seen, finished = partials(pieces(text, seed))
        assert same(finished, final)
        for partial in seen:
            assert is_prefix(partial, final), partial
            assert not prefix_violations(contract, partial), partial
        # One character at a time: the same values, every one a prefix.
        one_by_one, finished = partials(list(text))
        assert same(finished, final)
        assert all(is_prefix(partial, final) for partial in one_by_one)
        assert one_by_one[-1] == final
        # The final value is the document `decode` reads from the text (typed).
        try:
            typed = decode(contract, text)
        except ContractError as error:  # by the family's rules beyond the schema
            refused: ContractError | None = error
        else:
            refused = None
            assert convert(contract, finished) == typed
        if refused is not None:
            with pytest.raises(ContractError) as again:
                convert(contract, finished)
            assert again.value.violations == refused.violations
        drawn["documents"] += 1

    check()
    assert drawn["documents"] >= most


JSON_TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from('"\\/\b\f\n\r\t\x00\x1f'))


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=5) | st.dictionaries(JSON_TEXT, inner, max_size=5)


ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | JSON_TEXT,
    containers,
    max_leaves=30,
)


@given(
    value=ANY_JSON,
    seed=st.integers(0, 2**32),
    ascii_only=st.booleans(),
    indent=st.sampled_from([None, 0, 2]),
)
def test_any_json_value_cut_anywhere_reads_back_as_written(
    value: Any, seed: int, ascii_only: bool, indent: int | None
) -> None:
    # ensure_ascii writes characters past the BMP as surrogate pairs of \u escapes.
    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    expected = json.loads(text)
    for longest in (1, 3, 40):
        seen, finished = partials(pieces(text, seed, longest))
        assert same(finished, expected)
        assert all(is_prefix(partial, expected) for partial in seen)
    assert same(fed(text).finish(), msgspec.json.decode(text))


# prefix_violations: what is there must be right, what may still come is not asked for ----

RELAXED: dict[str, tuple[dict[str, Any], Any, Any]] = {
    "required": ({"type": "object", "required": ["a", "b"]}, {}, {"a": 1, "b": 2}),
    "minItems": ({"type": "array", "minItems": 3}, [1], [1, 2, 3]),
    "minProperties": ({"type": "object", "minProperties": 2}, {"a": 1}, {"a": 1, "b": 2}),
    "contains": (
        {"type": "array", "contains": {"const": 5}, "minContains": 2},
        [1, 5],
        [1, 5, 5],
    ),
    "dependentRequired": (
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        {"a": 1},
        {"a": 1, "b": 2},
    ),
    "dependentSchemas": (
        {"type": "object", "dependentSchemas": {"a": {"required": ["b"]}}},
        {"a": 1},
        {"a": 1, "b": 2},
    ),
    "const on an object": ({"const": {"a": 1, "b": [2]}}, {"a": 1, "b": []}, {"a": 1, "b": [2]}),
    "enum on an array": ({"enum": [[1, 2], "x"]}, [1], [1, 2]),
    "not": ({"type": "array", "not": {"maxItems": 1}}, [1], [1, 2]),
    "oneOf": (
        {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        {},
        {"a": 1},
    ),
    "if/then/else": (
        {"if": {"required": ["kind"]}, "then": {"required": ["x"]}, "else": {"minProperties": 3}},
        {"y": 1},
        {"y": 1, "z": 2, "w": 3},
    ),
    "uniqueItems": ({"type": "array", "uniqueItems": True}, [[1], [1]], [[1], [1, 2]]),
    "nested": (
        {
            "type": "object",
            "properties": {"items": {"type": "array", "items": {"$ref": "#/$defs/item"}}},
            "required": ["items"],
            "$defs": {"item": {"type": "object", "required": ["id"], "minProperties": 2}},
        },
        {"items": [{"id": 1, "n": 2}, {}]},
        {"items": [{"id": 1, "n": 2}, {"id": 2, "n": 3}]},
    ),
}


@pytest.mark.parametrize("case", list(RELAXED))
def test_what_may_still_come_is_not_asked_for(tmp_path: Path, case: str) -> None:
    schema, partial, whole = RELAXED[case]
    contract = user_contract(tmp_path, schema)
    assert not violations(contract, whole)
    assert violations(contract, partial)  # as a whole document, it is refused
    assert not prefix_violations(contract, partial)
    assert is_prefix(partial, whole)


# A value that breaks each of these will be refused however the text goes on.
KEPT: dict[str, tuple[dict[str, Any], Any]] = {
    "type": ({"type": "object"}, []),
    "a property's type": ({"properties": {"a": {"type": "string"}}}, {"a": 1}),
    "maxItems": ({"maxItems": 1}, [1, 2]),
    "maxProperties": ({"maxProperties": 1}, {"a": 1, "b": 2}),
    "additionalProperties": ({"properties": {"a": {}}, "additionalProperties": False}, {"b": 1}),
    "pattern": ({"properties": {"a": {"pattern": "^x"}}}, {"a": "y"}),
    "maxLength": ({"items": {"maxLength": 2}}, ["abc"]),
    "minLength": ({"items": {"minLength": 2}}, ["a"]),
    "minimum": ({"items": {"minimum": 2}}, [1]),
    "const on a scalar": ({"properties": {"kind": {"const": "a"}}}, {"kind": "b"}),
    "enum on a scalar": ({"items": {"enum": [1, 2]}}, [3]),
    "oneOf where no branch holds": ({"oneOf": [{"type": "array"}, {"type": "string"}]}, {}),
    "if and then break, else breaks": (
        {"if": {"type": "array"}, "then": {"maxItems": 1}, "else": {"type": "string"}},
        [1, 2],
    ),
    "uniqueItems among complete items": ({"uniqueItems": True}, [[1], [1], 2]),
    "propertyNames": ({"propertyNames": {"maxLength": 1}}, {"ab": 1}),
}


@pytest.mark.parametrize("case", list(KEPT))
def test_what_is_there_must_already_be_right(tmp_path: Path, case: str) -> None:
    schema, partial = KEPT[case]
    found = prefix_violations(user_contract(tmp_path, schema), partial)
    assert found
    assert all(str(violation).count("\n") == 0 for violation in found)


def test_prefix_violations_takes_every_kind_of_contract() -> None:
    partial = {"requestId": "not a uuid", "tools": [{}]}
    for contract in (PLAN, "plan"):
        found = prefix_violations(contract, partial)
        assert [violation.pointer for violation in found] == ["/requestId"]
    assert prefix_violations(PLAN, MISSING) == ()
    nothing_yet: list[Any] = [MISSING, {}]
    for value in nothing_yet:
        with pytest.raises(UnknownContractError, match="plans"):
            prefix_violations("plans", value)
    assert prefix_violations(PLAN, {"tools": [{"toolId": "t1"}]}) == ()


def user_contract(folder: Path, schema: dict[str, Any]) -> Any:
    path = folder / "thing.json"
    path.write_text(
        json.dumps({"$schema": "https://json-schema.org/draft/2020-12/schema", **schema})
    )
    return load_contracts(path)["thing"]
