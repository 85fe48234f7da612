"""Choosing the skills a plan calls: the cues, the model's choice, and the plan they make.

The planner first chooses the scripts an input calls for, then has the model
write their inputs under a profile that requires exactly those tools. These
tests hold the levers' behaviour, never the benchmark's numbers
(`benchmarks/skills.py` measures those): only enabled skills are offered, a
disabled skill is never chosen, an input that needs no skill gets a plan
without one, and the held-out inputs stay out of everything the project
writes.
"""

from __future__ import annotations

import json
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from writers import WrittenWhole

from plancontracts import check_plan
from plancontracts.generated.tool_plans import PlanMetadata, SkillChoice
from plancontracts.pytest_plugin import PromptSnapshot
from plancontracts.runtime.core.errors import GenerationFailed, ProfileBug
from plancontracts.runtime.engine.skills import SkillSet, bundled_skills, discover_skills
from plancontracts.runtime.model.chat import render_chat
from plancontracts.runtime.model.local import LocalModel
from plancontracts.runtime.tool_plans import Planner, pattern_plan, plan_profile
from plancontracts.runtime.tool_plans.choosing import (
    GAP_WORDS,
    choice_profile,
    choose_by_cues,
    choose_by_model,
    narration_scripts,
    offered_scripts,
    plain_forms,
)
from plancontracts.runtime.tool_plans.narrator import choice_line
from plancontracts.runtime.tool_plans.prompts import choice_messages

ROOT = Path(__file__).resolve().parents[1]
SKILLS = bundled_skills()
ENABLED = sorted(skill for skill in SKILLS.skills if skill != "storyteller")
README_INPUT = "I light the torch and examine the iron door"


def cued(text: str, disabled: list[str] | None = None, skills: SkillSet = SKILLS) -> list[str]:
    return choose_by_cues(text, skills, disabled or []).skills


def one_cue_skills(tmp_path: Path, cues: list[str]) -> SkillSet:
    """The bundled torch lighter alone, its cues replaced by `cues`."""
    folder = tmp_path / "skills"
    shutil.copytree(ROOT / "skills" / "torch-lighter", folder / "torch-lighter")
    manifest_file = folder / "torch-lighter" / "skill.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["scripts"][0]["cues"] = cues
    manifest_file.write_text(json.dumps(manifest))
    skills = discover_skills([folder])
    assert not skills.problems
    return skills


# Cues ---------------------------------------------------------------------------


def test_the_readme_input_calls_for_the_torch_and_the_door_in_the_order_written() -> None:
    assert cued(README_INPUT) == ["torch-lighter", "door-examiner"]
    assert cued("I examine the iron door and light the torch") == ["door-examiner", "torch-lighter"]


def test_a_cue_matches_in_order_within_one_sentence_and_the_gap_it_allows(tmp_path: Path) -> None:
    skills = one_cue_skills(tmp_path, ["light ... torch", "blow out"])
    near = "I light " + "very " * GAP_WORDS + "torch"
    far = "I light " + "very " * (GAP_WORDS + 1) + "torch"
    assert cued(near, skills=skills) == ["torch-lighter"]
    assert cued(far, skills=skills) == []
    assert cued("The torch, I light it", skills=skills) == []  # out of order
    assert cued("I light it. The torch waits", skills=skills) == []  # two sentences
    assert cued("I blow out the candle", skills=skills) == ["torch-lighter"]
    assert cued("I blow the horn; out we go", skills=skills) == []  # side by side, or no match


def test_alternatives_plain_forms_and_numbers_before_letters(tmp_path: Path) -> None:
    skills = one_cue_skills(tmp_path, ["kindle/ignite ... torch", "carry ... d6"])
    assert cued("She ignited the torch", skills=skills) == ["torch-lighter"]
    assert cued("kindling my torches", skills=skills) == ["torch-lighter"]
    assert cued("I carried 2d6 of them", skills=skills) == ["torch-lighter"]
    assert cued("I carry d66", skills=skills) == []
    assert {"roll", "rolls", "rolled", "rolling"} <= plain_forms("roll")
    assert {"carries", "carried", "hoping", "stopped"} <= (
        plain_forms("carry") | plain_forms("hope") | plain_forms("stop")
    )


