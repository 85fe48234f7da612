"""The planning protocol's rules as code: checks, execution DCs, rewards, freezes and time.

Example tests pin each rule of `runtime.planning_blocks.mechanics` (the protocol's worked
examples among them); property tests check the rules hold for every input; the
tier, risk and complexity names are checked against the planning-block contract;
`choice_dc` is exercised on typed blocks decoded from JSON.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from fractions import Fraction
from typing import Any, get_args

import msgspec
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from plancontracts import contract_schema, decode, violations
from plancontracts.generated.planning_blocks import (
    Complexity,
    Confidence,
    FrozenPlan,
    PlanningBlock,
    QualityTier,
    RiskLevel,
)
from plancontracts.runtime.core.keys import snake_case
from plancontracts.runtime.planning_blocks import Mode, mode_of, roll_check, rules_in
from plancontracts.runtime.planning_blocks.mechanics import (
    COMPLEXITY_DC,
    FAILURE_TIERS,
    HOUR,
    RISK_REWARD,
    SUCCESS_TIERS,
    EarlyBreak,
    GameClock,
    Loot,
    Reattempt,
    advance,
    check_outcome,
    choice_dc,
    coordination_dc,
    execution_dc,
    freeze,
    freeze_hours,
    loot,
    parallel_dc_modifier,
    parallel_option_time,
    parallel_time,
    parallel_time_factor,
    quality_tier,
    reattempt,
    reward_multiplier,
    thaw,
    topic_key,
)

LAST = 2**53 - 1
LATEST_FREEZE = LAST - 24 * HOUR
"The last moment any freeze can start: a 24-hour one must end by LAST."
"The frozen-plans contract's last moment of game time."
TIERS: list[QualityTier] = list(get_args(QualityTier))
"Best first: Masterful ... Competent, then Incomplete, Muddled, Confused."
RISKS: list[RiskLevel] = list(get_args(RiskLevel))
CONFIDENCES: list[Confidence] = list(get_args(Confidence))
COMPLEXITIES: list[Complexity] = list(get_args(Complexity))
BREAKS: list[EarlyBreak] = list(get_args(EarlyBreak))
SNAKE = re.compile(r"([a-z0-9]+(_[a-z0-9]+)*)?")
TOPIC = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
TOPIC_PATTERN = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"


def expected_tier(margin: int) -> QualityTier:
    """The protocol's tier table, written out independently of the code."""
    if margin >= 0:
        if margin >= 15:
            return "Masterful"
        if margin >= 10:
            return "Brilliant"
        if margin >= 5:
            return "Sharp"
        return "Competent"
    if margin <= -10:
        return "Confused"
    if margin <= -5:
        return "Muddled"
    return "Incomplete"


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


class FixedDie(random.Random):
    """A `random.Random` whose d20 always shows `face`."""

    def __init__(self, face: int) -> None:
        super().__init__(0)
        self.face = face

    def randint(self, a: int, b: int) -> int:
        assert (a, b) == (1, 20)
        return self.face


# The planning check ------------------------------------------------------------------


def test_the_worked_example_int_22_against_dc_12_is_brilliant_by_10() -> None:
    outcome = check_outcome(roll_result=22, dc=12)
    assert (outcome.margin, outcome.success, outcome.quality_tier) == (10, True, "Brilliant")


@pytest.mark.parametrize(
    ("roll_result", "dc", "margin", "success", "tier"),
    [
        (27, 12, 15, True, "Masterful"),
        (26, 12, 14, True, "Brilliant"),
        (22, 12, 10, True, "Brilliant"),
        (21, 12, 9, True, "Sharp"),
        (17, 12, 5, True, "Sharp"),
        (16, 12, 4, True, "Competent"),
        (12, 12, 0, True, "Competent"),
        (11, 12, -1, False, "Incomplete"),
        (8, 12, -4, False, "Incomplete"),
        (7, 12, -5, False, "Muddled"),
        (3, 12, -9, False, "Muddled"),
        (2, 12, -10, False, "Confused"),
        (-20, 40, -60, False, "Confused"),
        (60, 1, 59, True, "Masterful"),
    ],
)
def test_a_check_outcome_has_the_margin_success_and_tier_of_the_table(
    roll_result: int, dc: int, margin: int, success: bool, tier: QualityTier
) -> None:
    outcome = check_outcome(roll_result, dc)
    assert (outcome.margin, outcome.success, outcome.quality_tier) == (margin, success, tier)


def test_reaching_the_dc_exactly_is_a_success() -> None:
    assert check_outcome(15, 15).success
    assert not check_outcome(14, 15).success


def test_roll_check_adds_the_ability_modifier_to_the_d20() -> None:
    rolled = roll_check("Intelligence", 18, 12, FixedDie(18))  # modifier +4: the worked example
    assert (rolled.d20, rolled.modifier, rolled.roll_result) == (18, "+4", 22)
    assert rolled.outcome == check_outcome(22, 12)
    assert rolled.outcome.quality_tier == "Brilliant"


@pytest.mark.parametrize(
    ("score", "modifier"),
    [(1, "-5"), (2, "-4"), (8, "-1"), (9, "-1"), (10, "+0"), (11, "+0"), (12, "+1"), (30, "+10")],
)
def test_the_ability_modifier_is_half_the_score_above_10_rounded_down(
    score: int, modifier: str
) -> None:
    rolled = roll_check("Wisdom", score, 10, FixedDie(10))
    assert rolled.modifier == modifier
    assert rolled.roll_result == 10 + int(modifier)


def test_a_rolled_check_describes_itself_in_one_line() -> None:
    success = roll_check("Intelligence", 14, 12, FixedDie(14))
    assert (
        success.describe() == "Intelligence check: d20 14 +2 = 16 vs DC 12, success by 4: Competent"
    )
    failure = roll_check("Wisdom", 8, 15, FixedDie(3))
    assert failure.describe() == "Wisdom check: d20 3 -1 = 2 vs DC 15, failure by 13: Confused"
    exact = roll_check("Wisdom", 10, 7, FixedDie(7))
    assert exact.describe() == "Wisdom check: d20 7 +0 = 7 vs DC 7, success by 0: Competent"


