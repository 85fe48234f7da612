"""Planning blocks from the local model: the decoding profile, the protocol prompt, generation.

Every document a block profile allows must map back to a block that is valid
in its mode and needs no repair; the real packaged model must write such
blocks; the planning check is rolled by code; the prompt shows every
description of the contract and is snapshot-tested.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from commands import cli, without_a_model
from fields import present
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from schema_strategies import valid_documents
from tiers import examples_at_most
from writers import WrittenWhole

from plancontracts import contract_schema, violations
from plancontracts.generated.planning_blocks import PlanQuality
from plancontracts.pytest_plugin import PromptSnapshot
from plancontracts.runtime.core.errors import GenerationFailed, ProfileBug
from plancontracts.runtime.core.profiles import WHITESPACE
from plancontracts.runtime.model.chat import render_chat
from plancontracts.runtime.model.local import LocalModel
from plancontracts.runtime.planning_blocks import (
    PLANNING_BLOCK,
    THINK_MODE,
    Mode,
    Thinker,
    block_profile,
    normalize_block,
    planning_messages,
    roll_check,
)
from plancontracts.runtime.planning_blocks.mechanics import RolledCheck, check_outcome
from plancontracts.runtime.planning_blocks.profiles import PLAIN_TEXT, choice_keys

MODES: list[Mode] = ["story", "think"]


# The profile -------------------------------------------------------------------------------


def nodes(schema: Any) -> list[dict[str, Any]]:
    found = []
    waiting = [schema]
    while waiting:
        node = waiting.pop()
        if isinstance(node, dict):
            found.append(node)
            waiting += node.values()
        elif isinstance(node, list):
            waiting += node
    return found


@pytest.mark.parametrize("mode", MODES)
def test_the_profile_is_closed_bounded_and_free_of_markup(mode: Mode) -> None:
    profile = block_profile(mode)
    schemas = [profile.schema] + ([profile.check_schema] if profile.check_schema else [])
    for schema in schemas:
        Draft202012Validator.check_schema(schema)
        assert schema["x-guidance"] == WHITESPACE
        for node in nodes(schema):
            if node.get("type") == "object":
                assert node["additionalProperties"] is False
                assert node["required"] == list(node["properties"])
            elif node.get("type") == "string" and "enum" not in node:
                assert node["maxLength"] <= 120
                assert node["pattern"] == PLAIN_TEXT
            elif node.get("type") == "array":
                assert 1 <= node["minItems"] <= node["maxItems"] <= 3
    # What code decides is never the model's to write.
    written = json.dumps(profile.schema) + json.dumps(profile.check_schema)
    for field in ("roll_result", "margin", "success", "quality_tier", "coordination_dc"):
        assert f'"{field}"' not in written


@pytest.mark.slow  # each example is a whole block drawn from the profile: a quarter second
@pytest.mark.parametrize("mode", MODES)
def test_every_document_the_profile_allows_is_a_valid_block_needing_no_repair(mode: Mode) -> None:
    profile = block_profile(mode, abilities={"Intelligence": 1, "Wisdom": 30})
    drawn = [0]

    @settings(max_examples=examples_at_most(300), suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        document = data.draw(valid_documents(profile.schema), label="document")
        assert Draft202012Validator(profile.schema).is_valid(document)
        decided = rolled = None
        if profile.check_schema is not None:
            decided = data.draw(valid_documents(profile.check_schema), label="decided")
            score = data.draw(st.integers(1, 30), label="score")
            rng = random.Random(data.draw(st.integers(), label="seed"))
            rolled = roll_check(decided["stat_used"], score, decided["dc"], rng)
        block = profile.to_block(document, decided=decided, check=rolled)
        assert list(block.choices)[-1] == "parallel_execution"
        analysis = present(block.analysis, "analysis")
        assert analysis.recommended_approach == next(iter(block.choices))
        drawn[0] += 1

    check()
    assert drawn[0] >= examples_at_most(300)


def written(text: str) -> dict[str, Any]:
    """One choice as the profile has the model write it."""
    return {
        "text": text,
        "description": f"{text}, carefully.",
        "risk_level": "low",
        "pros": ["Quick"],
        "cons": ["Noisy"],
        "confidence": "medium",
    }


def test_a_think_profile_needs_its_check_and_a_bad_document_is_a_profile_bug() -> None:
    document: dict[str, Any] = {
        "thinking": "Two ways across.",
        "context": "The ford",
        "recommended": written("Wade across"),
        "alternatives": [written("Take the bridge")],
        "parallel": {
            **written("Split up"),
            "analysis": {
                "delegation_targets": ["Ana takes the bridge"],
                "personal_focus": "Wading",
                "base_dc": 12,
                "complexity": "moderate",
            },
        },
        "analysis": {"reasoning": "The river is low.", "contingency": "Swim."},
    }
    story = block_profile("story")
    assert Draft202012Validator(story.schema).is_valid(document)
    block = story.to_block(document)
    assert list(block.choices) == ["wade_across", "take_the_bridge", "parallel_execution"]
    parallel = present(block.choices["parallel_execution"].analysis, "parallel_execution.analysis")
    assert parallel.coordination_dc == 12 + 2 + 1
    with pytest.raises(ValueError, match="needs its decided and rolled planning check"):
        block_profile("think").to_block(document)
    document["recommended"]["text"] = "<b>Run</b>"
    with pytest.raises(ProfileBug, match="needed repairs"):
        story.to_block(document)


@pytest.mark.parametrize(
    ("texts", "keys"),
    [
        (["Bribe the guard", "Climb the wall"], ["bribe_the_guard", "climb_the_wall"]),
        (["Attack", "Attack", "attack!"], ["attack", "attack_2", "attack_3"]),
        (["倉庫", "🗡️"], ["choice_1", "choice_2"]),
        (["2 arrows", "Parallel parking"], ["choice_2_arrows", "option_parallel_parking"]),
        (["Éclair à minuit"], ["eclair_a_minuit"]),
    ],
)
def test_choice_keys_come_from_the_labels_distinct_and_never_the_parallel_option(
    texts: list[str], keys: list[str]
) -> None:
    assert choice_keys(texts) == keys


# The prompt ---------------------------------------------------------------------------------

A_ROLL = RolledCheck("Intelligence", 14, "+2", 15, 17, 12, check_outcome(17, 12))


@pytest.mark.parametrize(
    ("mode", "check"),
    [("story", None), ("think", None), ("think", A_ROLL)],
    ids=["story", "think-check", "think-block"],
)
def test_the_planning_prompt(
    prompt_snapshot: PromptSnapshot, mode: Mode, check: RolledCheck | None
) -> None:
    messages = planning_messages("A bored guard watches the bridge at dusk", mode, check=check)
    prompt = render_chat(messages, None, answer="Planning block JSON")
    assert prompt == prompt_snapshot


def test_the_prompt_loses_no_description_of_the_contract() -> None:
    system = planning_messages("x", "story")[0]["content"]
    schema = contract_schema("planning-block")
    annotations = {key: value for key, value in schema.items() if key != "examples"}
    descriptions = [
        node["description"]
        for node in nodes(annotations)
        if isinstance(node.get("description"), str)
    ]
    assert len(descriptions) > 40
    for description in descriptions:
        assert description.strip().rstrip(".") in system, description
    for enum in ("risk-level", "confidence", "quality-tier"):
        for value in schema["$defs"][enum]["enum"]:
            assert f"`{value}`" in system


# Generation with the real packaged model ----------------------------------------------------


@pytest.fixture
def thinker(packaged_model: LocalModel) -> Thinker:
    return Thinker(packaged_model, say=lambda line: None)


def test_the_model_writes_a_valid_story_block(thinker: Thinker) -> None:
    thought = trio.run(lambda: thinker.think("A rope bridge sways over the gorge", seed=5))
    assert thought.mode == "story"
    assert thought.check is None
    checked = msgspec.to_builtins(thought.block)
    assert violations(PLANNING_BLOCK, checked) == ()
    assert normalize_block(checked, "story").repairs == ()
    assert list(thought.block.choices)[-1] == "parallel_execution"


def test_in_think_mode_code_rolls_the_check_and_fills_plan_quality(thinker: Thinker) -> None:
    seed = 11
    scores = {"Intelligence": 18, "Wisdom": 6}
    thought = trio.run(
        lambda: thinker.think("THINK: how do we cross the gorge?", abilities=scores, seed=seed)
    )
    assert (thought.mode, thought.situation) == ("think", "how do we cross the gorge?")
    checked = msgspec.to_builtins(thought.block)
    assert violations(PLANNING_BLOCK, checked, rules=THINK_MODE) == ()
    assert normalize_block(checked, "think").repairs == ()
    quality = thought.block.plan_quality
    assert isinstance(quality, PlanQuality)
    assert thought.check is not None
    assert thought.check.roll_result == quality.roll_result
    d20 = random.Random(seed).randint(1, 20)
    modifier = (scores[quality.stat_used] - 10) // 2
    assert quality.stat_value == scores[quality.stat_used]
    assert quality.roll_result == d20 + modifier
    assert quality.modifier == f"{modifier:+d}"
    assert quality.quality_tier == check_outcome(quality.roll_result, quality.dc).quality_tier


@pytest.mark.usefixtures("shared_model")
def test_the_think_command_prints_blocks_valid_in_their_mode(tmp_path: Path) -> None:
    done = cli("think", "--seed", "2", "--no-download", "--mode", "think", "Wolves circle the camp")
    assert done.returncode == 0, done.stderr
    assert (
        "think: Intelligence check: d20 " in done.stderr
        or "think: Wisdom check: d20 " in done.stderr
    )
    [line] = done.stdout.splitlines()
    assert violations(PLANNING_BLOCK, json.loads(line), rules=THINK_MODE) == ()


def test_a_situation_too_long_for_the_context_is_a_generation_failure(thinker: Thinker) -> None:
    with pytest.raises(GenerationFailed, match="exceed context window"):
        trio.run(lambda: thinker.think("The wind howls. " * 6000))


def test_an_empty_situation_is_refused_before_any_model_loads() -> None:
    for situation in ("THINK:", "   "):
        done = cli("think", situation)
        assert done.returncode == 2
        assert "an empty situation" in done.stderr
        assert "model:" not in done.stderr


def test_without_a_model_the_think_command_says_so(tmp_path: Path) -> None:
    done = without_a_model("think", "Wolves circle the camp", "--no-download", hub_cache=tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "no model could be loaded, and planning blocks need one" in done.stderr
    assert "Traceback" not in done.stderr


def test_integral_floats_a_server_writes_are_whole_numbers_in_the_block() -> None:
    # JSON Schema's integer holds 12.0, which a server's JSON may well write; the
    # block holds 12, as every contract's conversion gives it, not msgspec's refusal.
    document: dict[str, Any] = {
        "thinking": "Two ways across.",
        "context": "The ford",
        "recommended": written("Wade across"),
        "alternatives": [written("Take the bridge")],
        "parallel": {
            **written("Split up"),
            "analysis": {
                "delegation_targets": ["Ana takes the bridge"],
                "personal_focus": "Wading",
                "base_dc": 12.0,
                "complexity": "moderate",
            },
        },
        "analysis": {"reasoning": "The river is low.", "contingency": "Swim."},
    }
    story = block_profile("story")
    assert Draft202012Validator(story.schema).is_valid(document)
    block = story.to_block(document)
    parallel = present(block.choices["parallel_execution"].analysis, "parallel_execution.analysis")
    assert (parallel.base_dc, parallel.coordination_dc) == (12, 12 + 2 + 1)
    assert type(parallel.base_dc) is int
    assert type(parallel.coordination_dc) is int


class _AnswersInTurn(WrittenWhole):  # as a server sends it: 12.0 stays a float
    """A writer answering each call with the next of `answers`, as a server's JSON decoded."""

    def __init__(self, *answers: dict[str, Any]) -> None:
        self.answers = list(answers)

    async def write_chat(
        self,
        messages: Any,
        schema: dict[str, Any],
        *,
        answer: str,
        max_tokens: int,
        seed: int | None,
    ) -> dict[str, Any]:
        assert Draft202012Validator(schema).is_valid(self.answers[0])  # what a profile lets through
        return self.answers.pop(0)