def test_the_why_names_the_cue_and_the_words_it_matched() -> None:
    choice = choose_by_cues(README_INPUT, SKILLS)
    first = choice.record().skills[0]
    assert first.skill == "torch-lighter"
    assert "light the torch" in first.why
    assert "light/" in first.why


@given(st.text(max_size=300), st.lists(st.sampled_from(sorted(SKILLS.skills)), max_size=6))
def test_cues_choose_only_enabled_skills_and_never_the_narration(
    text: str, disabled: list[str]
) -> None:
    choice = choose_by_cues(text, SKILLS, disabled)
    assert set(choice.skills) <= set(ENABLED) - set(disabled)
    assert len(choice.chosen) == len({chosen.scripts[0].tool_path for chosen in choice.chosen})
    plan = plan_profile(SKILLS, disabled=disabled, chosen=[c.scripts for c in choice.chosen])
    assert plan.schema["properties"]["tools"]["maxItems"] <= 4


def test_a_huge_input_is_chosen_for_in_one_pass() -> None:
    # Every word is a cue word of some script: each cue is looked up, never searched.
    sentence = "I light the torch, examine the door and roll the dice. "
    assert (
        cued(sentence * 40_000)
        == cued(sentence)
        == [
            "torch-lighter",
            "door-examiner",
            "dice-roller",
        ]
    )


def test_a_skill_without_cues_is_left_to_the_model(tmp_path: Path) -> None:
    skills = one_cue_skills(tmp_path, ["x"])
    manifest_file = tmp_path / "skills" / "torch-lighter" / "skill.json"
    manifest = json.loads(manifest_file.read_text())
    del manifest["scripts"][0]["cues"]
    manifest_file.write_text(json.dumps(manifest))
    skills = discover_skills([tmp_path / "skills"])
    assert cued("I light the torch", skills=skills) == []


# The profile of a chosen plan -------------------------------------------------


def test_the_chosen_tools_are_required_in_order_and_the_narration_tells_them_all() -> None:
    choice = choose_by_cues(README_INPUT, SKILLS)
    profile = plan_profile(SKILLS, chosen=[c.scripts for c in choice.chosen])
    tools = profile.schema["properties"]["tools"]
    assert tools["minItems"] == tools["maxItems"] == 2
    # The model writes the inputs; code writes ids, paths, dependencies and the narration.
    written = {"tools": [{"input": {"action": "light"}}, {"input": {"target": "iron_door"}}]}
    accepts = Draft202012Validator(profile.schema).is_valid
    assert accepts(written)
    assert not accepts({"tools": written["tools"][:1]})
    assert not accepts({"tools": written["tools"][::-1]})
    plan = profile.to_plan(written, choice=choice.record())
    assert check_plan(plan) is None
    assert [(c.tool_id, c.tool_path, c.dependencies, c.required) for c in plan.tools] == [
        ("t1", "skills/torch-lighter/light.py", [], True),
        ("t2", "skills/door-examiner/examine.py", ["t1"], True),
        ("t3", "skills/storyteller/narrate.py", ["t1", "t2"], False),
    ]


def test_a_skill_of_several_scripts_is_written_with_the_script_it_calls() -> None:
    memory = tuple(offered for offered in offered_scripts(SKILLS) if offered.skill == "memory")
    profile = plan_profile(SKILLS, chosen=[memory])
    recall = {"toolPath": "skills/memory/recall.py", "input": {"query": "map"}}
    assert Draft202012Validator(profile.schema).is_valid({"tools": [recall]})
    assert [c.tool_path for c in profile.to_plan({"tools": [recall]}).tools] == [
        "skills/memory/recall.py",
        "skills/storyteller/narrate.py",
    ]


def test_an_empty_choice_allows_only_a_plan_without_tools() -> None:
    tools = plan_profile(SKILLS, chosen=[]).schema["properties"]["tools"]
    assert tools == {"type": "array", "maxItems": 0}


def test_a_chosen_plan_that_does_not_fit_or_calls_a_disabled_skill_is_refused() -> None:
    light = SKILLS.resolve("skills/torch-lighter/light.py")
    with pytest.raises(ValueError, match="do not fit"):
        plan_profile(SKILLS, chosen=[(light,)] * 4)
    plan_profile(SKILLS, chosen=[(light,)] * 3)
    with pytest.raises(ValueError, match="no enabled script"):
        plan_profile(SKILLS, disabled=["torch-lighter"], chosen=[(light,)])