def test_the_same_seed_rolls_the_same_check() -> None:
    first = roll_check("Intelligence", 16, 14, random.Random(2024))
    again = roll_check("Intelligence", 16, 14, random.Random(2024))
    assert first == again


@pytest.mark.parametrize(("score", "dc"), [(0, 10), (31, 10), (-3, 10), (10, 0), (10, 41)])
def test_roll_check_refuses_a_score_or_dc_outside_the_contract(score: int, dc: int) -> None:
    with pytest.raises(ValueError, match="is 1 to"):
        roll_check("Intelligence", score, dc, random.Random(0))


@given(
    roll_result=st.integers(-20, 60),
    dc=st.integers(1, 40),
    other_dc=st.integers(1, 40),
)
def test_the_tier_is_a_function_of_margin_and_success_only(
    roll_result: int, dc: int, other_dc: int
) -> None:
    outcome = check_outcome(roll_result, dc)
    assert outcome.margin == roll_result - dc
    assert outcome.success == (roll_result >= dc)
    assert outcome.quality_tier == quality_tier(roll_result - dc, roll_result >= dc)
    assert outcome.quality_tier == expected_tier(outcome.margin)
    same_margin = check_outcome(other_dc + outcome.margin, other_dc)
    assert same_margin == outcome


@given(st.integers(-60, 60), st.integers(-60, 60))
def test_a_larger_margin_never_gives_a_worse_tier(margin: int, other: int) -> None:
    low, high = sorted((margin, other))
    worse = TIERS.index(quality_tier(low, low >= 0))
    better = TIERS.index(quality_tier(high, high >= 0))
    assert better <= worse  # TIERS is best first


@given(seed=st.integers(0, 2**64), score=st.integers(1, 30), dc=st.integers(1, 40))
def test_roll_check_stays_within_bounds_and_agrees_with_itself_for_any_seed(
    seed: int, score: int, dc: int
) -> None:
    rolled = roll_check("Intelligence", score, dc, random.Random(seed))
    modifier = (score - 10) // 2
    assert 1 <= rolled.d20 <= 20
    assert rolled.modifier == f"{modifier:+d}"
    assert re.fullmatch(r"[+-][0-9]{1,2}", rolled.modifier)
    assert rolled.roll_result == rolled.d20 + modifier
    assert 1 + modifier <= rolled.roll_result <= 20 + modifier
    assert -4 <= rolled.roll_result <= 30
    assert (rolled.stat_used, rolled.stat_value, rolled.dc) == ("Intelligence", score, dc)
    assert rolled.outcome == check_outcome(rolled.roll_result, dc)
    assert roll_check("Intelligence", score, dc, random.Random(seed)) == rolled


# The execution DC ----------------------------------------------------------------------


def test_the_worked_example_base_15_recommended_under_a_brilliant_plan_is_dc_12() -> None:
    adjusted = execution_dc(15, recommended=True, tier="Brilliant")
    assert (adjusted.base_dc, adjusted.adjustment, adjusted.dc) == (15, -3, 12)
    assert [(m.reason, m.change) for m in adjusted.modifiers] == [
        ("recommended approach", -2),
        ("Brilliant or Masterful plan", -1),
    ]


@pytest.mark.parametrize(
    ("options", "adjustment"),
    [
        ({}, 0),
        ({"recommended": True}, -2),
        ({"risk_level": "high"}, +2),
        ({"risk_level": "medium"}, 0),
        ({"risk_level": "safe"}, 0),
        ({"tier": "Masterful"}, -1),
        ({"tier": "Brilliant"}, -1),
        ({"tier": "Sharp"}, 0),
        ({"tier": "Competent"}, 0),
        ({"tier": "Incomplete"}, 0),
        ({"tier": "Muddled"}, 0),
        ({"tier": "Confused"}, +2),
        ({"confidence": "low"}, +1),
        ({"confidence": "medium"}, 0),
        ({"confidence": "high"}, 0),
        ({"parallel_modifier": 2}, +2),
        ({"parallel_modifier": 3}, +3),
        ({"parallel_modifier": 4}, +4),
        ({"risk_level": "high", "confidence": "low", "recommended": True}, +1),
        ({"risk_level": "high", "tier": "Confused", "confidence": "low"}, +4),  # +5, capped
        ({"tier": "Confused", "parallel_modifier": 4}, +4),  # +6, capped
        ({"recommended": True, "tier": "Masterful"}, -3),
    ],
)
def test_each_planning_modifier_moves_the_execution_dc_as_the_protocol_says(
    options: dict[str, Any], adjustment: int
) -> None:
    adjusted = execution_dc(15, **options)
    assert adjusted.adjustment == adjustment
    assert adjusted.dc == 15 + adjustment


def test_the_execution_dc_stays_within_5_and_30() -> None:
    assert execution_dc(5, recommended=True, tier="Masterful").dc == 5
    assert execution_dc(1).dc == 5
    assert execution_dc(7, recommended=True, tier="Brilliant").dc == 5
    assert execution_dc(28, risk_level="high", confidence="low").dc == 30
    assert execution_dc(40).dc == 30
    assert execution_dc(40, recommended=True).dc == 30


@pytest.mark.parametrize("base_dc", [0, -1, 41, 100])
def test_execution_dc_refuses_a_base_dc_outside_1_to_40(base_dc: int) -> None:
    with pytest.raises(ValueError, match="a DC is 1 to 40"):
        execution_dc(base_dc)


@pytest.mark.parametrize(
    ("tasks", "complexity", "modifier"),
    [
        (2, "simple", 2),
        (3, "simple", 3),
        (4, "simple", 4),
        (7, "simple", 4),
        (2, "moderate", 3),
        (3, "moderate", 3),
        (4, "moderate", 4),
        (2, "complex", 4),
        (3, "complex", 4),
    ],
)
def test_the_parallel_option_adds_2_3_or_4_by_tasks_and_complexity(
    tasks: int, complexity: Complexity, modifier: int
) -> None:
    assert parallel_dc_modifier(tasks, complexity) == modifier


