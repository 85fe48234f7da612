"""The story-response contract: narrative prose, a Story-mode planning block, state updates.

The narrative is prose only, never the block's JSON (seed 000's field
separation rule): each rule is pinned with its pointer and message, and a
property test writes any planning block into any narrative, as JSON, fenced
or not, and requires the refusal. The upstream project's valid Story-mode
blocks are valid inside a response; its Think-mode one is not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from commands import cli
from hypothesis import given
from hypothesis import strategies as st

from plancontracts import contract_schema, decode, violations
from plancontracts.generated import STORY_RESPONSE
from plancontracts.generated.planning_blocks import StoryResponse
from plancontracts.runtime.core.jsontext import parse

EXAMPLE: dict[str, Any] = contract_schema("story-response")["examples"][0]
BLOCKS = contract_schema("planning-block")["examples"]


def response(narrative: str, **changes: Any) -> dict[str, Any]:
    return {**json.loads(json.dumps(EXAMPLE)), "narrative": narrative, **changes}


def found(document: Any) -> list[tuple[str, str]]:
    return [(v.pointer, v.message) for v in violations(STORY_RESPONSE, document)]


def test_the_examples_decode_into_typed_responses() -> None:
    for example in contract_schema("story-response")["examples"]:
        typed = decode(STORY_RESPONSE, json.dumps(example))
        assert isinstance(typed, StoryResponse)
        assert typed.planning_block.choices


@pytest.mark.parametrize(
    ("narrative", "says"),
    [
        ('You wait. {"choices": {"wait": {}}}', 'holds planning-block JSON ("{\\"choices\\"'),
        ('The plan: "thinking": weigh it up.', 'holds planning-block JSON ("\\"thinking\\":'),
        ('He hands you a note: {"text": "Run"}', "holds planning-block JSON"),
        ('"planning_block": {}', "holds planning-block JSON"),
        ("You wait.\n```json\nnothing\n```", 'holds a fenced code block ("```json")'),
        ("You wait.\n  ~~~\nnothing\n~~~", 'holds a fenced code block ("~~~")'),
        ("The guard <b>waits</b>.", "holds HTML markup; the narrative is plain text"),
        ("The guard waits.\x1b[31m", "holds control characters (U+001B)"),
    ],
)
def test_a_narrative_that_is_not_prose_is_refused_at_narrative(narrative: str, says: str) -> None:
    problems = found(response(narrative))
    assert len(problems) == 1
    pointer, message = problems[0]
    assert pointer == "/narrative"
    assert says in message


@pytest.mark.parametrize(
    "narrative",
    [
        '"Halt!" the guard shouts. "Who goes there?"',
        "Choices: you may bribe him, or wade the ford.",  # the word, not the key
        "HP < 10, and the torch {flickers}.",
        "A line with `backticks` and a tab\there.\r\nAnd a Windows line end.",
        "雨が強くなる。🌧️",
        "risk_level: high, says the scout, grinning.",
    ],
)
def test_prose_is_accepted(narrative: str) -> None:
    assert found(response(narrative)) == []


PROSE = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters='{}<>`~"'),
    min_size=1,
    max_size=200,
)


@given(
    before=PROSE,
    after=PROSE,
    block=st.sampled_from(BLOCKS),
    indent=st.sampled_from([None, 2]),
    fenced=st.booleans(),
)
def test_a_block_written_into_any_narrative_is_refused(
    before: str, after: str, block: dict[str, Any], indent: int | None, fenced: bool
) -> None:
    written = json.dumps(block, indent=indent, ensure_ascii=False)
    if fenced:
        written = f"\n```json\n{written}\n```\n"
    problems = found(response(before + written + after))
    assert problems
    assert {pointer for pointer, _ in problems} == {"/narrative"}
    assert any("holds planning-block JSON" in message for _, message in problems)


@given(before=PROSE)
def test_prose_without_braces_quotes_or_fences_is_never_refused(before: str) -> None:
    assert found(response(before)) == []


def test_the_block_is_judged_by_story_modes_rules_at_its_own_pointer() -> None:
    block = json.loads(json.dumps(EXAMPLE["planning_block"]))
    choices = block["choices"]
    block["choices"] = {"parallel_crossing": choices.pop("parallel_crossing"), **choices}
    assert found(response(EXAMPLE["narrative"], planning_block=block)) == [
        (
            "/planning_block/choices/parallel_crossing",
            "the parallel option is choice 1 of 3; it must come last (normalize moves it)",
        )
    ]


def test_a_planning_check_in_a_story_response_is_refused() -> None:
    think_block = BLOCKS[0]
    assert "plan_quality" in think_block
    problems = found(response(EXAMPLE["narrative"], planning_block=think_block))
    assert problems == [
        (
            "/planning_block/plan_quality",
            "a story response rolls no planning check: plan_quality belongs to a Think-mode "
            "block, which is answered alone (remove it)",
        )
    ]


def test_the_frozen_plans_follow_the_freeze_rules() -> None:
    updates = json.loads(json.dumps(EXAMPLE["state_updates"]))
    updates["frozen_plans"]["bridge_crossing"]["freeze_hours"] = 8
    assert (
        "/state_updates/frozen_plans/bridge_crossing/freeze_hours",
        "is 8, but a failed check at DC 14 freezes for 4 hours",
    ) in found(response(EXAMPLE["narrative"], state_updates=updates))


def test_the_narrative_is_bounded_by_the_schema() -> None:
    longest = contract_schema("story-response")["properties"]["narrative"]["maxLength"]
    assert found(response("a" * longest)) == []
    assert [p for p, _ in found(response("a" * (longest + 1)))] == ["/narrative"]
    assert [p for p, _ in found(response(""))] == ["/narrative"]


def test_validate_says_each_violation_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "response.json"
    path.write_text(json.dumps(response('You wait. {"choices": {}}')))
    done = cli("validate", "story-response", str(path))
    assert done.returncode == 1
    assert "  /narrative: holds planning-block JSON" in done.stdout + done.stderr


def test_upstreams_story_blocks_are_valid_in_a_response_and_its_think_block_is_not(
    upstream: Path,
) -> None:
    paths = sorted((upstream / "worldarchitect").glob("valid_*.json"))
    assert paths
    for path in paths:
        block = parse(path.read_bytes())
        problems = found(response("The story goes on.", planning_block=block))
        if "plan_quality" in block:
            assert [p for p, _ in problems] == ["/planning_block/plan_quality"], path.name
        else:
            assert problems == [], path.name