# The model's choice ----------------------------------------------------------


@given(st.lists(st.sampled_from(sorted(SKILLS.skills)), max_size=6))
def test_the_choosing_step_offers_only_enabled_skills(disabled: list[str]) -> None:
    offered = sorted({script.skill for script in offered_scripts(SKILLS, disabled)})
    assert offered == sorted(set(ENABLED) - set(disabled))
    items = choice_profile(offered)["properties"]["skills"]
    assert items["maxItems"] == len(offered)
    assert items.get("items", {}).get("enum", []) == offered
    assert not narration_scripts(SKILLS, [*disabled, "storyteller"])


def test_the_choice_prompt(prompt_snapshot: PromptSnapshot) -> None:
    offered = [SKILLS.skills[name] for name in ENABLED]
    messages = choice_messages("I keep my torch burning", offered)
    assert render_chat(messages, None, answer="Skills JSON") == prompt_snapshot


def test_the_narrator_prompt_lists_only_the_chosen_scripts(
    prompt_snapshot: PromptSnapshot,
) -> None:
    from plancontracts.runtime.tool_plans.prompts import narrator_messages

    paths = {"skills/torch-lighter/light.py", "skills/storyteller/narrate.py"}
    messages = narrator_messages("I light my torch", SKILLS, scripts=paths)
    text = render_chat(messages, None)
    assert "door-examiner" not in text
    assert "skills/torch-lighter/light.py" in text
    assert text == prompt_snapshot


def run(planner: Planner, text: str, disabled: list[str] | None = None) -> Any:
    return trio.run(lambda: planner.plan(text, disabled=disabled or [], seed=1))


def called(plan: Any) -> list[str]:
    return [call.tool_path.split("/")[1] for call in plan.tools]


def test_the_real_model_never_chooses_a_disabled_skill(packaged_model: LocalModel) -> None:
    for disabled in ([], ["torch-lighter", "door-examiner"], ENABLED):
        choice = trio.run(
            partial(choose_by_model, packaged_model, README_INPUT, SKILLS, disabled, seed=1)
        )
        assert set(choice.skills) <= set(ENABLED) - set(disabled)
    planner = Planner(packaged_model, SKILLS, choosing="model")
    plan = run(planner, README_INPUT, ["torch-lighter"])
    assert check_plan(plan) is None
    assert "torch-lighter" not in called(plan)


def test_the_default_path_plans_what_the_input_calls_for(packaged_model: LocalModel) -> None:
    said: list[str] = []
    planner = Planner(packaged_model, SKILLS, say=said.append)
    plan = run(planner, README_INPUT)
    assert check_plan(plan) is None
    assert called(plan) == ["torch-lighter", "door-examiner", "storyteller"]
    assert isinstance(plan.metadata, PlanMetadata)
    assert isinstance(plan.metadata.choice, SkillChoice)
    assert plan.metadata.choice.by == "cues"
    assert choice_line(plan).startswith("skills chosen by cues: torch-lighter (cue ")
    # Disabled, the door is left out however the input asks for it.
    plan = run(planner, README_INPUT, ["door-examiner"])
    assert called(plan) == ["torch-lighter", "storyteller"]
    # An input that needs no skill gets a plan without one.
    plan = run(planner, "I sing a song to calm the horse")
    assert plan.tools == []
    assert plan.narrative
    assert choice_line(plan) == "skills chosen by cues: none"
    assert not said


def test_the_pattern_planner_says_what_its_patterns_chose() -> None:
    plan = pattern_plan("I light the torch and roll 2d6", skills=SKILLS)
    assert choice_line(plan) == (
        'skills chosen by patterns: torch-lighter (a pattern matched "light the torch"); '
        'dice-roller (a pattern matched "roll 2d6")'
    )


# The held-out inputs ----------------------------------------------------------