@pytest.mark.parametrize(
    ("base_dc", "tasks", "complexity", "dc"),
    [
        (12, 2, "simple", 14),  # the contract's own example
        (13, 2, "simple", 15),
        (12, 3, "simple", 16),
        (12, 2, "moderate", 15),
        (12, 2, "complex", 16),
        (10, 4, "complex", 18),
    ],
)
def test_the_coordination_dc_adds_2_per_further_task_and_the_complexity(
    base_dc: int, tasks: int, complexity: Complexity, dc: int
) -> None:
    assert coordination_dc(base_dc, tasks, complexity) == dc


@pytest.mark.parametrize("tasks", [1, 0, -2])
def test_a_parallel_option_of_fewer_than_two_tasks_is_refused(tasks: int) -> None:
    with pytest.raises(ValueError, match="2 or more tasks"):
        parallel_dc_modifier(tasks)
    with pytest.raises(ValueError, match="2 or more tasks"):
        coordination_dc(12, tasks)


def reference_execution_dc(
    base_dc: int,
    recommended: bool,
    risk_level: RiskLevel | None,
    tier: QualityTier | None,
    confidence: Confidence | None,
    parallel_modifier: int,
) -> tuple[int, int]:
    """(adjustment, dc) by the protocol's rules, written out independently of the code."""
    total = (
        -2 * recommended
        + 2 * (risk_level == "high")
        - 1 * (tier in ("Brilliant", "Masterful"))
        + 2 * (tier == "Confused")
        + 1 * (confidence == "low")
        + parallel_modifier
    )
    adjustment = clamp(total, -4, 4)
    return adjustment, clamp(base_dc + adjustment, 5, 30)


@given(
    base_dc=st.integers(1, 40),
    recommended=st.booleans(),
    risk_level=st.sampled_from([None, *RISKS]),
    tier=st.sampled_from([None, *TIERS]),
    confidence=st.sampled_from([None, *CONFIDENCES]),
    parallel_modifier=st.sampled_from([0, 2, 3, 4]),
)
def test_the_execution_dc_is_the_base_plus_the_capped_modifiers_kept_within_5_to_30(
    base_dc: int,
    recommended: bool,
    risk_level: RiskLevel | None,
    tier: QualityTier | None,
    confidence: Confidence | None,
    parallel_modifier: int,
) -> None:
    adjusted = execution_dc(
        base_dc,
        recommended=recommended,
        risk_level=risk_level,
        tier=tier,
        confidence=confidence,
        parallel_modifier=parallel_modifier,
    )
    assert abs(adjusted.adjustment) <= 4
    assert 5 <= adjusted.dc <= 30
    assert adjusted.base_dc == base_dc
    assert adjusted.adjustment == clamp(sum(m.change for m in adjusted.modifiers), -4, 4)
    assert (adjusted.adjustment, adjusted.dc) == reference_execution_dc(
        base_dc, recommended, risk_level, tier, confidence, parallel_modifier
    )
    if 9 <= base_dc <= 26:
        assert abs(adjusted.dc - base_dc) <= 4


def test_every_combination_of_planning_modifiers_follows_the_rules() -> None:
    combinations = itertools.product(
        range(1, 41),
        (False, True),
        (None, *RISKS),
        (None, *TIERS),
        (None, *CONFIDENCES),
        (0, 2, 3, 4),
    )
    for base_dc, recommended, risk_level, tier, confidence, parallel in combinations:
        adjusted = execution_dc(
            base_dc,
            recommended=recommended,
            risk_level=risk_level,
            tier=tier,
            confidence=confidence,
            parallel_modifier=parallel,
        )
        expected = reference_execution_dc(
            base_dc, recommended, risk_level, tier, confidence, parallel
        )
        assert (adjusted.adjustment, adjusted.dc) == expected, (
            base_dc,
            recommended,
            risk_level,
            tier,
            confidence,
            parallel,
        )


@given(
    base_dc=st.integers(1, 40),
    tasks=st.integers(2, 12),
    complexity=st.sampled_from(COMPLEXITIES),
)
def test_coordination_and_parallel_modifiers_follow_their_formulas(
    base_dc: int, tasks: int, complexity: Complexity
) -> None:
    extra = {"simple": 0, "moderate": 1, "complex": 2}[complexity]
    assert coordination_dc(base_dc, tasks, complexity) == base_dc + 2 * (tasks - 1) + extra
    modifier = parallel_dc_modifier(tasks, complexity)
    assert modifier in (2, 3, 4)
    assert modifier == (
        4
        if tasks >= 4 or complexity == "complex"
        else 3
        if tasks == 3 or complexity == "moderate"
        else 2
    )


# Rewards ---------------------------------------------------------------------------------


def test_a_high_risk_option_under_a_masterful_plan_pays_exactly_1_875() -> None:
    multiplier = reward_multiplier("high", "Masterful")
    assert multiplier == Fraction(15, 8)
    assert float(multiplier) == 1.875


@pytest.mark.parametrize(
    ("risk_level", "multiplier"),
    [
        ("safe", Fraction(1)),
        ("low", Fraction(1)),
        ("medium", Fraction(5, 4)),
        ("high", Fraction(3, 2)),
    ],
)
def test_the_risk_level_sets_the_reward(risk_level: RiskLevel, multiplier: Fraction) -> None:
    assert reward_multiplier(risk_level) == multiplier


@pytest.mark.parametrize(
    ("tier", "multiplier"),
    [
        ("Masterful", Fraction(5, 4)),
        ("Brilliant", Fraction(11, 10)),
        ("Sharp", Fraction(1)),
        ("Competent", Fraction(1)),
        (None, Fraction(1)),
    ],
)
def test_a_brilliant_or_masterful_plan_raises_the_reward(
    tier: QualityTier | None, multiplier: Fraction
) -> None:
    assert reward_multiplier("safe", tier) == multiplier