def test_a_think_mode_check_whose_dc_a_server_writes_as_a_float_is_rolled_and_kept() -> None:
    decided = {
        "stat_used": "Intelligence",
        "dc": 12.0,
        "dc_category": "Moderate",
        "dc_reasoning": "A known ford.",
    }
    document: dict[str, Any] = {
        "thinking": "Two ways across.",
        "context": "The ford",
        "recommended": written("Wade across"),
        "alternatives": [written("Take the bridge")],
        "parallel": {
            **written("Split up"),
            "analysis": {
                "delegation_targets": ["Ana takes the bridge"],
                "personal_focus": "Wading",
                "base_dc": 12.0,
                "complexity": "moderate",
            },
        },
        "analysis": {"reasoning": "The river is low.", "contingency": "Swim."},
        "plan_quality": {"effect": "A clear plan."},
        "situation_assessment": {
            "current_state": "At the ford",
            "key_factors": ["Low water"],
            "constraints": ["Cold"],
            "resources_available": ["Rope"],
        },
    }
    lines: list[str] = []
    thinker = Thinker(_AnswersInTurn(decided, document), say=lines.append)
    thought = trio.run(lambda: thinker.think("THINK: cross the ford", seed=1))
    quality = present(thought.block.plan_quality, "plan_quality")
    assert type(quality.dc) is int
    assert quality.dc == 12
    assert "12.0" not in lines[0]
