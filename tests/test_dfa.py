"""Pattern tables: a table accepts exactly the strings in which `re.search` finds the pattern."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from bisect import bisect_right
from functools import cache
from itertools import pairwise
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples_at_most

import plancontracts.generated
from plancontracts.runtime.core.dfa import MAX_CODE_POINT, DfaTable, compile_dfa


def matches(table: DfaTable, text: str) -> bool:
    """Whether `table` accepts `text`: the reference the native runner must agree with."""
    accepting, transitions = table
    state = 0
    for char in text:
        row = transitions[state]
        at = bisect_right(row, (ord(char), MAX_CODE_POINT, len(transitions))) - 1
        if at < 0 or row[at][1] < ord(char):
            return False
        state = row[at][2]
    return accepting[state]


def _patterns_of(info: Any, found: set[str], structs: set[type]) -> None:
    """Adds to `found` every pattern in the `msgspec.inspect` type `info`, constraint or schema."""
    if isinstance(info, msgspec.inspect.StructType):
        if info.cls in structs:
            return
        structs.add(info.cls)
    if isinstance(info, msgspec.inspect.StrType) and info.pattern is not None:
        found.add(info.pattern)
    if isinstance(info, msgspec.inspect.Metadata):
        schema = info.extra_json_schema or {}
        if "pattern" in schema:
            found.add(schema["pattern"])
    if isinstance(info, msgspec.inspect.Type | msgspec.inspect.Field):
        for name in info.__struct_fields__:
            _patterns_of(getattr(info, name), found, structs)
    elif isinstance(info, tuple):
        for item in info:
            _patterns_of(item, found, structs)


def generated_patterns() -> list[str]:
    """Every string pattern of the generated types, as Python reads them."""
    found: set[str] = set()
    for module_info in pkgutil.iter_modules(plancontracts.generated.__path__):
        module = importlib.import_module(f"plancontracts.generated.{module_info.name}")
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, msgspec.Struct):
                _patterns_of(msgspec.inspect.type_info(value), found, set())
    return sorted(found)


PATTERNS = generated_patterns()


def well_formed(table: DfaTable) -> None:
    """Fails unless `table` keeps its format's promises: sorted, disjoint, in-range moves."""
    accepting, transitions = table
    assert len(accepting) == len(transitions) >= 1
    for row in transitions:
        for lo, hi, target in row:
            assert 0 <= lo <= hi <= MAX_CODE_POINT
            assert 0 <= target < len(transitions)
        for (_, hi, _), (lo, _, _) in pairwise(row):
            assert hi < lo


def test_the_generated_types_have_patterns() -> None:
    assert len(PATTERNS) >= 20
    assert r"^[0-9a-f]{64}$(?!\n)" in PATTERNS


@pytest.mark.parametrize("pattern", PATTERNS)
def test_every_generated_pattern_compiles(pattern: str) -> None:
    table = compile_dfa(pattern)
    assert table is not None
    well_formed(table)
    assert compile_dfa(pattern) == table


@cache
def compiled(pattern: str) -> DfaTable:
    """The table of `pattern`, built once per test session."""
    table = compile_dfa(pattern)
    assert table is not None
    return table


NEAR_BOUNDS = (
    "\n\t\r -./09:@AZ[`az{~\x7f\x85\xa0\u1680\u2000\u200a\u200b\u2028\u3000\ufeff\U0001f600"
)
"Code points at and around the bounds of the project's classes, for mutations."


@st.composite
def texts_for(draw: st.DrawFn, pattern: str) -> str:
    """A string `pattern` matches, any string, or a matching one changed by one code point.

    The change inserts, removes or replaces a code point (often one at a bound
    of the project's classes), or puts a newline at the end.
    """
    kind = draw(st.sampled_from(["matching", "any", "changed"]))
    if kind == "any":
        return draw(st.text())
    text = draw(st.from_regex(pattern))
    if kind == "matching":
        return text
    where = draw(st.integers(0, len(text)))
    char = draw(st.sampled_from(NEAR_BOUNDS) | st.characters(codec=None))
    how = draw(st.sampled_from(["insert", "delete", "replace", "newline"]))
    if how == "insert":
        return text[:where] + char + text[where:]
    if how == "newline":
        return text + "\n"
    if how == "delete":
        return text[:where] + text[where + 1 :]
    return text[:where] + char + text[where + 1 :]


@pytest.mark.parametrize("pattern", PATTERNS)
# Drawing from `st.from_regex` takes tens of milliseconds for the longest patterns.
@settings(max_examples=examples_at_most(100))
@given(data=st.data())
def test_a_generated_pattern_s_table_agrees_with_re(pattern: str, data: st.DataObject) -> None:
    text = data.draw(texts_for(pattern))
    assert matches(compiled(pattern), text) == (re.search(pattern, text) is not None)


@pytest.mark.parametrize(
    "pattern",
    [
        r"(a)\1",
        "(?i)a",
        "(?i:a)b",
        "(?s).",
        "(?m)^a",
        "(?a)a",
        "(?x)a",
        r"\d",
        r"[\w-]",
        r"\s+",
        r"\bx",
        "(?<=a)b",
        "(?<!a)b",
        "a(?=b)",
        "a(?!\n)",
        "a(?!b)$",
        "a$b",
        "a^",
        "(^a)",
        "(a$)",
        "(a)?(?(1)b|c)",
        "a++",
        "a*+",
        "(?>ab)",
        "(a|b)*a(a|b){20}",
        "^(a|b)*a(a|b){20}$(?!\n)",
        "a{30000}",
        "(?:a{100}){300}",
    ],
)
def test_what_the_table_cannot_read_exactly_gives_none(pattern: str) -> None:
    re.compile(pattern)
    assert compile_dfa(pattern) is None