def test_the_parallel_option_multiplies_the_reward_by_1_2() -> None:
    assert reward_multiplier("low", parallel=True) == Fraction(6, 5)
    assert reward_multiplier("high", "Masterful", parallel=True) == Fraction(9, 4)
    assert reward_multiplier("medium", "Brilliant", parallel=True) == Fraction(33, 20)


RISK_FACTORS = {
    "safe": Fraction(1),
    "low": Fraction(1),
    "medium": Fraction(5, 4),
    "high": Fraction(3, 2),
}
TIER_FACTORS = {"Masterful": Fraction(5, 4), "Brilliant": Fraction(11, 10)}


@given(
    risk_level=st.sampled_from(RISKS),
    tier=st.sampled_from([None, *TIERS]),
    parallel=st.booleans(),
)
def test_the_reward_multiplier_is_the_product_of_its_factors(
    risk_level: RiskLevel, tier: QualityTier | None, parallel: bool
) -> None:
    multiplier = reward_multiplier(risk_level, tier, parallel=parallel)
    expected = (
        RISK_FACTORS[risk_level]
        * TIER_FACTORS.get(tier or "", Fraction(1))
        * (Fraction(6, 5) if parallel else Fraction(1))
    )
    assert isinstance(multiplier, Fraction)
    assert multiplier == expected


# The contract's names -------------------------------------------------------------------


def test_the_tiers_in_code_are_exactly_the_contracts_quality_tiers() -> None:
    enum = contract_schema("planning-block")["$defs"]["quality-tier"]["enum"]
    success = [tier for _, tier in SUCCESS_TIERS]
    failure = [tier for _, tier in FAILURE_TIERS]
    assert success + failure[::-1] == enum  # best to worst, each once
    assert enum == TIERS


def test_the_risk_levels_in_code_are_exactly_the_contracts() -> None:
    enum = contract_schema("planning-block")["$defs"]["risk-level"]["enum"]
    assert list(RISK_REWARD) == enum
    assert enum == RISKS


def test_the_complexities_in_code_are_exactly_the_contracts() -> None:
    enum = contract_schema("planning-block")["$defs"]["complexity"]["enum"]
    assert list(COMPLEXITY_DC) == enum
    assert enum == COMPLEXITIES


# choice_dc on typed planning blocks -----------------------------------------------------


def a_choice(text: str, **fields: Any) -> dict[str, Any]:
    return {"text": text, "description": f"{text}, as the character would.", **fields}


def a_parallel_option(situational: int, *, base_dc: int, complexity: Complexity) -> dict[str, Any]:
    extra = {"simple": 0, "moderate": 1, "complex": 2}[complexity]
    return a_choice(
        "Do it all at once",
        risk_level="medium",
        confidence="medium",
        analysis={
            "personal_focus": "The hardest part",
            "base_dc": base_dc,
            "complexity": complexity,
            "coordination_dc": base_dc + 2 * (situational - 1) + extra,
        },
    )


def a_block(
    choices: dict[str, dict[str, Any]],
    *,
    recommended: str | None = None,
    roll: tuple[int, int] | None = None,
) -> PlanningBlock:
    """A planning block decoded from JSON: a Think-mode block when `roll` is given."""
    value: dict[str, Any] = {"choices": choices}
    mode: Mode = "story"
    if roll is not None:
        roll_result, dc = roll
        margin = roll_result - dc
        value |= {
            "thinking": "The guard is bored; the yard is dark.",
            "plan_quality": {
                "stat_used": "Intelligence",
                "stat_value": 16,
                "modifier": "+3",
                "roll_result": roll_result,
                "dc": dc,
                "dc_category": "Careful Planning",
                "dc_reasoning": "Two routes and one guard",
                "success": margin >= 0,
                "margin": margin,
                "quality_tier": expected_tier(margin),
                "effect": "What the plan sees",
            },
            "situation_assessment": {"current_state": "Behind the warehouse at night"},
            "analysis": {"recommended_approach": recommended},
        }
        mode = "think"
    assert violations("planning-block", value, rules=rules_in(mode)) == ()
    block = decode("planning-block", json.dumps(value))
    assert isinstance(block, PlanningBlock)
    return block


WAREHOUSE = a_block(
    {
        "sneak_past": a_choice("Sneak past", risk_level="low", confidence="high"),
        "bribe_guard": a_choice("Bribe the guard", risk_level="high", confidence="low"),
        "think:return_story": a_choice("Stop planning", switch_to_story_mode=True),
        "parallel_both": a_parallel_option(2, base_dc=15, complexity="moderate"),
    },
    recommended="sneak_past",
    roll=(22, 12),  # Brilliant
)


def test_choice_dc_of_the_recommended_choice_under_a_brilliant_plan_is_the_worked_example() -> None:
    adjusted = choice_dc(WAREHOUSE, "sneak_past", base_dc=15)
    assert adjusted.dc == 12
    assert [m.reason for m in adjusted.modifiers] == [
        "recommended approach",
        "Brilliant or Masterful plan",
    ]


def test_choice_dc_reads_risk_and_confidence_from_the_choice() -> None:
    adjusted = choice_dc(WAREHOUSE, "bribe_guard", base_dc=15)
    assert [m.change for m in adjusted.modifiers] == [+2, -1, +1]  # high risk, plan, low confidence
    assert adjusted.dc == 17


def test_choice_dc_of_the_parallel_option_counts_situational_choices_only() -> None:
    # two situational choices (the think: choice is not one), moderate: +3; Brilliant plan: -1
    adjusted = choice_dc(WAREHOUSE, "parallel_both", base_dc=15)
    assert adjusted.modifiers[-1].reason == "parallel option"
    assert adjusted.modifiers[-1].change == 3
    assert (adjusted.adjustment, adjusted.dc) == (2, 17)


def test_choice_dc_of_a_meta_choice_has_only_the_plans_modifier() -> None:
    assert choice_dc(WAREHOUSE, "think:return_story", base_dc=15).dc == 14


