"""The optional native fast path, plancontracts_fast: scan, Dfa and check.

`scan` may only ever be more cautious than the strict Python parser: when it
says True, `parse` must accept the text and give the same value; False is
always allowed ("not sure"). The tables below pin each of its rules from
both sides, and properties compare it with the parser on generated JSON and
on arbitrary bytes. `Dfa` is compared with hand-written expectations and
`re`; `check` is run on msgspec Structs along each kind of node.

Skipped when the extension is not installed (`pip install ./native`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

import plancontracts
from plancontracts.runtime.core.errors import MalformedJSON
from plancontracts.runtime.core.jsontext import TOO_DEEP, parse

pytest.importorskip("plancontracts_fast")
import plancontracts_fast as native  # only once it is known to be installed
from plancontracts_fast import Dfa, check, scan

TESTS = Path(__file__).resolve().parent
CRASHES = TESTS / "fuzz_crashes"
DEPTH = 1000
"The depth the differential tests scan with; the parser's own limit is a little under it."


def nested(depth: int) -> bytes:
    """`depth` arrays, one in another."""
    return b"[" * depth + b"]" * depth


ACCEPTED = [
    b"0",
    b"-0",
    b"0.0e0",
    b"-0.0E-0",
    b"1e308",
    b"-1.7976931348623157e308",
    b"1e-400",  # underflows to 0.0: finite, and the parser takes it so
    b"123456789012345678",
    b"-123456789012345678",
    b"1E+2",
    b"true",
    b"false",
    b"null",
    b'""',
    b" \t\r\n[ 1 , 2 ]\n",
    b'"\\ud83d\\ude00"',
    b'"\\uD83D\\uDE00"',
    b'"\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0000 \\uffff"',
    '"😀 é ꯍ"'.encode(),
    b'"\xf4\x8f\xbf\xbf"',  # U+10FFFF
    b'"\xed\x9f\xbf"',  # U+D7FF, just below the surrogates
    b"{}",
    b"[]",
    b'{"a":1,"b":{"a":2}}',
    b'{"a":[{"a":1},{"a":2}],"b":null}',
    b'{"\xc3\xa9":1,"e":2}',
    b"[[[[]]]]",
]

REFUSED = [
    b"",
    b" \n",
    b"\xef\xbb\xbf1",  # a byte order mark
    b"[1,]",
    b'{"a":1,}',
    b"[1 2]",
    b'{"a" 1}',
    b'{"a":1 "b":2}',
    b"{1:2}",
    b"1 2",
    b"01",
    b"-",
    b"1.",
    b".5",
    b"1e",
    b"1e+",
    b"+1",
    b"0x10",
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e309",
    b"-1e309",
    b"1234567890123456789",  # 19 digits: left to the slow path
    b"0." + b"1" * 64,  # a non-integer over 64 characters: left to the slow path
    b"tru",
    b"nul",
    b"True",
    b'"abc',
    b'"\x01"',
    b'"\x1f"',
    b'"\t"',
    b'"\\x41"',
    b'"\\u12"',
    b'"\\u12g4"',
    b'"\\ud83d"',
    b'"\\ud83d\\u0041"',
    b'"\\ud83dx"',
    b'"\\udc00"',
    b'"\\ude00\\ud83d"',
    b'"\xed\xa0\x80"',  # an encoded surrogate
    b'"\xc0\xaf"',  # overlong
    b'"\xe0\x80\xaf"',  # overlong
    b'"\xf0\x80\x80\xaf"',  # overlong
    b'"\xf4\x90\x80\x80"',  # above U+10FFFF
    b'"\xf5\x80\x80\x80"',
    b'"\xff"',
    b'"\x80"',
    b'"\xc3"',  # truncated
    b'"\xf0\x9f\x98"',  # truncated
    b"\xf0\x9f\x98\x80",  # UTF-8 outside a string
    b'{"a":1,"a":2}',
    b'{"a":{},"b":1,"a":[]}',
    b'{"a":1,"\\u0061":2}',
    b'{"\\u0061":1}',  # an escaped key: left to the slow path
    b"[1]]",
    b"[[1]",
    b"]",
    b"{",
    b'{"a"}',
    b"[1,\x00]",
    b"\x0b1",  # a vertical tab is not JSON's whitespace
    b"1\x0c",
]


@pytest.mark.parametrize("text", ACCEPTED, ids=repr)
def test_scan_accepts(text: bytes) -> None:
    assert scan(text, 10)
    assert parse(text) == msgspec.json.decode(text)


@pytest.mark.parametrize("text", REFUSED, ids=repr)
def test_scan_refuses(text: bytes) -> None:
    assert not scan(text, 10)


def test_depth_counts_the_top_container_as_one() -> None:
    assert scan(nested(5), 5)
    assert not scan(nested(6), 5)
    assert scan(b'{"a":[{"b":1}]}', 3)
    assert not scan(b'{"a":[{"b":1}]}', 2)
    assert scan(b"1", 1)
    assert scan(nested(10000), 10000)


def test_nesting_far_past_the_limit_is_refused_without_crashing() -> None:
    assert not scan(nested(100_000), 10000)
    assert not scan(b"[" * 100_000, 10000)
    assert not scan(b'{"a":' * 100_000, 10000)


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ((b"1", 0), ValueError),
        ((b"1", 10001), ValueError),
        ((b"1", -1), ValueError),
        ((b"1", 1 << 80), ValueError),
        (("1", 10), TypeError),
        ((bytearray(b"1"), 10), TypeError),
        ((memoryview(b"1"), 10), TypeError),
        ((b"1", 1.0), TypeError),
        ((b"1",), TypeError),
    ],
)
def test_scan_refuses_bad_arguments(arguments: tuple[Any, ...], error: type[Exception]) -> None:
    with pytest.raises(error):
        native.scan(*arguments)


def test_a_million_keys_scan_in_one_pass() -> None:
    keys = b",".join(b'"k%d":%d' % (n, n) for n in range(1_000_000))
    assert scan(b"{" + keys + b"}", 10)
    assert not scan(b"{" + keys + b',"k999999":0}', 10)
    assert not scan(b'{"k0":0,' + keys + b"}", 10)
    # Keys that differ only at their end, in an object nested in a large one.
    inner = b",".join(b'"%s%d":0' % (b"x" * 50, n) for n in range(20_000))
    assert scan(b'{"a":{' + inner + b'},"b":{' + inner + b"}}", 10)
    assert not scan(b'{"a":{' + inner + b"," + inner[:60] + b"}}", 10)


def test_an_object_closed_forgets_its_keys() -> None:
    many = b",".join(b'"k%d":0' % n for n in range(100))
    assert scan(b"[{" + many + b"},{" + many + b"}]", 10)
    assert scan(b'{"x":{' + many + b'},"k0":{' + many + b"}}", 10)


def test_long_strings_scan() -> None:
    assert scan(b'"' + b"a" * (2 << 20) + b'"', 10)
    assert scan(b'"' + "é😀a".encode() * (1 << 18) + b'"', 10)
    assert scan(b'["' + b"\\n\\ud83d\\ude00" * (1 << 17) + b'"]', 10)
    assert not scan(b'"' + b"a" * (2 << 20) + b"\xed\xa0\x80" + b'"', 10)
    assert not scan(b'"' + b"a" * (2 << 20), 10)


def test_scans_without_the_lock_run_side_by_side() -> None:
    # Over 64 KiB the scan releases the GIL: threads scan at once.
    good = b"[" + b",".join(b'{"k%d":"v"}' % n for n in range(20_000)) + b"]"
    bad = good[:-1] + b',{"a":1,"a":2}]'
    with ThreadPoolExecutor(4) as pool:
        verdicts = list(pool.map(lambda text: scan(text, 10), [good, bad] * 8))
    assert verdicts == [True, False] * 8


def test_a_text_cut_anywhere_is_never_wrongly_accepted() -> None:
    text = '{"a":[1,-2.5e3,true,null,"é\\u00e9\\ud83d\\ude00😀"],"b":{}}'.encode()
    assert scan(text, 10)
    for end in range(len(text)):
        assert_no_wrong_acceptance(text[:end])


def assert_no_wrong_acceptance(data: bytes) -> None:
    """When scan accepts `data`, the parser does too, unless it is too deep for the parser.

    The parser's nesting limit is Python's recursion limit less the frames of
    its caller, a little under DEPTH: a text scan accepts may nest more
    deeply than the parser can go at the moment.
    """
    if scan(data, DEPTH):
        try:
            parse(data)
        except MalformedJSON as error:
            if error.message != TOO_DEEP:
                pytest.fail(
                    f"scan accepted {data[:200]!r}, which the parser refuses: {error.message}"
                )


@pytest.mark.parametrize("path", sorted(CRASHES.iterdir()), ids=lambda path: path.name)
def test_inputs_the_fuzzer_kept_are_judged(path: Path) -> None:
    assert_no_wrong_acceptance(path.read_bytes())


def test_the_fuzzers_regression_folder_is_not_empty() -> None:
    assert any(CRASHES.iterdir())


# Generated JSON -------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=30,
)


def plainly_scannable(value: Any) -> bool:
    """Whether scan must accept `value` written by json.dumps(ensure_ascii=False).

    It may refuse only what it leaves to the slow path on purpose: integers
    over 18 digits and keys written with an escape.
    """
    if isinstance(value, bool) or value is None:
        return True
    if isinstance(value, int):
        return len(str(abs(value))) <= 18
    if isinstance(value, list):
        return all(plainly_scannable(item) for item in value)
    if isinstance(value, dict):
        return all(
            json.dumps(key, ensure_ascii=False) == f'"{key}"' and plainly_scannable(item)
            for key, item in value.items()
        )
    return True


@given(JSON_VALUES, st.booleans())
def test_scan_agrees_with_the_parser_on_json(value: Any, ascii_only: bool) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    if scan(data, DEPTH):
        assert parse(data) == msgspec.json.decode(data) == value
    else:
        assert ascii_only or not plainly_scannable(value)


@given(JSON_VALUES)
def test_scan_refuses_a_duplicated_key(value: Any) -> None:
    member = json.dumps(value).encode()
    data = b'{"k":' + member + b',"o":{"k":1},"k":' + member + b"}"
    assert not scan(data, DEPTH)


def _edited(data: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    """`data` with each (kind, place, byte) edit applied: replace, insert or delete a byte."""
    text = bytearray(data)
    for kind, place, byte in edits:
        at = place % (len(text) + 1)
        if kind == 0 and at < len(text):
            text[at] = byte
        elif kind == 1:
            text.insert(at, byte)
        elif at < len(text):
            del text[at]
    return bytes(text)


EDITS = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 1 << 16), st.integers(0, 255)), max_size=4
)
NEAR_JSON = st.builds(
    _edited, JSON_VALUES.map(lambda value: json.dumps(value, ensure_ascii=False).encode()), EDITS
)


@given(st.binary() | NEAR_JSON)
def test_scan_never_accepts_what_the_parser_refuses(data: bytes) -> None:
    assert_no_wrong_acceptance(data)


# Dfa ------------------------------------------------------------------------------------------

LOWERCASE = [(ord("a"), ord("z"))]
# [a-z]+
LETTERS_DFA = Dfa([False, True], [[(*LOWERCASE[0], 1)], [(*LOWERCASE[0], 1)]])
# [^\u00a0]+
NOT_NBSP = [(0, 0x9F, 1), (0xA1, 0x10FFFF, 1)]
NOT_NBSP_DFA = Dfa([False, True], [NOT_NBSP, NOT_NBSP])


@pytest.mark.parametrize(
    ("text", "letters", "not_nbsp"),
    [
        ("", False, False),
        ("abc", True, True),
        ("abC", False, True),
        ("a b", False, True),
        ("é", False, True),
        ("😀", False, True),
        ("a😀", False, True),
        ("\u00a0", False, False),
        ("a\u00a0b", False, False),
        ("\U0010ffff", False, True),
        ("\ud800", False, True),  # a lone surrogate is a code point like any other
    ],
)
def test_dfa_matches(text: str, letters: bool, not_nbsp: bool) -> None:
    assert LETTERS_DFA.matches(text) is letters
    assert NOT_NBSP_DFA.matches(text) is not_nbsp


def test_dfa_binary_search_over_many_ranges() -> None:
    # Even code points below 300 and a 4-byte range: 151 ranges in one state.
    ranges = [(point, point, 0) for point in range(0, 300, 2)] + [(0x1F600, 0x1F64F, 0)]
    dfa = Dfa([True], [ranges])

    def covered(point: int) -> bool:
        return (point < 300 and point % 2 == 0) or 0x1F600 <= point <= 0x1F64F

    for point in [*range(320), 0x1F5FF, 0x1F600, 0x1F620, 0x1F64F, 0x1F650, 0x10FFFF]:
        assert dfa.matches(chr(point)) is covered(point), point
    assert dfa.matches("".join(chr(point) for point in range(0, 300, 2)) + "😀")


Table = tuple[list[bool], list[list[tuple[int, int, int]]]]
"A Dfa's arguments: accepting, transitions."


@st.composite
def automata(draw: st.DrawFn) -> Table:
    """A valid table of 1 to 4 states, its ranges cut at random points of the code space."""
    states = draw(st.integers(1, 4))
    accepting = draw(st.lists(st.booleans(), min_size=states, max_size=states))
    transitions = []
    for _ in range(states):
        cuts = sorted(draw(st.sets(st.integers(0, 0x10FFFF), max_size=40)))
        ranges = []
        for lo, hi in zip(cuts[::2], cuts[1::2], strict=False):
            if draw(st.booleans()):
                ranges.append((lo, hi, draw(st.integers(0, states - 1))))
        transitions.append(ranges)
    return accepting, transitions


def reference_matches(table: Table, text: str) -> bool:
    """What a Dfa of `table` says of `text`, computed plainly."""
    accepting, transitions = table
    state = 0
    for character in text:
        point = ord(character)
        targets = [target for lo, hi, target in transitions[state] if lo <= point <= hi]
        if not targets:
            return False
        state = targets[0]
    return accepting[state]


@given(automata(), st.data())
def test_dfa_agrees_with_a_plain_simulation(table: Table, data: st.DataObject) -> None:
    bounds = [point for ranges in table[1] for lo, hi, _ in ranges for point in (lo, hi, hi + 1)]
    near = st.sampled_from([chr(point) for point in bounds if point <= 0x10FFFF] or ["a"])
    text = data.draw(st.lists(near | st.characters(), max_size=12).map("".join))
    assert Dfa(*table).matches(text) is reference_matches(table, text)


def test_dfa_repr_and_states() -> None:
    assert LETTERS_DFA.states == 2
    assert "2 states" in repr(LETTERS_DFA)
    with pytest.raises(AttributeError):
        LETTERS_DFA.states = 3  # type: ignore[misc]


def test_dfa_is_final() -> None:
    with pytest.raises(TypeError):
        type("Sub", (Dfa,), {})


def test_dfa_takes_any_sequences() -> None:
    dfa = Dfa((False, True), ([(97, 97, 1)], ((97, 97, 1),)))
    assert dfa.matches("aa")
    assert Dfa(accepting=[True], transitions=[[]]).matches("")


@pytest.mark.parametrize(
    ("accepting", "transitions", "error", "message"),
    [
        ([], [], ValueError, "states"),
        ([True], [], ValueError, "one list of transitions per state"),
        ([True], [[], []], ValueError, "one list of transitions per state"),
        ([1], [[]], TypeError, "accepting"),
        (None, [[]], TypeError, "accepting"),
        ([True], None, TypeError, "transitions"),
        ([True], [None], TypeError, r"transitions\[0\]"),
        ([True], [[[0, 1, 0]]], TypeError, "tuple"),
        ([True], [[(0, 1)]], ValueError, "3 ints"),
        ([True], [[(0, 1, 0, 0)]], ValueError, "3 ints"),
        ([True], [[(0, "1", 0)]], TypeError, "hi must be an int"),
        ([True], [[(2, 1, 0)]], ValueError, "above hi"),
        ([True], [[(-1, 1, 0)]], ValueError, "lo must be between"),
        ([True], [[(0, 0x110000, 0)]], ValueError, "hi must be between"),
        ([True], [[(0, 1, 1)]], ValueError, "target must be between 0 and 0"),
        ([True], [[(0, 1, -1)]], ValueError, "target"),
        ([True], [[(0, 1 << 70, 0)]], ValueError, "hi"),
        ([True], [[(5, 9, 0), (0, 1, 0)]], ValueError, "sorted"),
        ([True], [[(0, 5, 0), (5, 9, 0)]], ValueError, "overlap"),
    ],
)
def test_dfa_refuses_bad_tables(
    accepting: Any, transitions: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        Dfa(accepting, transitions)


def test_dfa_states_are_bounded() -> None:
    assert Dfa([False] * 65536, [[]] * 65536).states == 65536
    with pytest.raises(ValueError, match="65536"):
        Dfa([False] * 65537, [[]] * 65537)


def test_dfa_matches_only_str() -> None:
    with pytest.raises(TypeError):
        LETTERS_DFA.matches(b"abc")  # type: ignore[arg-type]


# check ----------------------------------------------------------------------------------------


class Step(msgspec.Struct):
    name: str
    tags: list[str]
    count: int = 0


class Tree(msgspec.Struct):
    label: str
    children: list[Tree]
    notes: dict[str, str]


DIGITS = re.compile(r"\A[0-9]+\Z")
STEP_NODE = (
    3,
    {Step: (("name", (0, LETTERS_DFA)), ("tags", (1, (0, DIGITS))), ("count", (0, LETTERS_DFA)))},
)
TREE_FIELDS: dict[type, tuple[tuple[str, object], ...]] = {}
TREE_NODE = (3, TREE_FIELDS)
TREE_FIELDS[Tree] = (
    ("label", (0, LETTERS_DFA)),
    ("children", (1, TREE_NODE)),
    ("notes", (2, (0, LETTERS_DFA), (0, DIGITS))),
)


def test_check_strings() -> None:
    assert check("abc", (0, LETTERS_DFA))
    assert not check("ab1", (0, LETTERS_DFA))
    assert check("123", (0, DIGITS))
    assert not check("12a", (0, DIGITS))
    assert check(12, (0, LETTERS_DFA))  # not a str: nothing to match
    assert check(None, (0, DIGITS))

    class Text(str):
        pass

    assert not check(Text("AB"), (0, LETTERS_DFA))
    assert check(Text("ab"), (0, LETTERS_DFA))


def test_check_items_and_mappings() -> None:
    assert check(["a", "b"], (1, (0, LETTERS_DFA)))
    assert check(("a", "b"), (1, (0, LETTERS_DFA)))
    assert not check(["a", "B"], (1, (0, LETTERS_DFA)))
    assert check([], (1, (0, LETTERS_DFA)))
    assert check("AB", (1, (0, LETTERS_DFA)))  # a str is not a list
    assert check({"a": "1"}, (2, (0, LETTERS_DFA), (0, DIGITS)))
    assert not check({"A": "1"}, (2, (0, LETTERS_DFA), (0, DIGITS)))
    assert not check({"a": "x"}, (2, (0, LETTERS_DFA), (0, DIGITS)))
    assert check({"A": "1"}, (2, None, (0, DIGITS)))
    assert check({"a": "x"}, (2, (0, LETTERS_DFA), None))
    assert check(["a"], (2, (0, DIGITS), None))  # a list is not a dict


def test_check_structs() -> None:
    assert check(Step("ab", ["1", "22"], 3), STEP_NODE)
    assert not check(Step("Ab", ["1"]), STEP_NODE)
    assert not check(Step("ab", ["1", "x"]), STEP_NODE)
    assert check([Step("ab", [])], (1, STEP_NODE))
    assert check(Tree("x", [], {}), STEP_NODE)  # a type the node does not name passes


def test_check_all_of() -> None:
    both = (4, ((0, LETTERS_DFA), (0, re.compile("^.{2}$"))))
    assert check("ab", both)
    assert not check("abc", both)
    assert not check("A1", both)
    assert check("anything", (4, ()))


def test_check_recursive_types() -> None:
    tree = Tree("a", [Tree("b", [Tree("c", [], {"k": "1"})], {})], {"x": "2"})
    assert check(tree, TREE_NODE)
    deep_bad = Tree("a", [Tree("b", [Tree("c", [], {"k": "one"})], {})], {})
    assert not check(deep_bad, TREE_NODE)
    assert not check(Tree("a", [Tree("B", [], {})], {}), TREE_NODE)


def test_check_deep_values_raise_recursion_error() -> None:
    value: list[Any] = []
    node: Any = (0, LETTERS_DFA)
    for _ in range(100_000):
        value = [value]
        node = (1, node)
    with pytest.raises(RecursionError):
        check(value, node)
    tree = Tree("a", [], {})
    for _ in range(10_000):
        tree = Tree("a", [tree], {})
    with pytest.raises(RecursionError):
        check(tree, TREE_NODE)


def test_check_propagates_matcher_errors() -> None:
    class Broken:
        def search(self, text: str) -> object:
            raise ZeroDivisionError(text)

    with pytest.raises(ZeroDivisionError):
        check(["a"], (1, (0, Broken())))
    with pytest.raises(AttributeError):
        check("a", (0, object()))


def test_check_reads_missing_attributes_as_errors() -> None:
    with pytest.raises(AttributeError):
        check(Step("a", []), (3, {Step: (("missing", None),)}))


@pytest.mark.parametrize(
    ("value", "node", "error"),
    [
        ("a", "node", TypeError),
        ("a", (), TypeError),
        ("a", ("0", LETTERS_DFA), TypeError),
        ("a", (9, None), ValueError),
        ("a", (-1, None), ValueError),
        ("a", (0,), ValueError),
        ("a", (0, LETTERS_DFA, None), ValueError),
        (["a"], (1,), ValueError),
        (["a"], (1, "junk"), TypeError),
        ({"a": 1}, (2, None), ValueError),
        (Step("a", []), (3, []), TypeError),
        (Step("a", []), (3, {Step: [("name", None)]}), TypeError),
        (Step("a", []), (3, {Step: (("name",),)}), TypeError),
        (Step("a", []), (3, {Step: ((1, None),)}), TypeError),
        ("a", (4, [None]), TypeError),
    ],
)
def test_check_refuses_malformed_nodes(value: object, node: Any, error: type[Exception]) -> None:
    with pytest.raises(error):
        check(value, node)


def test_check_arguments() -> None:
    with pytest.raises(TypeError):
        native.check("a")  # type: ignore[call-arg]
    assert native.PROTOCOL == 1


# Fuzzing --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_fuzzer_finds_nothing(tmp_path: Path) -> None:
    """The atheris harness, from valid documents and the kept inputs, for a bounded run."""
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("plan", "tool-event", "goal-plan", "goal-event", "session-plan"):
        for number, example in enumerate(plancontracts.contract_schema(name)["examples"]):
            (corpus / f"{name}-{number}.json").write_bytes(
                json.dumps(example, ensure_ascii=False).encode()
            )
    for path in CRASHES.iterdir():
        shutil.copy(path, corpus / path.name)
    run = subprocess.run(
        [
            sys.executable,
            str(TESTS / "fuzz_native.py"),
            "-runs=200000",
            "-max_total_time=60",
            f"-artifact_prefix={tmp_path}/",
            str(corpus),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-4000:]


# decode: the scan, the typed decoder and the walk in one call ----------------------------


class Event(msgspec.Struct):
    name: str
    tags: list[str] = []


EVENT_NODE = (3, {Event: (("name", (0, Dfa((False, True), (((97, 122, 1),), ((97, 122, 1),))))),)})
UNSURE = object()
REFUSALS = (msgspec.ValidationError, msgspec.DecodeError, RecursionError)


def decoded(data: bytes, decoder: Any = None, node: Any = EVENT_NODE) -> object:
    decoder = decoder or msgspec.json.Decoder(Event).decode
    return native.decode(data, 64, decoder, node, REFUSALS, UNSURE)


def test_decode_gives_the_typed_value_when_every_step_passes() -> None:
    assert decoded(b'{"name": "torch", "tags": ["A"]}') == Event("torch", ["A"])


@pytest.mark.parametrize(
    "data",
    [
        b'{"name": "torch", "name": "door"}',  # the scan: a duplicate key
        b'{"name": 1}',  # the types
        b'{"name": "Torch"}',  # the pattern
        b"[" * 65 + b"]" * 65,  # deeper than max_depth
    ],
)
def test_decode_is_unsure_wherever_a_step_is(data: bytes) -> None:
    assert decoded(data) is UNSURE


def test_decode_raises_what_is_no_refusal() -> None:
    def broken(data: bytes) -> object:
        raise KeyError("a bug, not a verdict")

    with pytest.raises(KeyError):
        decoded(b'{"name": "torch"}', decoder=broken)


class Nest(msgspec.Struct):
    name: str
    inner: Nest | None = None


def test_decode_is_unsure_of_a_value_too_deep_to_walk() -> None:
    fields: dict[type, Any] = {}
    node = (3, fields)
    fields[Nest] = (("name", (0, re.compile("^[a-z]+$"))), ("inner", node))
    deep = Nest("leaf")
    for _ in range(100_000):
        deep = Nest("branch", deep)
    assert decoded(b"{}", decoder=lambda data: deep, node=node) is UNSURE
    shallow = Nest("a", Nest("b"))
    assert decoded(b"{}", decoder=lambda data: shallow, node=node) is shallow


def test_a_table_changed_while_it_is_read_is_read_as_it_was_given() -> None:
    # Reading a state's transitions runs the item's own code, which empties the
    # caller's list: the table is read from a copy, never past the list's new end.
    class Emptying:
        def __iter__(self) -> Any:
            transitions.clear()
            return iter([])

    transitions: list[Any] = [Emptying(), [], [], []]
    assert Dfa([False] * 4, transitions).states == 4
