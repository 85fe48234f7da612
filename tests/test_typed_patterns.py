"""The schema's string patterns, checked on typed values after msgspec converted them.

The generated types carry patterns for plancontracts to check (msgspec does
not): `decode`, `convert` and `conforming` refuse a string off its pattern,
whether the walk runs natively or in Python, at any depth.
"""

from __future__ import annotations

import re
from contextlib import nullcontext
from typing import Annotated, Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_dfa import generated_patterns
from tiers import examples_at_most

from plancontracts import PLAN, ContractError, contract_schema, convert, decode
from plancontracts.generated.tool_plans import Plan, SkillName
from plancontracts.runtime.core.native import native, turned_off
from plancontracts.runtime.core.typed_patterns import (
    _batched,
    conforming,
    pattern_node,
    patterns_hold,
)

Name = Annotated[str, msgspec.Meta(extra_json_schema={"pattern": "^[a-z]+$(?!\\n)"})]


class Tree(msgspec.Struct):
    name: Name
    children: list[Tree] = []
    labels: dict[Name, Name] = {}
    note: str | None = None


class Plain(msgspec.Struct):
    count: int
    text: str


def a_plan() -> Any:
    return msgspec.json.decode(msgspec.json.encode(contract_schema("plan")["examples"][0]))


def test_a_plan_with_a_tool_id_off_its_pattern_is_refused_at_that_field() -> None:
    document = a_plan()
    document["tools"][0]["toolId"] = "Not An Id!"
    with pytest.raises(ContractError) as caught:
        convert(PLAN, document)
    assert [v.pointer for v in caught.value.violations] == ["/tools/0/toolId"]
    with pytest.raises(ContractError) as again:
        decode(PLAN, msgspec.json.encode(document))
    assert again.value.violations == caught.value.violations


def test_msgspec_alone_no_longer_checks_the_pattern_but_conforming_does() -> None:
    assert msgspec.convert("Not A Skill", SkillName) == "Not A Skill"
    with pytest.raises(msgspec.ValidationError):
        conforming("Not A Skill", SkillName)
    assert conforming("dice-roller", SkillName) == "dice-roller"


def test_a_type_without_patterns_has_no_node_and_any_value_holds() -> None:
    assert pattern_node(Plain) is None
    assert patterns_hold(Plain(1, "ANY thing"), Plain)


@pytest.mark.parametrize("walker", ["python", "native"])
def test_every_kind_of_place_is_checked(walker: str) -> None:
    if walker == "native" and native() is None:
        pytest.skip("the native fast path is not installed")
    with nullcontext() if walker == "native" else turned_off():
        good = Tree("root", [Tree("leaf", labels={"k": "v"})], note="Free TEXT")
        assert patterns_hold(good, Tree)
        assert not patterns_hold(Tree("Root"), Tree)
        assert not patterns_hold(Tree("root", [Tree("leaf", [Tree("BAD")])]), Tree)
        assert not patterns_hold(Tree("root", labels={"K": "v"}), Tree)
        assert not patterns_hold(Tree("root", labels={"k": "V"}), Tree)
        # `$` is the end of the text, as the schema reads it: no final newline.
        assert not patterns_hold(Tree("root\n"), Tree)


@pytest.mark.parametrize("walker", ["python", "native"])
def test_a_value_deeper_than_recursion_goes_is_still_walked(walker: str) -> None:
    if walker == "native" and native() is None:
        pytest.skip("the native fast path is not installed")
    with nullcontext() if walker == "native" else turned_off():
        deep = Tree("leaf")
        for _ in range(20_000):
            deep = Tree("branch", [deep])
        assert patterns_hold(deep, Tree)
        assert not patterns_hold(Tree("branch", [Tree("x"), deep, Tree("Y")]), Tree)


@given(st.text(max_size=30))
def test_the_walk_matches_as_re_searches(text: str) -> None:
    expected = re.search("^[a-z]+$(?!\\n)", text) is not None
    assert patterns_hold(Tree(text), Tree) is expected


def test_a_plan_node_visits_tools_but_not_their_free_input() -> None:
    node = pattern_node(Plan)
    assert node is not None
    fields = dict(node[1][Plan])
    assert {"request_id", "tools"} <= set(fields)
    assert "narrative" not in fields  # free text has no pattern: never visited


class Names(msgspec.Struct):
    names: list[Name] = []
    by_name: dict[Name, Name] = {}


@given(st.lists(st.text(alphabet="ab\n\x00\x1fZ", max_size=4), max_size=6))
def test_strings_matched_in_a_batch_are_judged_one_by_one(texts: list[str]) -> None:
    expected = all(re.search("^[a-z]+$(?!\\n)", text) for text in texts)
    with turned_off():
        assert patterns_hold(Names(texts), Names) is expected
        assert patterns_hold(Names(by_name=dict.fromkeys(texts, "ok")), Names) is expected


@pytest.mark.parametrize("pattern", generated_patterns())
def test_every_generated_pattern_can_be_batched(pattern: str) -> None:
    batched = _batched(pattern)
    assert batched is not None
    joined, separator = batched

    # Drawing from a pattern is slow: what the batch adds is the joining, which few examples try.
    @settings(max_examples=examples_at_most(100))
    @given(st.lists(st.one_of(st.from_regex(pattern), st.text(max_size=8)), min_size=2, max_size=5))
    def agrees(texts: list[str]) -> None:
        text = separator.join(texts)
        together = text.count(separator) == len(texts) - 1 and joined.fullmatch(text) is not None
        assert together is all(re.search(pattern, each) for each in texts)

    agrees()


Ambiguous = Annotated[str, msgspec.Meta(extra_json_schema={"pattern": "^a{0,20}a{0,20}$(?!\\n)"})]


class Words(msgspec.Struct):
    words: list[Ambiguous]


def test_a_batch_never_backtracks_into_strings_that_matched() -> None:
    # Each "a" * 20 splits between the two repeats 21 ways; joined, a failing last
    # string used to try every split of every string before it (weeks for 30).
    words = Words(["a" * 20] * 30 + ["b"])
    with turned_off():
        assert not patterns_hold(words, Words)
        assert patterns_hold(Words(["a" * 20] * 30), Words)