def test_the_states_can_be_bounded() -> None:
    assert compile_dfa("^[a-z]{0,63}$", max_states=16) is None
    assert compile_dfa("^[a-z]{0,63}$", max_states=100) is not None


@pytest.mark.parametrize("pattern", ["(", "a{2,1}", "[b-a]", r"\1", "*"])
def test_what_re_refuses_raises_re_s_error(pattern: str) -> None:
    with pytest.raises(re.error):
        compile_dfa(pattern)


@pytest.mark.parametrize(
    ("pattern", "text", "accepted"),
    [
        ("", "", True),
        ("", "\n anything", True),
        ("^$(?!\n)", "", True),
        ("^$(?!\n)", "\n", False),
        ("^$", "\n", True),
        ("^$", "\n\n", False),
        ("^a$", "a\n", True),
        ("^a$", "a\n\n", False),
        ("^a$(?!\n)", "a\n", False),
        (r"^a\Z", "a\n", False),
        (r"\Aa", "ba", False),
        ("a$", "ba\n", True),
        ("[^\n]", "\n", False),
        ("[^\n]", "\n\U0001f600", True),
        ("^.$(?!\n)", "\n", False),
        ("^.$(?!\n)", "\U0010ffff", True),
        ("^.$(?!\n)", "\ud800", True),
        ("^[\u00a0-\u00ff]+$(?!\n)", "\u00a0\u00ff", True),
        ("^[\u00a0-\u00ff]+$(?!\n)", "\u009f", False),
        ("^[^\u00a0\u2000-\u200a]$(?!\n)", "\u2005", False),
        ("^[^\u00a0\u2000-\u200a]$(?!\n)", "\u200b", True),
        ("^[\U0001f600-\U0001f64f]{2}$(?!\n)", "\U0001f600\U0001f64f", True),
        ("^[\U0001f600-\U0001f64f]{2}$(?!\n)", "\U0001f600\U0001f650", False),
        ("^a{0,63}$(?!\n)", "a" * 63, True),
        ("^a{0,63}$(?!\n)", "a" * 64, False),
        ("^a{0,63}$(?!\n)", "", True),
        ("^((a(b)?)+c)*$(?!\n)", "abacac", True),
        ("^((a(b)?)+c)*$(?!\n)", "abbc", False),
        ("^(|a|)b$(?!\n)", "b", True),
        ("^(?:a|)*?b$(?!\n)", "aab", True),
        ("^x(?:)y$", "xy", True),
        ("^[^\x00-\U0010ffff]", "", False),
        ("[^\x00-\U0010ffff]|b", "ab", True),
    ],
)
def test_edge_cases(pattern: str, text: str, accepted: bool) -> None:
    table = compile_dfa(pattern)
    assert table is not None
    well_formed(table)
    assert (re.search(pattern, text) is not None) == accepted
    assert matches(table, text) == accepted


def test_the_empty_pattern_accepts_everything_in_one_state() -> None:
    assert compile_dfa("") == ((True,), (((0, MAX_CODE_POINT, 0),),))


def test_a_table_is_minimal() -> None:
    # After `a` and after `b` the same rest is left: one state, not two.
    table = compile_dfa("^(?:ax|bx)$(?!\n)")
    assert table is not None
    assert len(table[0]) == 3


ATOMS = ["a", "b", "\n", ".", "[ab]", "[^a]", "[^\n]", "[a\n]", "(?:)"]
"Pieces of random patterns over a small alphabet, so that texts often hit them."


@st.composite
def small_patterns(draw: st.DrawFn, depth: int = 3) -> str:
    """A pattern of the supported subset over `a`, `b` and newline."""
    if depth == 0:
        return draw(st.sampled_from(ATOMS))
    inner = small_patterns(depth - 1)
    kind = draw(st.sampled_from(["atom", "sequence", "either", "repeat", "group"]))
    if kind == "atom":
        return draw(st.sampled_from(ATOMS))
    if kind == "sequence":
        return "".join(draw(st.lists(inner, min_size=0, max_size=3)))
    if kind == "either":
        return "|".join(draw(st.lists(inner, min_size=1, max_size=3)))
    if kind == "group":
        return "(" + draw(inner) + ")"
    quantifier = draw(st.sampled_from(["*", "+", "?", "{2}", "{0,2}", "{1,3}", "{2,}"]))
    lazy = draw(st.sampled_from(["", "?"]))
    return "(?:" + draw(inner) + ")" + quantifier + lazy


@given(
    body=small_patterns(),
    start=st.sampled_from(["", "^", r"\A"]),
    end=st.sampled_from(["", "$", "$(?!\n)", r"\Z"]),
    texts=st.lists(st.text("abc\n", max_size=8), max_size=10),
)
def test_a_random_pattern_s_table_agrees_with_re(
    body: str, start: str, end: str, texts: list[str]
) -> None:
    pattern = start + "(?:" + body + ")" + end
    table = compile_dfa(pattern)
    assert table is not None
    well_formed(table)
    assert compile_dfa(pattern) == table
    for text in texts:
        assert matches(table, text) == (re.search(pattern, text) is not None), text