def test_choice_dc_caps_a_confused_plans_parallel_option_at_plus_4() -> None:
    situational = {
        f"route_{n}": a_choice(f"Route {n}", risk_level="medium") for n in ("a", "b", "c", "d")
    }
    block = a_block(
        {
            **situational,
            "god:skip_ahead": a_choice("Skip ahead"),
            "parallel_all_routes": a_parallel_option(4, base_dc=14, complexity="complex"),
        },
        recommended="route_a",
        roll=(3, 14),  # margin -11: Confused
    )
    adjusted = choice_dc(block, "parallel_all_routes", base_dc=14)
    assert [m.change for m in adjusted.modifiers] == [+2, +4]
    assert (adjusted.adjustment, adjusted.dc) == (4, 18)
    assert choice_dc(block, "route_a", base_dc=14).dc == 14  # recommended -2, Confused +2


def test_choice_dc_of_a_story_mode_block_has_no_plan_modifiers() -> None:
    block = a_block(
        {
            "charge": a_choice("Charge", risk_level="high"),
            "wait": a_choice("Wait"),
            "parallel": a_choice("Both"),  # no analysis: simple
        }
    )
    assert choice_dc(block, "charge", base_dc=15).dc == 17
    assert choice_dc(block, "wait", base_dc=15).dc == 15
    assert choice_dc(block, "parallel", base_dc=15).dc == 17


def test_choice_dc_of_an_unknown_key_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="charge"):
        choice_dc(WAREHOUSE, "charge", base_dc=15)


def test_choice_dc_refuses_a_base_dc_out_of_bounds() -> None:
    with pytest.raises(ValueError, match="a DC is 1 to 40"):
        choice_dc(WAREHOUSE, "sneak_past", base_dc=41)


# Frozen plans ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("dc", "hours"),
    [
        (1, 1),
        (5, 1),
        (8, 1),
        (9, 2),
        (12, 2),
        (13, 4),
        (16, 4),
        (17, 8),
        (20, 8),
        (21, 24),
        (30, 24),
        (40, 24),
    ],
)
def test_a_failed_check_freezes_its_topic_for_the_hours_of_its_dc_band(dc: int, hours: int) -> None:
    assert freeze_hours(dc) == hours


def test_freeze_records_the_failure_and_returns_a_new_mapping() -> None:
    before: dict[str, FrozenPlan] = {}
    after = freeze(before, "warehouse_ambush", dc=14, now=5 * HOUR, description="the ambush")
    assert before == {}
    assert after == {
        "warehouse_ambush": FrozenPlan(
            failed_at=5 * HOUR,
            freeze_until=9 * HOUR,
            original_dc=14,
            freeze_hours=4,
            description="the ambush",
        )
    }
    later = freeze(after, "bridge_crossing", dc=8, now=6 * HOUR, description="the bridge")
    assert list(after) == ["warehouse_ambush"]
    assert list(later) == ["warehouse_ambush", "bridge_crossing"]
    assert violations("frozen-plans", msgspec.to_builtins(later)) == ()


@pytest.mark.parametrize(
    "topic", ["Warehouse Ambush", "", "warehouse-ambush", "2nd_floor", "think:x", "a__b", "a_"]
)
def test_freeze_refuses_a_topic_that_is_not_a_topic_key(topic: str) -> None:
    with pytest.raises(ValueError, match="not a topic key"):
        freeze({}, topic, dc=10, now=0, description="x")


def test_a_topic_key_of_64_characters_can_be_frozen() -> None:
    assert list(freeze({}, "a" * 64, dc=10, now=0, description="x")) == ["a" * 64]


def test_freeze_refuses_a_topic_key_longer_than_64_characters() -> None:
    with pytest.raises(ValueError, match="not a topic key"):
        freeze({}, "a" * 65, dc=10, now=0, description="x")


AMBUSH = freeze({}, "warehouse_ambush", dc=14, now=10 * HOUR, description="the ambush")
"Frozen at hour 10 for 4 hours, until hour 14."


def test_a_frozen_topic_cannot_be_planned_again_before_its_freeze_ends() -> None:
    result = reattempt(AMBUSH, "warehouse_ambush", now=12 * HOUR)
    assert result == Reattempt(False, 2 * HOUR, AMBUSH)
    assert not reattempt(AMBUSH, "warehouse_ambush", now=14 * HOUR - 1).allowed
    assert reattempt(AMBUSH, "warehouse_ambush", now=14 * HOUR - 1).remaining == 1


def test_an_expired_freeze_is_dropped() -> None:
    at_the_end = reattempt(AMBUSH, "warehouse_ambush", now=14 * HOUR)
    assert at_the_end == Reattempt(True, 0, {})
    assert reattempt(AMBUSH, "warehouse_ambush", now=100 * HOUR) == Reattempt(True, 0, {})
    assert "warehouse_ambush" in AMBUSH  # the input is not changed


@pytest.mark.parametrize("early_break", BREAKS)
def test_any_early_break_lifts_a_freeze(early_break: EarlyBreak) -> None:
    result = reattempt(AMBUSH, "warehouse_ambush", now=11 * HOUR, breaks=[early_break])
    assert result == Reattempt(True, 0, {}, early_break)
    assert "warehouse_ambush" in AMBUSH


def test_an_unknown_early_break_is_refused() -> None:
    # Not an EarlyBreak, on purpose: a caller mypy did not check gets this error.
    with pytest.raises(ValueError, match="not an early break"):
        reattempt(AMBUSH, "warehouse_ambush", now=11 * HOUR, breaks=["patience"])  # type: ignore[list-item]


def test_a_different_topic_key_is_never_frozen() -> None:
    result = reattempt(AMBUSH, "warehouse_fire", now=11 * HOUR)
    assert result == Reattempt(True, 0, AMBUSH)


