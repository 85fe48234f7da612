"""The pattern planner: the upstream intents, disabled skills, and valid plans for any text."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from plancontracts import check_plan
from plancontracts.generated.tool_plans import Plan
from plancontracts.runtime.core.validation import decode
from plancontracts.runtime.engine.skills import SkillSet, bundled_skills, discover_skills
from plancontracts.runtime.tool_plans import pattern_plan
from plancontracts.skills import BUNDLED_SKILLS

SKILLS = sorted(bundled_skills().skills)


def calls(
    text: str, disabled: tuple[str, ...] = ()
) -> list[tuple[str, dict[str, Any] | msgspec.UnsetType]]:
    """Each call of the plan for `text`, as its skill and its input."""
    plan = pattern_plan(text, disabled=disabled)
    return [(tool.tool_path.split("/")[1], tool.input) for tool in plan.tools]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I light the torch", [("torch-lighter", {"action": "light"})]),
        ("I put out the torch.", [("torch-lighter", {"action": "extinguish"})]),
        ("Extinguish the torch!", [("torch-lighter", {"action": "extinguish"})]),
        ("I examine the ancient door", [("door-examiner", {"target": "ancient_door"})]),
        ("look at the door", [("door-examiner", {"target": "door"})]),
        ("I roll 2d6+3 to pick the lock", [("dice-roller", {"formula": "2d6+3"})]),
        ("I roll the dice", [("dice-roller", {"formula": "1d20"})]),
        ("I recall the old map", [("memory", {"query": "the old map"})]),
        ("my standing with the Iron Guild?", [("reputation", {"faction": "iron_guild"})]),
    ],
)
def test_each_intent_calls_its_skill_then_the_storyteller(
    text: str, expected: list[tuple[str, dict[str, object]]]
) -> None:
    assert calls(text) == [*expected, ("storyteller", {"style": "vivid"})]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The ids are the words' keys as `snake_case` makes them everywhere else.
        ("my standing with the NightWatch", ("reputation", {"faction": "night_watch"})),
        ("I examine the IronBound door", ("door-examiner", {"target": "iron_bound_door"})),
        # A word too long for an id is left out, never cut into another word.
        (f"I examine the {'x' * 50} door", ("door-examiner", {"target": "door"})),
    ],
)
def test_ids_are_the_players_words_in_snake_case(
    text: str, expected: tuple[str, dict[str, object]]
) -> None:
    assert calls(text)[0] == expected


def test_looking_around_is_the_storyteller_alone() -> None:
    assert calls("I look around") == [
        ("storyteller", {"style": "vivid", "subject": "the surroundings"})
    ]


def test_several_intents_run_in_the_order_written_each_after_the_last() -> None:
    plan = pattern_plan("I light the torch and examine the mysterious door")
    assert [(tool.tool_id, tool.dependencies) for tool in plan.tools] == [
        ("t1", []),
        ("t2", ["t1"]),
        ("t3", ["t1", "t2"]),
    ]
    assert plan.narrative == "You bring a flame to the torch. You step closer to the door."
    assert plan.tools[2].required is False  # narration failing must not fail the turn


def test_anything_else_gets_a_narration_only_plan() -> None:
    plan = pattern_plan("I dance a jig")
    assert (plan.tools, plan.narrative) == ([], "You dance a jig. The world waits.")


def test_disabled_skills_are_left_out_and_recorded() -> None:
    plan = pattern_plan(
        "I light the torch and roll 1d6",
        disabled=["torch-lighter", "storyteller"],
        generation=3,
        parent_plan_id="8d3f1c2a-5b6e-4f70-9a81-b2c3d4e5f607",
    )
    assert [tool.tool_path for tool in plan.tools] == ["skills/dice-roller/roll.py"]
    assert plan.disabled_skills == ["storyteller", "torch-lighter"]
    assert plan.metadata
    assert plan.metadata.generation_attempt == 3
    assert plan.metadata.parent_plan_id == "8d3f1c2a-5b6e-4f70-9a81-b2c3d4e5f607"


def test_without_skills_every_plan_is_narration_only() -> None:
    plan = pattern_plan("I light the torch", skills=SkillSet())
    assert plan.tools == []


intents = st.sampled_from(
    [
        "light the torch",
        "douse the torch",
        "examine the iron door",
        "look around",
        "roll 3d8-2",
        "roll 0d0",
        "recall ???",
        "remember the well",
        "reputation with the 9 sages",
        "standing with the Guild",
    ]
)
texts = st.lists(intents | st.text(max_size=40), max_size=5).map(" and ".join)


@given(texts, st.sets(st.sampled_from(SKILLS)))
def test_every_plan_is_valid_and_passes_the_executors_checks(text: str, disabled: set[str]) -> None:
    plan = pattern_plan(text, disabled=disabled)
    assert decode("plan", msgspec.json.encode(plan)) == plan
    assert check_plan(plan) is None
    used = {tool.tool_path.split("/")[1] for tool in plan.tools}
    assert not used & disabled


def test_an_input_a_skills_schema_cannot_judge_in_time_is_not_used(tmp_path: Path) -> None:
    # A door examiner of the user's whose pattern backtracks for minutes on a long name.
    folder = tmp_path / "door-examiner"
    shutil.copytree(BUNDLED_SKILLS / "door-examiner", folder)
    schema = json.loads((folder / "examine.input.json").read_text())
    schema["properties"]["target"]["pattern"] = "^(a|aa|aaa)+$"
    (folder / "examine.input.json").write_text(json.dumps(schema))
    skills = discover_skills([tmp_path])
    finished: list[Plan] = []
    worker = threading.Thread(
        target=lambda: finished.append(
            pattern_plan(f"I examine the {'a' * 38} door", skills=skills)
        ),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=300)  # a hang, not a speed: the check gives up after a second
    assert finished, "the pattern planner hung on the skill's schema"
    assert [tool.tool_path for tool in finished[0].tools] == []  # narration only