def test_no_held_out_input_is_in_a_prompt_cue_pattern_or_example_the_project_writes() -> None:
    data = json.loads((ROOT / "benchmarks" / "skill_inputs.json").read_text())
    written = [
        *(ROOT / "skills").rglob("*.json"),
        *(ROOT / "skills").rglob("*.md"),
        *(ROOT / "runtime" / "tool_plans").rglob("*.py"),
        *(ROOT / "runtime" / "tool_plans" / "templates").glob("*.md"),
    ]
    texts = " ".join(" ".join(path.read_text().lower().split()) for path in written)
    for share in ("held-out", "blind", "blind-2"):
        for text, _ in data[share]:
            words = " ".join(text.lower().rstrip(".?!").split())
            assert words not in texts, (share, text)
    # Each share has what the benchmark needs: every skill, pairs, triples and none.
    for share in ("tuning", "held-out", "blind", "blind-2"):
        sizes = {len(skills) for _, skills in data[share]}
        assert {0, 1, 2, 3} <= sizes, share
        assert {s for _, skills in data[share] for s in skills} == set(ENABLED), share
    held = len(data["held-out"]) + len(data["blind"]) + len(data["blind-2"])
    assert held * 3 >= held + len(data["tuning"])  # at least a third held out


def test_more_chosen_skills_than_a_plan_holds_are_cut_and_said() -> None:
    from local_servers import conforming, model_server

    from plancontracts.runtime.model import ServerSettings
    from plancontracts.runtime.model.served import ServedModel

    said: list[str] = []
    text = "I light the torch, examine the door, roll the dice, then recall the map"
    with model_server(conforming) as server:
        served = ServedModel.connect(ServerSettings(server.url), environ={}, say=said.append)
        plan = run(Planner(served, SKILLS, say=said.append), text)
    assert called(plan) == ["torch-lighter", "door-examiner", "dice-roller", "storyteller"]
    assert said[-1] == "planner: a plan calls at most 3 chosen tools; left out memory"
    assert isinstance(plan.metadata, PlanMetadata)
    assert isinstance(plan.metadata.choice, SkillChoice)
    assert [chosen.skill for chosen in plan.metadata.choice.skills] == called(plan)[:3]


# What a hostile user tried ---------------------------------------------------