def test_thaw_drops_only_the_freezes_that_have_ended() -> None:
    both = freeze(AMBUSH, "bridge_crossing", dc=5, now=10 * HOUR, description="the bridge")
    assert list(thaw(both, 10 * HOUR)) == ["warehouse_ambush", "bridge_crossing"]
    assert list(thaw(both, 11 * HOUR - 1)) == ["warehouse_ambush", "bridge_crossing"]
    assert list(thaw(both, 11 * HOUR)) == ["warehouse_ambush"]
    assert thaw(both, 14 * HOUR) == {}
    assert len(both) == 2


@pytest.mark.parametrize(
    ("result", "line"),
    [
        (Reattempt(True, 0, {}), "planning allowed"),
        (Reattempt(True, 0, {}, "gm_override"), "planning allowed (gm_override)"),
        (
            Reattempt(False, 2 * HOUR, {}),
            "this topic is frozen for another 2 h 00 min of game time",
        ),
        (
            Reattempt(False, 90 * 60_000_000 + 1, {}),
            "this topic is frozen for another 1 h 31 min of game time",
        ),
        (
            Reattempt(False, 59 * 60_000_000, {}),
            "this topic is frozen for another 59 min of game time",
        ),
        (Reattempt(False, 1, {}), "this topic is frozen for another 1 min of game time"),
    ],
)
def test_a_reattempt_describes_itself_with_the_time_left_rounded_up(
    result: Reattempt, line: str
) -> None:
    assert result.describe() == line


@given(data=st.data(), dc=st.integers(1, 40), now=st.integers(0, LATEST_FREEZE))
def test_a_frozen_topic_may_be_planned_again_exactly_from_its_freeze_until(
    data: st.DataObject, dc: int, now: int
) -> None:
    frozen = freeze({}, "warehouse_ambush", dc=dc, now=now, description="the ambush")
    until = frozen["warehouse_ambush"].freeze_until
    assert until == now + freeze_hours(dc) * HOUR
    later = data.draw(
        st.one_of(
            st.integers(now, LAST),
            st.integers(-2, 2).map(lambda shift: clamp(until + shift, now, LAST)),
        ),
        label="later",
    )
    result = reattempt(frozen, "warehouse_ambush", now=later)
    assert result.allowed == (later >= until)
    assert result.remaining == max(0, until - later)
    assert result.frozen_plans == ({} if result.allowed else frozen)
    assert result.lifted_by is None
    assert (thaw(frozen, later) == {}) == result.allowed


@given(
    dc=st.integers(1, 40),
    now=st.integers(0, LATEST_FREEZE),
    later=st.integers(0, 48 * HOUR),
    breaks=st.lists(st.sampled_from(BREAKS), min_size=1, max_size=4),
)
def test_an_early_break_lifts_a_freeze_at_any_time(
    dc: int, now: int, later: int, breaks: list[EarlyBreak]
) -> None:
    frozen = freeze({}, "warehouse_ambush", dc=dc, now=now, description="the ambush")
    result = reattempt(frozen, "warehouse_ambush", now=min(now + later, LAST), breaks=breaks)
    assert result.allowed
    assert result.remaining == 0
    assert result.frozen_plans == {}
    assert "warehouse_ambush" in frozen


@given(dc=st.integers(1, 40), now=st.integers(0, LATEST_FREEZE))
def test_every_freeze_is_a_valid_frozen_plans_document(dc: int, now: int) -> None:
    frozen = freeze({}, "warehouse_ambush", dc=dc, now=now, description="the ambush")
    assert violations("frozen-plans", msgspec.to_builtins(frozen)) == ()


# Topic keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("The warehouse ambush", "the_warehouse_ambush"),
        ("Bribe the Guard!", "bribe_the_guard"),
        ("Éclair à minuit", "eclair_a_minuit"),
        ("Überfall im Lagerhaus", "uberfall_im_lagerhaus"),
        ("  crossing -- the   river ", "crossing_the_river"),
        ("2nd floor heist", "topic_2nd_floor_heist"),
        ("warehouse_ambush", "warehouse_ambush"),
    ],
)
def test_topic_key_is_the_topic_in_snake_case_with_accents_folded(text: str, key: str) -> None:
    assert topic_key(text) == key


def test_a_topic_without_latin_letters_gets_a_stable_topic_key() -> None:
    key = topic_key("倉庫の待ち伏せ")
    assert key == "topic_b2f5f058c03f"  # the same in every process and on every machine
    assert topic_key("倉庫の待ち伏せ") == key
    assert topic_key("倉庫の襲撃") != key
    assert TOPIC.fullmatch(topic_key("!!!"))


@pytest.mark.parametrize(
    ("text", "max_length", "snake"),
    [
        ("Bribe the Guard!", 64, "bribe_the_guard"),
        ("Éclair à minuit", 64, "eclair_a_minuit"),
        ("alpha beta gamma", 10, "alpha_beta"),
        ("alpha beta gamma", 9, "alpha"),
        ("alpha beta gamma", 4, ""),
        ("倉庫の待ち伏せ", 64, ""),
        ("2 swords", 64, "2_swords"),
    ],
)
def test_snake_case_keeps_whole_words_within_the_length(
    text: str, max_length: int, snake: str
) -> None:
    assert snake_case(text, max_length) == snake


ANY_TEXT = st.one_of(
    st.text(),
    st.text(alphabet=" _-.!0123456789abcXYZÉéß倉\u00b2\ufb01"),
    st.text(st.one_of(st.characters(), st.characters(categories=["Cs"]))),
)


@given(text=ANY_TEXT, max_length=st.integers(0, 100))
def test_snake_case_is_always_snake_case_within_max_length(text: str, max_length: int) -> None:
    snake = snake_case(text, max_length)
    assert SNAKE.fullmatch(snake)
    assert len(snake) <= max_length
    whole = snake_case(text, 10**6)
    assert snake in ("", whole) or whole.startswith(snake + "_")  # words are never cut


