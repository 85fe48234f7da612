"""Planning blocks: the protocol's rules beyond the schema, the explicit repair step, upstream data.

Every rule has its own message at its own pointer. `normalize_block` repairs
only what the protocol calls repairable (the planning check's derived fields,
the parallel option's place, markup) and reports each repair; everything
else stays a violation. The upstream project's published examples are
judged as the project's users would judge them.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
from commands import cli
from fields import present
from hypothesis import example, given, settings
from hypothesis import strategies as st
from schema_strategies import JSON_VALUES
from tiers import examples_at_most

from plancontracts import ContractError, Violation, decode, violations
from plancontracts.runtime.core.errors import MAX_VIOLATIONS
from plancontracts.runtime.core.jsontext import parse
from plancontracts.runtime.core.repairs import ABSENT
from plancontracts.runtime.planning_blocks import (
    PLANNING_BLOCK,
    STORY_MODE,
    THINK_MODE,
    Mode,
    Repair,
    normalize_block,
    rules_in,
)
from plancontracts.runtime.planning_blocks.mechanics import is_parallel, situational_keys
from plancontracts.runtime.planning_blocks.profiles import PLAIN_TEXT


def story_block() -> dict[str, Any]:
    """A valid Story-mode block: two situational choices and the parallel option, last."""
    return {
        "context": "The gate at dusk",
        "choices": {
            "bribe_guard": {
                "text": "Bribe the guard",
                "description": "Slip him silver to look away.",
                "risk_level": "low",
                "confidence": "high",
            },
            "climb_wall": {
                "text": "Climb the wall",
                "description": "Go over the wall by the old oak.",
                "risk_level": "high",
                "confidence": "low",
            },
            "parallel_gate": {
                "text": "Both at once",
                "description": "Your friend bribes the guard while you climb.",
                "risk_level": "medium",
                "analysis": {"base_dc": 12, "complexity": "simple", "coordination_dc": 14},
            },
        },
        "analysis": {"recommended_approach": "bribe_guard"},
    }


def think_block() -> dict[str, Any]:
    """A valid Think-mode block."""
    return {
        "thinking": "The guard is bored; the wall is high but unwatched.",
        "plan_quality": {
            "stat_used": "Intelligence",
            "stat_value": 14,
            "modifier": "+2",
            "roll_result": 17,
            "dc": 12,
            "dc_category": "Careful planning",
            "dc_reasoning": "Two routes, one guard",
            "success": True,
            "margin": 5,
            "quality_tier": "Sharp",
            "effect": "Both routes are clear.",
        },
        "situation_assessment": {"current_state": "Outside the gate at dusk"},
        **story_block(),
    }


def messages(value: Any, mode: Mode = "story") -> list[tuple[str, str]]:
    return [(v.pointer, v.message) for v in violations(PLANNING_BLOCK, value, rules=rules_in(mode))]


def test_the_example_blocks_are_valid_in_their_modes() -> None:
    assert violations(PLANNING_BLOCK, story_block()) == ()
    assert violations(PLANNING_BLOCK, think_block(), rules=THINK_MODE) == ()
    block = decode(PLANNING_BLOCK, json.dumps(think_block()), rules=THINK_MODE)
    assert present(block.plan_quality, "plan_quality").quality_tier == "Sharp"


# The rules, one message each ------------------------------------------------------------


def test_a_choice_key_must_be_snake_case() -> None:
    block = story_block()
    del block["analysis"]
    block["choices"] = {"SneakPast": block["choices"]["bribe_guard"]}
    assert messages(block) == [
        (
            "/choices/SneakPast",
            'choice key "SneakPast" is not snake_case: a choice id is lower-case words and '
            'digits joined by "_", starting with a letter, optionally prefixed "god:" or '
            '"think:" (for example "sneak_past")',
        )
    ]


def test_the_parallel_option_comes_last() -> None:
    block = story_block()
    choices = block["choices"]
    block["choices"] = {"parallel_gate": choices["parallel_gate"], **choices}
    assert messages(block) == [
        (
            "/choices/parallel_gate",
            "the parallel option is choice 1 of 3; it must come last (normalize moves it)",
        )
    ]


def test_a_block_offers_at_most_one_parallel_option() -> None:
    block = story_block()
    block["choices"]["parallel_more"] = copy.deepcopy(block["choices"]["parallel_gate"])
    found = messages(block)
    assert (
        "/choices",
        '2 parallel options ("parallel_gate", "parallel_more"); a block offers one',
    ) in found


def test_a_parallel_option_needs_two_situational_choices() -> None:
    block = story_block()
    del block["choices"]["climb_wall"]
    block["choices"]["think:continue"] = {"text": "Keep thinking", "description": "Plan on."}
    block["choices"]["parallel_gate"] = block["choices"].pop("parallel_gate")
    assert messages(block) == [
        (
            "/choices/parallel_gate",
            "a parallel option runs 2 or more situational choices together; this block has 1",
        )
    ]


def test_only_the_parallel_option_has_an_analysis() -> None:
    block = story_block()
    block["choices"]["bribe_guard"]["analysis"] = {"personal_focus": "talking"}
    assert messages(block) == [
        (
            "/choices/bribe_guard/analysis",
            'only the parallel option (key "parallel" or "parallel_...") has an analysis',
        )
    ]


@pytest.mark.parametrize(
    ("analysis", "message"),
    [
        (
            {"base_dc": 12, "complexity": "simple", "coordination_dc": 16},
            "is 16, but base_dc 12 + 2 for each of 1 more task + 0 for simple complexity = 14",
        ),
        (
            {"base_dc": 12, "complexity": "complex", "coordination_dc": 14},
            "is 14, but base_dc 12 + 2 for each of 1 more task + 2 for complex complexity = 16",
        ),
        (
            {"coordination_dc": 6},
            "is 6, but the least DC 5 + 2 for each of 1 more task + 0 for simple complexity is 7",
        ),
    ],
)
def test_the_coordination_dc_follows_the_rule_of_2_per_additional_task(
    analysis: dict[str, Any], message: str
) -> None:
    block = story_block()
    block["choices"]["parallel_gate"]["analysis"] = analysis
    assert messages(block) == [("/choices/parallel_gate/analysis/coordination_dc", message)]


def test_the_coordination_dc_counts_situational_choices_only() -> None:
    block = story_block()
    parallel = block["choices"].pop("parallel_gate")
    block["choices"]["think:return_story"] = {"text": "Act now", "description": "Stop planning."}
    block["choices"]["search_cart"] = {"text": "Search the cart", "description": "Look."}
    parallel["analysis"] = {"base_dc": 12, "coordination_dc": 16}  # three tasks: 12 + 2 + 2
    block["choices"]["parallel_gate"] = parallel
    assert violations(PLANNING_BLOCK, block) == ()


def test_a_base_dc_too_high_for_its_tasks_is_named_as_the_culprit() -> None:
    block = story_block()
    block["choices"]["parallel_gate"]["analysis"] = {"base_dc": 39, "coordination_dc": 40}
    assert messages(block) == [
        (
            "/choices/parallel_gate/analysis/base_dc",
            "is 39, too high: base_dc + 2 for each of 1 more task + 0 for simple complexity "
            "is 41, above the highest DC, 40",
        )
    ]


def test_the_recommended_approach_names_a_choice() -> None:
    block = story_block()
    block["analysis"]["recommended_approach"] = "swim_moat"
    assert messages(block) == [
        (
            "/analysis/recommended_approach",
            'names "swim_moat", which is not a choice of this block (its choices are '
            '"bribe_guard", "climb_wall", "parallel_gate")',
        )
    ]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("margin", 6, "is 6, but roll_result - dc is 17 - 12 = 5 (normalize recomputes it)"),
        ("success", False, "is false, but roll_result 17 reaches dc 12 (normalize recomputes it)"),
        (
            "quality_tier",
            "Brilliant",
            'is "Brilliant", but a success by 5 is "Sharp" (normalize recomputes it)',
        ),
    ],
)
def test_the_planning_check_is_consistent(field: str, value: Any, message: str) -> None:
    block = think_block()
    block["plan_quality"][field] = value
    assert messages(block) == [(f"/plan_quality/{field}", message)]


def test_text_is_plain_text() -> None:
    block = story_block()
    block["choices"]["climb_wall"]["text"] = "<b>Climb</b> the wall"
    assert messages(block) == [
        (
            "/choices/climb_wall/text",
            'holds HTML markup ("<b>Climb</b> the wall"); text fields are plain text '
            "(normalize removes the markup)",
        )
    ]


def test_control_characters_are_not_text() -> None:
    block = story_block()
    block["context"] = "Red \x1b[31malert\x1b[0m\x07 at the gate\ttonight\r\n"
    assert messages(block) == [
        (
            "/context",
            "holds control characters (U+001B, U+0007); text fields are plain text "
            "(normalize removes the control characters)",
        )
    ]
    result = normalize_block(block)
    assert result.value["context"] == "Red [31malert[0m at the gate\ttonight\r\n"
    assert result.repairs[0].reason == "control characters removed: text is plain text"
    assert result.valid


def test_strings_the_schema_constrains_are_judged_never_rewritten() -> None:
    block = story_block()
    block["choices"]["climb_wall"]["risk_level"] = "<b>high</b>"
    block["analysis"]["recommended_approach"] = "<script>x</script>"
    result = normalize_block(block)
    assert result.repairs == ()
    assert [v.pointer for v in result.violations] == [
        "/analysis/recommended_approach",
        "/analysis/recommended_approach",
        "/choices/climb_wall/risk_level",
    ]
    assert not any("markup" in v.message for v in result.violations)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('Pick one: {"choices": {"run": {}}}', '{"choices": {"run": {}}}'),
        ('planning_block: {"a": 1}', '{"a": 1}'),
        ('Then "risk_level": "high"', '"risk_level": "high"'),
        ('"planning_block" : here', '"planning_block" : here'),
    ],
)
def test_a_text_that_holds_the_blocks_json_is_refused(text: str, shown: str) -> None:
    block = story_block()
    block["choices"]["climb_wall"]["description"] = text
    assert messages(block) == [
        (
            "/choices/climb_wall/description",
            f"holds planning-block JSON ({json.dumps(shown)}); the block's fields stay "
            "structured, and its texts are prose",
        )
    ]


@pytest.mark.parametrize(
    "text",
    [
        'He said "run", and ran.',
        '"Choices," she sighs, "are all I have."',
        "The choices: run or hide.",
        "A brace } alone, and risk_level: high, unquoted.",
    ],
)
def test_prose_that_quotes_speech_or_names_a_field_is_prose(text: str) -> None:
    block = story_block()
    block["context"] = text
    assert messages(block) == []


@settings(max_examples=examples_at_most(300))
@given(text=st.from_regex(PLAIN_TEXT, fullmatch=True))
def test_no_text_the_model_may_write_holds_the_blocks_json(text: str) -> None:
    # Every text of a generated block matches the profile's pattern.
    block = story_block()
    block["context"] = text
    assert not [m for _, m in messages(block) if "planning-block JSON" in m]


def test_the_models_text_pattern_keeps_speech_and_refuses_json() -> None:
    for prose in ['He said "run".', '"Go," she said', 'end"', "risk_level: high"]:
        assert re.fullmatch(PLAIN_TEXT, prose), prose
    for leak in ['a "choices": 1', 'a "choices" : 1', '{"a"', "x { y", "<b>", " lead"]:
        assert not re.fullmatch(PLAIN_TEXT, leak), leak


def test_a_flood_of_markup_is_reported_in_bounded_form() -> None:
    block = {**story_block(), "extra": ["<i>"] * 100_000}
    found = violations(PLANNING_BLOCK, block)
    assert len(found) == MAX_VIOLATIONS  # the first found, and word that there are more
    assert not found.complete
    assert found[0] == Violation("/extra", 'unknown field "extra"')
    assert found[1].pointer == "/extra/0"


def test_prose_with_angle_brackets_and_ampersands_is_plain_text() -> None:
    block = story_block()
    block["context"] = "HP < 10 & falling; Tonight = danger <3"
    assert violations(PLANNING_BLOCK, block) == ()


def test_think_mode_requires_its_fields_and_the_parallel_option() -> None:
    block = story_block()
    del block["choices"]["parallel_gate"]
    assert violations(PLANNING_BLOCK, block) == ()  # Story mode: both optional
    assert messages(block, "think") == [
        ("", 'missing "plan_quality", which Think mode requires'),
        ("", 'missing "situation_assessment", which Think mode requires'),
        ("", 'missing "thinking", which Think mode requires'),
        (
            "/choices",
            "2 situational choices and no parallel option: in Think mode a block with 2 or more "
            'offers one, last (key "parallel_..."), unless parallel_exclusion says why not',
        ),
    ]


def test_a_block_may_say_why_it_offers_no_parallel_option() -> None:
    block = think_block()
    del block["choices"]["parallel_gate"]
    block["parallel_exclusion"] = "mutually_exclusive"
    assert violations(PLANNING_BLOCK, block, rules=THINK_MODE) == ()
    block["choices"]["parallel_gate"] = story_block()["choices"]["parallel_gate"]
    assert messages(block, "think") == [
        (
            "/parallel_exclusion",
            'says why the block offers no parallel option, but "parallel_gate" is one',
        )
    ]


def test_meta_choices_alone_need_no_parallel_option() -> None:
    block = think_block()
    block["choices"] = {
        "think:continue": {"text": "Keep thinking", "description": "Plan further."},
        "think:return_story": {"text": "Act", "description": "Back to the story."},
    }
    block["analysis"]["recommended_approach"] = "think:continue"
    assert violations(PLANNING_BLOCK, block, rules=THINK_MODE) == ()


def test_an_unknown_mode_is_refused() -> None:
    # Not a Mode, on purpose: a caller mypy did not check gets this error.
    with pytest.raises(ValueError, match=r"mode is 'story' or 'think', not 'dream'"):
        rules_in("dream")  # type: ignore[arg-type]


def test_the_typed_path_applies_the_rules_too() -> None:
    block = story_block()
    block["analysis"]["recommended_approach"] = "swim_moat"
    with pytest.raises(ContractError) as raised:
        decode("planning-block", json.dumps(block))
    assert [v.pointer for v in raised.value.violations] == ["/analysis/recommended_approach"]


def test_a_frozen_plan_freezes_for_the_hours_its_dc_sets_from_its_failure() -> None:
    entry = {
        "failed_at": 7_200_000_000,
        "freeze_until": 10_800_000_000,
        "original_dc": 14,
        "freeze_hours": 1,
        "description": "planning the ambush",
    }
    with pytest.raises(ContractError) as raised:
        decode("frozen-plans", json.dumps({"ambush": entry}))
    assert [(v.pointer, v.message) for v in raised.value.violations] == [
        ("/ambush/freeze_hours", "is 1, but a failed check at DC 14 freezes for 4 hours"),
    ]
    entry["freeze_hours"] = 4
    with pytest.raises(ContractError) as raised:
        decode("frozen-plans", json.dumps({"ambush": entry}))
    assert [(v.pointer, v.message) for v in raised.value.violations] == [
        ("/ambush/freeze_until", "is 10800000000, but failed_at + 4 hours is 21600000000"),
    ]


# Normalization -----------------------------------------------------------------------------


def test_normalize_repairs_the_check_the_order_and_markup_and_reports_each_repair() -> None:
    block = think_block()
    block["plan_quality"].update(margin=999, success=False, quality_tier="NotARealTier")
    del block["plan_quality"]["margin"]
    choices = block["choices"]
    block["choices"] = {"parallel_gate": choices["parallel_gate"], **choices}
    block["thinking"] = "Look <script>alert(1)</script>closer"
    before = copy.deepcopy(block)
    result = normalize_block(block, "think")
    assert block == before  # the input is left alone
    assert result.repairs == (
        Repair(
            "/thinking", before["thinking"], "Look closer", "markup removed: text is plain text"
        ),
        Repair("/plan_quality/margin", ABSENT, 5, "follows from roll_result 17 and dc 12"),
        Repair("/plan_quality/success", False, True, "follows from roll_result 17 and dc 12"),
        Repair(
            "/plan_quality/quality_tier",
            "NotARealTier",
            "Sharp",
            "follows from roll_result 17 and dc 12",
        ),
        Repair(
            "/choices",
            ["parallel_gate", "bribe_guard", "climb_wall"],
            ["bribe_guard", "climb_wall", "parallel_gate"],
            "the parallel option comes last",
        ),
    )
    assert result.valid
    assert list(result.value["choices"]) == ["bribe_guard", "climb_wall", "parallel_gate"]
    assert str(result.repairs[1]) == (
        "/plan_quality/margin: (absent) -> 5 (follows from roll_result 17 and dc 12)"
    )
    assert normalize_block(result.value, "think").repairs == ()


def test_a_check_out_of_bounds_is_left_to_the_schema() -> None:
    block = think_block()
    block["plan_quality"].update(dc=1000, margin=5.0)
    result = normalize_block(block, "think")
    assert result.repairs == ()  # nothing follows from a DC the contract refuses
    assert [(v.pointer, v.message) for v in result.violations] == [
        ("/plan_quality/dc", "1000 is greater than the maximum 40"),
    ]
    integral = think_block()
    integral["plan_quality"]["margin"] = 5.0  # JSON Schema's integer 5
    assert normalize_block(integral, "think").repairs == ()


def test_normalize_changes_nothing_it_may_not_repair() -> None:
    block = story_block()
    block["choices"]["bribe_guard"]["risk_level"] = "moderate"
    block["choices"]["Climb"] = block["choices"].pop("climb_wall")
    del block["choices"]["Climb"]["description"]
    block["choices"]["parallel_gate"] = block["choices"].pop("parallel_gate")
    result = normalize_block(block)
    assert result.repairs == ()
    assert result.value == block
    assert [v.pointer for v in result.violations] == [
        "/choices/Climb",
        "/choices/Climb",
        "/choices/bribe_guard/risk_level",
    ]
    listed = normalize_block({"choices": ["Option A", "Option B"]})
    assert listed.repairs == ()
    assert listed.violations == (Violation("/choices", "expected an object, got an array"),)


@given(JSON_VALUES)
# A control character hid markup: removing it made `<?`, which one pass left behind.
@example({"": "<\x1f?"})
def test_normalize_takes_any_json_value_and_repairs_nothing_that_needs_no_repair(
    value: Any,
) -> None:
    result = normalize_block(value)
    if not result.repairs:
        assert result.value == value
    assert normalize_block(result.value).repairs == ()


def test_deeply_nested_and_large_values_are_judged_without_a_traceback() -> None:
    deep: Any = "<b>deep</b>"
    for _ in range(990):
        deep = [deep]
    block = {**story_block(), "extra": deep}
    result = normalize_block(block)
    assert result.repairs[0].pointer == "/extra" + "/0" * 990
    assert Violation("/extra", 'unknown field "extra"') in result.violations
    wide = story_block()
    wide["context"] = "x < y " * 300_000
    assert [v.pointer for v in violations(PLANNING_BLOCK, wide)] == [
        "/context"
    ]  # too long, and only that


# Upstream examples (../shared/upstream/worldarchitect) -------------------------------------

# What each upstream invalid example does wrong, as a pointer and part of its message.
INVALID = {
    "invalid_choice_missing_description.json": (
        "/choices/defend",
        'missing required field "description"',
    ),
    "invalid_choices_list_of_strings.json": ("/choices", "expected an object, got an array"),
    "invalid_divine_numeric_choice_keys.json": ("/choices/1", 'choice key "1" is not snake_case'),
    "invalid_god_mode_string_switch_flag.json": (
        "/choices/god:return_story/switch_to_story_mode",
        'expected true or false, got the string "true"',
    ),
    "invalid_html_script_injection.json": ("/choices/touch_frame/text", "holds HTML markup"),
    "invalid_legacy_string_planning_block.json": ("", "expected an object, got the string"),
    "invalid_plan_quality_margin_inconsistent.json": (
        "/plan_quality/margin",
        "is 999, but roll_result - dc is 15 - 10 = 5",
    ),
    "invalid_plan_quality_success_contradicts_roll.json": (
        "/plan_quality/success",
        "is true, but roll_result 8 is below dc 12",
    ),
    "invalid_plan_quality_tier_contradicts_margin.json": (
        "/plan_quality/quality_tier",
        'is "Masterful", but a success by 2 is "Competent"',
    ),
    "invalid_plan_quality_unknown_tier.json": (
        "/plan_quality/quality_tier",
        '"NotARealTier" is not one of',
    ),
    "invalid_string_valued_choice.json": (
        "/choices/Continue",
        "expected an object, got the string",
    ),
    "invalid_think_mock_nonschema_plan_quality.json": ("/options", 'unknown field "options"'),
    "invalid_think_template_placeholder_enums.json": (
        "/choices/approach_1/risk_level",
        '"safe|low|medium|high" is not one of',
    ),
    "invalid_v1_pascalcase_string_choices.json": (
        "/choices/AIGenerated",
        'choice key "AIGenerated" is not snake_case',
    ),
    "invalid_xss_inside_choice_analysis.json": (
        "/choices/test_choice/analysis/pros/0",
        "holds HTML markup",
    ),
}
# Decisions on the examples upstream could not judge, with the reason:
UNKNOWN = {
    # A later upstream revision turned `choices` into a list of objects with `id`
    # (and added `freeze_time`); the contract keeps the object keyed by choice id.
    "unknown_later_freeze_time_level_up.json": ("/choices", "expected an object, got an array"),
    "unknown_later_list_choices_parallel.json": ("/choices", "expected an object, got an array"),
    # `thinking` is optional in Story mode: valid there (Think mode would need it).
    "unknown_no_thinking_field.json": None,
    # `risk_level` is optional, and meta choices alone need no parallel option: valid.
    "unknown_think_prefixed_no_risk_level.json": None,
    # pros, cons and confidence belong to the choice, not to the parallel option's analysis.
    "unknown_user_reported_legacy_analysis_block.json": (
        "/choices/magical_oaths_binding/analysis/pros",
        'unknown field "pros"',
    ),
}


def upstream_examples(upstream: Path, prefix: str) -> list[Path]:
    found = sorted((upstream / "worldarchitect").glob(f"{prefix}_*.json"))
    assert found, f"no {prefix}_* examples in {upstream}"
    return found


def test_every_valid_upstream_block_passes_without_repair(upstream: Path) -> None:
    for path in upstream_examples(upstream, "valid"):
        assert decode(PLANNING_BLOCK, path.read_bytes()), path.name
        assert normalize_block(parse(path.read_bytes())).repairs == (), path.name


# The upstream project's valid Story-mode blocks with 2 or more situational choices and
# no parallel option: why Story mode does not require one (see the schema's decisions).
STORY_WITHOUT_PARALLEL = {
    "valid_combat_end_four_choices.json",
    "valid_rewards_level_up_template.json",
    "valid_story_mode_two_choices.json",
    "valid_tactical_five_choices.json",
    "valid_unicode_emoji_choices.json",
}


def test_upstreams_own_story_blocks_are_why_the_parallel_option_is_think_modes_only(
    upstream: Path,
) -> None:
    found = set()
    for path in upstream_examples(upstream, "valid"):
        block = parse(path.read_bytes())
        keys = list(block["choices"])
        if len(situational_keys(keys)) >= 2 and not any(map(is_parallel, keys)):
            found.add(path.name)
            assert violations(PLANNING_BLOCK, block, rules=STORY_MODE) == (), path.name
            think = violations(PLANNING_BLOCK, block, rules=THINK_MODE)
            assert any("situational choices and no parallel option" in v.message for v in think)
    assert found == STORY_WITHOUT_PARALLEL


def test_every_invalid_upstream_block_is_caught_for_its_actual_defect(upstream: Path) -> None:
    paths = upstream_examples(upstream, "invalid")
    assert {path.name for path in paths} == set(INVALID), "an example without an expectation"
    for path in paths:
        pointer, fragment = INVALID[path.name]
        found = violations(PLANNING_BLOCK, parse(path.read_bytes()))
        assert any(v.pointer == pointer and fragment in v.message for v in found), (
            path.name,
            found,
        )


def test_repairable_upstream_defects_are_repaired_and_reported(upstream: Path) -> None:
    folder = upstream / "worldarchitect"
    for name, pointer in [
        ("invalid_plan_quality_margin_inconsistent.json", "/plan_quality/margin"),
        ("invalid_plan_quality_success_contradicts_roll.json", "/plan_quality/success"),
        ("invalid_plan_quality_tier_contradicts_margin.json", "/plan_quality/quality_tier"),
        ("invalid_html_script_injection.json", "/choices/touch_frame/text"),
    ]:
        result = normalize_block(parse((folder / name).read_bytes()))
        assert pointer in [repair.pointer for repair in result.repairs], name
        assert result.valid, (name, result.violations)


def test_unknown_upstream_blocks_get_the_documented_decision(upstream: Path) -> None:
    paths = upstream_examples(upstream, "unknown")
    assert {path.name for path in paths} == set(UNKNOWN), "an example without a decision"
    for path in paths:
        found = violations(PLANNING_BLOCK, parse(path.read_bytes()))
        decision = UNKNOWN[path.name]
        if decision is None:
            assert found == (), (path.name, found)
        else:
            pointer, fragment = decision
            assert any(v.pointer == pointer and fragment in v.message for v in found), found


# The command line --------------------------------------------------------------------------


def test_validate_judges_a_block_in_the_mode_asked_for(tmp_path: Path) -> None:
    path = tmp_path / "block.json"
    block = story_block()
    del block["choices"]["parallel_gate"]
    path.write_text(json.dumps(block))
    assert cli("validate", "planning-block", str(path)).returncode == 0
    done = cli("validate", "planning-block", "--mode", "think", str(path))
    assert done.returncode == 1
    assert "in Think mode a block with 2 or more offers one" in done.stdout
    refused = cli("validate", "plan", "--mode", "think", str(path))
    assert refused.returncode == 2
    assert "--mode applies to planning-block only, not plan" in refused.stderr


def test_normalize_prints_the_repaired_block_and_each_repair() -> None:
    block = think_block()
    block["plan_quality"]["margin"] = 999
    done = cli("normalize", "planning-block", "-", "--mode", "think", stdin=json.dumps(block))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan_quality"]["margin"] == 5
    assert done.stderr == (
        "<stdin>: 1 repair\n"
        "  /plan_quality/margin: 999 -> 5 (follows from roll_result 17 and dc 12)\n"
    )
    as_json = json.loads(
        cli("normalize", "planning-block", "-", "--json", stdin=json.dumps(block)).stdout
    )
    assert as_json["repairs"] == [
        {
            "pointer": "/plan_quality/margin",
            "before": 999,
            "after": 5,
            "reason": "follows from roll_result 17 and dc 12",
        }
    ]
    assert as_json["valid"] is True
    assert as_json["block"]["plan_quality"]["margin"] == 5


def test_normalize_prints_nothing_when_the_block_is_still_invalid(tmp_path: Path) -> None:
    block = story_block()
    block["choices"]["bribe_guard"]["risk_level"] = "moderate"
    done = cli("normalize", "planning-block", "-", stdin=json.dumps(block))
    assert done.returncode == 1
    assert done.stdout == ""
    assert '/choices/bribe_guard/risk_level: "moderate" is not one of' in done.stderr
    missing = cli("normalize", "planning-block", str(tmp_path / "nothing.json"))
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr == f"plancontracts: error: {tmp_path}/nothing.json: no such file\n"
    as_json = cli("normalize", "--json", "planning-block", str(tmp_path / "nothing.json"))
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["errors"] == [{"pointer": "", "message": "no such file"}]
    malformed = cli("normalize", "planning-block", "-", stdin='{"choices": {}')
    assert malformed.returncode == 1
    assert "Traceback" not in malformed.stderr
    assert "<stdin>: cannot be normalized (1 violation)" in malformed.stderr
    big = cli("normalize", "planning-block", "-", "--max-bytes", "10", stdin=json.dumps(block))
    assert big.returncode == 1
    assert "larger than 10 bytes (see --max-bytes)" in big.stderr
    other = cli("normalize", "plan", "-", stdin="{}")
    assert other.returncode == 2
    assert other.stderr.splitlines() == [
        "plancontracts: error: plan documents cannot be normalized: "
        "only goal-plan-output and planning-block can"
    ]