def copied_skills(tmp_path: Path) -> Path:
    folder = tmp_path / "skills"
    shutil.copytree(ROOT / "skills", folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def test_the_profile_of_chosen_tools_refuses_what_it_did_not_allow() -> None:
    choice = choose_by_cues(README_INPUT, SKILLS)
    profile = plan_profile(SKILLS, chosen=[c.scripts for c in choice.chosen])
    light, door = {"input": {"action": "light"}}, {"input": {"target": "iron_door"}}
    wrong: list[Any] = [
        {"tools": [light]},
        {"tools": [light, door, door]},
        {"narrative": "x"},
        {"tools": [light, {"toolPath": "skills/dice-roller/roll.py", **door}]},
        {"tools": [light, {**door, "required": False}]},
        {"requestId": "00000000-0000-4000-8000-000000000000", "tools": [light, door]},
        {"tools": "two"},
        [light, door],
    ]
    for document in wrong:
        with pytest.raises(ProfileBug, match="the profile refuses"):
            profile.to_plan(document)
    other = choose_by_cues("I roll the dice", SKILLS).record()
    with pytest.raises(ProfileBug, match="is not the profile's tools"):
        profile.to_plan({"tools": [light, door]}, choice=other)


def test_a_narration_the_model_writes_tells_every_tool_and_is_not_required(
    tmp_path: Path,
) -> None:
    folder = copied_skills(tmp_path)
    schema_file = folder / "storyteller" / "narrate.input.json"
    schema = json.loads(schema_file.read_text())
    schema_file.write_text(json.dumps({**schema, "required": ["subject"]}))
    skills = discover_skills([folder])
    choice = choose_by_cues(README_INPUT, skills)
    profile = plan_profile(skills, chosen=[c.scripts for c in choice.chosen])
    story = {"input": {"subject": "the door"}}
    written = {"tools": [{"input": {"action": "light"}}, {"input": {"target": "door"}}, story]}
    plan = profile.to_plan(written, choice=choice.record())
    last = plan.tools[-1]
    assert (last.tool_path, last.dependencies, last.required) == (
        "skills/storyteller/narrate.py",
        ["t1", "t2"],
        False,
    )


def test_an_input_schema_no_profile_can_hold_is_planned_by_the_patterns(tmp_path: Path) -> None:
    folder = copied_skills(tmp_path)
    (folder / "torch-lighter" / "action.json").write_text(
        (folder / "torch-lighter" / "light.input.json").read_text()
    )
    (folder / "torch-lighter" / "light.input.json").write_text('{"$ref": "action.json"}')
    skills = discover_skills([folder])
    assert not skills.problems
    light = skills.resolve("skills/torch-lighter/light.py")
    with pytest.raises(GenerationFailed, match=r"light\.py has no profile: its reference"):
        plan_profile(skills, chosen=[(light,)])
    said: list[str] = []
    never = Planner(Unreachable(), skills, say=said.append)  # the model is never asked
    plan = run(never, "I light the torch")
    assert called(plan) == ["torch-lighter", "storyteller"]
    assert said == [
        "planner: the model failed (the input schema of skills/torch-lighter/light.py has "
        "no profile: its reference 'action.json' is not one of its own $defs); "
        "planning with patterns"
    ]


class Unreachable(WrittenWhole):
    async def write_chat(self, *args: Any, **options: Any) -> dict[str, Any]:
        raise AssertionError("the model was asked")


def test_cue_matching_stops_within_its_steps_and_says_what_it_left(tmp_path: Path) -> None:
    folder = copied_skills(tmp_path)
    manifest_file = folder / "torch-lighter" / "skill.json"
    manifest = json.loads(manifest_file.read_text())
    # A valid manifest of 64 distinct cues, each of whose 41 words reaches every input word.
    heavy = [" ".join(["the/a"] * number + ["a/the"] * (41 - number)) for number in range(64)]
    manifest["scripts"][0]["cues"] = heavy
    manifest_file.write_text(json.dumps(manifest))
    skills = discover_skills([folder])
    assert not skills.problems
    said: list[str] = []
    choice = trio.run(Planner(None, skills, say=said.append).choose, "the a " * 20_000)
    assert choice is not None
    assert choice.untried >= 1
    assert said[-1].startswith(f"planner: the cues of {choice.untried} scripts were not tried")


def test_cues_read_input_in_any_case_width_and_accent() -> None:
    full_width = "".join(chr(ord(letter) + 0xFEE0) for letter in "LIGHT")
    for text in (f"{full_width} THE TORCH", "L\u0130GHT the torch", "I l\u00edght the t\u00f3rch"):
        assert cued(text) == ["torch-lighter"], text
    assert cued("Don\u2019t forget the map") == cued("Don't forget the map") != []


def test_one_string_of_disabled_skills_and_an_unknown_way_of_choosing_are_refused() -> None:
    with pytest.raises(TypeError, match="not one string"):
        choose_by_cues(README_INPUT, SKILLS, "torch-lighter")
    with pytest.raises(TypeError, match="not one string"):
        run(Planner(None, SKILLS), README_INPUT, "torch-lighter")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="choosing is one of cues, model, plan"):
        Planner(None, SKILLS, choosing="bogus")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_tools must be at least 1"):
        plan_profile(SKILLS, max_tools=0)


def test_the_patterns_call_no_more_tools_than_a_plan_holds() -> None:
    plan = pattern_plan("I light the torch. " * 4000, skills=SKILLS)
    assert check_plan(plan) is None
    assert called(plan) == ["torch-lighter"] * 3 + ["storyteller"]


@pytest.mark.parametrize("cue", ["2d6", "'s", "20th", "light  torch", "... torch", "torch/"])
def test_a_cue_no_input_word_can_match_is_refused_at_discovery(tmp_path: Path, cue: str) -> None:
    folder = copied_skills(tmp_path)
    manifest_file = folder / "torch-lighter" / "skill.json"
    manifest = json.loads(manifest_file.read_text())
    manifest["scripts"][0]["cues"] = [cue]
    manifest_file.write_text(json.dumps(manifest))
    skills = discover_skills([folder])
    assert "torch-lighter" not in skills.skills
    (problem,) = skills.problems
    assert (
        "torch-lighter/skill.json: skipped, not a valid skill-manifest: /scripts/0/cues/0"
        in problem
    )