@given(text=ANY_TEXT)
def test_topic_key_is_always_a_frozen_plans_topic_key(text: str) -> None:
    key = topic_key(text)
    assert re.match(TOPIC_PATTERN, key)
    assert TOPIC.fullmatch(key)
    assert len(key) <= 64
    assert topic_key(key) == key
    assert list(freeze({}, key, dc=10, now=0, description="x")) == [key]


def test_the_topic_key_pattern_is_the_frozen_plans_contracts() -> None:
    schema = contract_schema("frozen-plans")
    assert TOPIC_PATTERN in json.dumps(schema)


# Time ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("player_input", "mode", "text"),
    [
        ("THINK: plan the ambush", "think", "plan the ambush"),
        ("think: plan the ambush", "think", "plan the ambush"),
        ("  Think:plan the ambush ", "think", "plan the ambush"),
        ("tHiNk:", "think", ""),
        ("Open the door", "story", "Open the door"),
        ("  I think: we go ", "story", "I think: we go"),
        ("THINK plan", "story", "THINK plan"),
    ],
)
def test_a_think_prefix_in_any_case_means_think_mode(
    player_input: str, mode: str, text: str
) -> None:
    assert mode_of(player_input) == (mode, text)


def test_think_mode_can_be_asked_for_without_a_prefix() -> None:
    assert mode_of("plan the ambush", "think") == ("think", "plan the ambush")
    assert mode_of("plan the ambush", "story") == ("story", "plan the ambush")
    assert mode_of("THINK: plan the ambush", "story") == ("think", "plan the ambush")


@given(
    cases=st.lists(st.booleans(), min_size=6, max_size=6),
    space=st.sampled_from(["", " ", "\t ", "\n"]),
    rest=st.text(),
)
def test_any_casing_of_the_think_prefix_means_think_mode(
    cases: list[bool], space: str, rest: str
) -> None:
    prefix = "".join(c.upper() if up else c for c, up in zip("think:", cases, strict=True))
    assert mode_of(space + prefix + rest) == ("think", rest.strip())


@given(text=st.text(alphabet=st.characters(codec="ascii")))
def test_ascii_input_without_the_think_prefix_is_story_mode(text: str) -> None:
    assume(text.lstrip()[:6].lower() != "think:")
    assert mode_of(text) == ("story", text.strip())
    assert mode_of(text, "think") == ("think", text.strip())


def test_a_think_turn_takes_one_microsecond_and_no_turn() -> None:
    clock = GameClock(time=10 * HOUR, turn=7)
    assert advance(clock, "think") == GameClock(time=10 * HOUR + 1, turn=7)
    assert advance(GameClock(), "think") == GameClock(time=1, turn=0)


def test_a_story_turn_takes_its_elapsed_time_and_one_turn() -> None:
    clock = GameClock(time=10 * HOUR, turn=7)
    assert advance(clock, "story", elapsed=HOUR) == GameClock(time=11 * HOUR, turn=8)
    assert advance(clock, "story", elapsed=1) == GameClock(time=10 * HOUR + 1, turn=8)


@pytest.mark.parametrize("elapsed", [0, 1, HOUR, -1])
def test_think_mode_takes_no_elapsed_time(elapsed: int) -> None:
    with pytest.raises(ValueError, match="Think mode freezes time"):
        advance(GameClock(), "think", elapsed=elapsed)


@pytest.mark.parametrize("elapsed", [None, 0, -1, -HOUR])
def test_story_mode_needs_a_positive_elapsed_time(elapsed: int | None) -> None:
    with pytest.raises(ValueError, match="elapsed must be 1 or more"):
        advance(GameClock(), "story", elapsed=elapsed)


def test_an_unknown_mode_is_refused() -> None:
    # Not a Mode, on purpose: a caller mypy did not check gets this error.
    with pytest.raises(ValueError, match="not a mode"):
        advance(GameClock(), "dream")  # type: ignore[arg-type]


def test_game_time_cannot_pass_the_contracts_last_moment() -> None:
    assert advance(GameClock(LAST - 1), "think") == GameClock(LAST, 0)
    assert advance(GameClock(LAST - 10), "story", elapsed=10) == GameClock(LAST, 1)
    with pytest.raises(ValueError, match="2\\*\\*53 - 1"):
        advance(GameClock(LAST), "think")
    with pytest.raises(ValueError, match="2\\*\\*53 - 1"):
        advance(GameClock(LAST - 10), "story", elapsed=11)


@given(
    time=st.integers(0, LAST),
    turn=st.integers(0, 10**6),
    mode=st.sampled_from(["think", "story"]),
    elapsed=st.integers(1, 2**54),
)
def test_a_turn_advances_the_clock_exactly_or_refuses_to_pass_the_bound(
    time: int, turn: int, mode: Mode, elapsed: int
) -> None:
    clock = GameClock(time, turn)
    step = 1 if mode == "think" else elapsed
    if time + step > LAST:
        with pytest.raises(ValueError, match="2\\*\\*53 - 1"):
            advance(clock, mode, elapsed=None if mode == "think" else elapsed)
        return
    after = advance(clock, mode, elapsed=None if mode == "think" else elapsed)
    assert after.time == time + step
    assert after.turn == (turn if mode == "think" else turn + 1)


def test_a_plan_frozen_now_is_still_frozen_after_a_think_turn() -> None:
    clock = GameClock(time=10 * HOUR, turn=3)
    frozen = freeze({}, "warehouse_ambush", dc=14, now=clock.time, description="the ambush")
    before = reattempt(frozen, "warehouse_ambush", now=clock.time)
    clock = advance(clock, "think")
    after = reattempt(frozen, "warehouse_ambush", now=clock.time)
    assert not after.allowed
    assert after.remaining == before.remaining - 1 == 4 * HOUR - 1
    assert thaw(frozen, clock.time) == frozen


def test_a_freeze_that_would_end_past_the_last_moment_of_game_time_is_refused() -> None:
    # Cutting it short would let a Think turn thaw it: the freeze is refused instead.
    with pytest.raises(ValueError, match="would end past"):
        freeze({}, "warehouse_ambush", dc=14, now=LAST - 1, description="the ambush")
    last = freeze({}, "warehouse_ambush", dc=14, now=LAST - 4 * HOUR, description="x")
    assert last["warehouse_ambush"].freeze_until == LAST


@given(dc=st.integers(1, 40), time=st.integers(0, LATEST_FREEZE))
def test_a_think_turn_never_unfreezes_a_plan_frozen_that_moment(dc: int, time: int) -> None:
    clock = GameClock(time)
    frozen = freeze({}, "warehouse_ambush", dc=dc, now=clock.time, description="the ambush")
    remaining = reattempt(frozen, "warehouse_ambush", now=clock.time).remaining
    clock = advance(clock, "think")
    after = reattempt(frozen, "warehouse_ambush", now=clock.time)
    assert not after.allowed
    assert after.remaining == remaining - 1
    assert thaw(frozen, clock.time) == frozen


@given(data=st.data(), dc=st.integers(1, 40), failed_at=st.integers(0, LATEST_FREEZE))
def test_a_think_turn_never_unfreezes_a_plan_with_more_than_a_microsecond_left(
    data: st.DataObject, dc: int, failed_at: int
) -> None:
    frozen = freeze({}, "warehouse_ambush", dc=dc, now=failed_at, description="the ambush")
    until = frozen["warehouse_ambush"].freeze_until
    assume(until - failed_at > 1)
    now = data.draw(st.integers(failed_at, until - 2), label="now")
    remaining = reattempt(frozen, "warehouse_ambush", now=now).remaining
    assert remaining > 1
    clock = advance(GameClock(now), "think")
    after = reattempt(frozen, "warehouse_ambush", now=clock.time)
    assert not after.allowed
    assert after.remaining == remaining - 1
    assert thaw(frozen, clock.time) == frozen


def test_odd_inputs_are_refused_or_kept_apart() -> None:
    # Not an EarlyBreak, on purpose: a caller mypy did not check gets this error.
    with pytest.raises(ValueError, match="not an early break"):
        reattempt({}, "warehouse_ambush", now=0, breaks=["bogus"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="a DC is 1 to 40"):
        freeze({}, "warehouse_ambush", dc=0, now=0, description="the ambush")
    # Only ASCII spells the prefix: a dotless i upper-cases to I, but is not one.
    assert mode_of("TH\u0131NK: go") == ("story", "TH\u0131NK: go")
    # A long number does not shrink to a bare "topic" shared by every such text.
    assert topic_key("1" * 64) != topic_key("2" * 64)
    assert topic_key("1" * 64).startswith("topic_")


# Loot and the parallel option's time ------------------------------------------------------


@pytest.mark.parametrize(
    ("risk_level", "tier", "expected"),
    [
        ("safe", None, Loot(Fraction(1), False, None)),
        ("low", "Competent", Loot(Fraction(1), False, None)),
        ("medium", "Sharp", Loot(Fraction(11, 10), False, None)),
        ("high", None, Loot(Fraction(5, 4), True, None)),
        ("high", "Masterful", Loot(Fraction(5, 4), True, "rare")),
        ("safe", "Brilliant", Loot(Fraction(1), False, "uncommon")),
        ("medium", "Confused", Loot(Fraction(11, 10), False, None)),
    ],
)
def test_loot_follows_the_risk_and_the_plan(
    risk_level: RiskLevel, tier: QualityTier | None, expected: Loot
) -> None:
    assert loot(risk_level, tier) == expected


def test_loot_refuses_what_is_not_a_risk_level() -> None:
    with pytest.raises(ValueError, match="not a risk level: 'extreme'"):
        loot("extreme")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("tasks", "simple", "moderate", "complex_"),
    [
        (2, Fraction(5, 4), Fraction(11, 8), Fraction(3, 2)),
        (3, Fraction(3, 2), Fraction(3, 2), Fraction(3, 2)),
        (4, Fraction(7, 4), Fraction(15, 8), Fraction(2)),
        (5, Fraction(2), Fraction(9, 4), Fraction(5, 2)),
        (8, Fraction(2), Fraction(9, 4), Fraction(5, 2)),
    ],
)
def test_the_parallel_option_takes_the_seeds_share_of_the_longest_task(
    tasks: int, simple: Fraction, moderate: Fraction, complex_: Fraction
) -> None:
    found = [parallel_time_factor(tasks, c) for c in ("simple", "moderate", "complex")]
    assert found == [simple, moderate, complex_]


@given(
    durations=st.lists(st.integers(0, 10**12), min_size=2, max_size=12),
    complexity=st.sampled_from(get_args(Complexity)),
)
def test_a_parallel_option_is_slower_than_its_longest_task_and_faster_than_all_in_turn(
    durations: list[int], complexity: Complexity
) -> None:
    taken = parallel_time(durations, complexity)
    assert max(durations) <= taken
    assert taken <= max(sum(durations), max(durations) * 5 // 2 + 1)
    if min(durations) == max(durations) > 1:
        # Equal tasks: parallel always saves time, but for tasks of 1 µs, where the
        # rounding to whole microseconds makes 1.5 µs (two complex tasks) 2 µs.
        assert taken < sum(durations)


def test_fewer_than_two_tasks_have_no_parallel_time() -> None:
    with pytest.raises(ValueError, match="2 or more tasks, not 1"):
        parallel_time([60])


def test_the_parallel_options_time_reads_its_analysis() -> None:
    # WAREHOUSE: two situational choices, moderate complexity: 11/8 of the longest.
    minute = 60_000_000
    durations = {"sneak_past": 10 * minute, "bribe_guard": 4 * minute}
    assert parallel_option_time(WAREHOUSE, durations) == 10 * minute * 11 // 8
    with pytest.raises(ValueError, match="no duration for bribe_guard"):
        parallel_option_time(WAREHOUSE, {"sneak_past": minute})
    story = a_block({"look": a_choice("Look"), "leave": a_choice("Leave")})
    with pytest.raises(ValueError, match="offers no parallel option"):
        parallel_option_time(story, durations)
