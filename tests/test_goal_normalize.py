"""`normalize_output` and `normalize goal-plan-output`: the upstream's tolerance, as repairs.

Every model answer the upstream's tests fed it, refused as it is by the
contract (tests/test_goal_replay.py), becomes a valid answer once
normalized, each change reported at its pointer. Property tests: an answer
the upstream would have taken always normalizes to a valid one, and any JSON
value normalizes to a fixed point whose violations are its contract's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from commands import cli
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples_at_most

from plancontracts import GOAL_PLAN_OUTPUT, decode, violations
from plancontracts.generated.goal_plans import GoalPlanOutput, StepProposal
from plancontracts.runtime.core.contracts import field_bound
from plancontracts.runtime.core.repairs import ABSENT, Repair, normalizable, normalizer_of
from plancontracts.runtime.goal_plans import normalize_output
from plancontracts.runtime.goal_plans.repairs import NORMALIZERS

MOST_STEPS = field_bound(GoalPlanOutput, "steps", "max_length")
LEAST_CYCLES = field_bound(StepProposal, "estimated_cycles", "ge")
MOST_CYCLES = field_bound(StepProposal, "estimated_cycles", "le")


def step(name: str = "s", **more: Any) -> dict[str, Any]:
    return {"description": name, "action_hint": name, "expected_outcome": f"{name} done", **more}


def repaired(value: Any) -> list[tuple[str, Any, Any]]:
    """Each repair of `value`: its pointer, before and after."""
    return [(r.pointer, r.before, r.after) for r in normalize_output(value).repairs]


# Each repair ---------------------------------------------------------------------------------


def test_estimates_are_clamped_rounded_down_and_filled_in() -> None:
    steps = [
        step("a", estimated_cycles=100),
        step("b", estimated_cycles=0),
        step("c", estimated_cycles=2.7),
        step("d"),
        step("e", estimated_cycles=3.0),  # whole: nothing to repair
        step("f", estimated_cycles="3"),  # not a number: judged, not guessed at
    ]
    result = normalize_output({"steps": steps})
    assert [(r.pointer, r.before, r.after) for r in result.repairs] == [
        ("/steps/0/estimated_cycles", 100, MOST_CYCLES),
        ("/steps/1/estimated_cycles", 0, LEAST_CYCLES),
        ("/steps/2/estimated_cycles", 2.7, 2),
        ("/steps/3/estimated_cycles", ABSENT, 2),  # the schema's default of a step's estimate
    ]
    assert [v.pointer for v in result.violations] == ["/steps/5/estimated_cycles"]


def test_a_plan_over_the_most_steps_is_cut_and_only_its_kept_steps_repaired() -> None:
    steps = [step(str(n), estimated_cycles=9) for n in range(MOST_STEPS + 2)]
    result = normalize_output({"steps": steps})
    assert result.valid
    assert len(result.value["steps"]) == MOST_STEPS
    assert result.repairs[0].pointer == "/steps"
    assert (result.repairs[0].before, result.repairs[0].after) == (
        f"{MOST_STEPS + 2} steps",
        f"{MOST_STEPS} steps",
    )
    clamped = [r.pointer for r in result.repairs[1:]]
    assert clamped == [f"/steps/{n}/estimated_cycles" for n in range(MOST_STEPS)]


def test_a_plan_of_one_step_gets_a_second_confirming_it_with_the_same_action() -> None:
    result = normalize_output({"steps": [step("eat", estimated_cycles=1)]})
    assert result.valid
    first, second = result.value["steps"]
    assert second == {
        "description": "Confirm: eat done",
        "action_hint": first["action_hint"],
        "expected_outcome": first["expected_outcome"],
        "estimated_cycles": LEAST_CYCLES,
    }
    (repair,) = result.repairs
    assert (repair.pointer, repair.before, repair.after) == ("/steps/-", ABSENT, second)
    assert "at least 2 steps" in str(repair)


def test_items_that_are_no_step_and_unknown_fields_are_dropped_where_they_were() -> None:
    value = {
        "steps": [{"not_a_step": True}, "go", step("a", estimated_cycles=1, why="x"), step("b")],
        "reasoning": "r",
        "a/b": 1,
    }
    assert repaired(value) == [
        ("/reasoning", "r", ABSENT),
        ("/a~1b", 1, ABSENT),
        ("/steps/0", {"not_a_step": True}, ABSENT),
        ("/steps/1", "go", ABSENT),
        ("/steps/2/why", "x", ABSENT),
        ("/steps/3/estimated_cycles", ABSENT, 2),
    ]


def test_a_bare_list_is_taken_for_the_steps() -> None:
    result = normalize_output([step("a", estimated_cycles=1), step("b", estimated_cycles=1)])
    assert result.valid
    assert [r.pointer for r in result.repairs] == [""]
    assert str(result.repairs[0]).startswith('(document): "2 steps" -> "an object with steps"')


def test_what_cannot_be_repaired_is_left_and_judged() -> None:
    for value in [5, {"plan": []}, {"steps": []}, {"steps": [{"x": 1}]}, {"steps": "a"}]:
        result = normalize_output(value)
        assert not result.valid, value
        assert list(result.violations) == list(violations(GOAL_PLAN_OUTPUT, result.value))
    long = "x" * (field_bound(StepProposal, "description", "max_length") + 1)
    too_long = {**step("a", estimated_cycles=1), "description": long}
    result = normalize_output({"steps": [too_long, too_long]})
    assert result.repairs == ()  # a text too long is not cut: its writer wrote it so
    assert [v.pointer for v in result.violations] == [f"/steps/{n}/description" for n in (0, 1)]


def test_the_value_given_is_never_changed() -> None:
    value = {"steps": [step("a", estimated_cycles=9, why=1)], "extra": [1]}
    before = json.dumps(value)
    normalize_output(value)
    assert json.dumps(value) == before


def test_every_answer_the_upstream_was_fed_becomes_valid_once_normalized(upstream: Path) -> None:
    recorded = json.loads((upstream / "jenbina" / "test_fixture_llm_responses.json").read_text())
    answers = [fixture for fixture in recorded["fixtures"] if "llm_response" in fixture]
    refused = {f["test"] for f in answers if violations(GOAL_PLAN_OUTPUT, f["llm_response"])}
    assert len(refused) == 9  # as tests/test_goal_replay.py judges them
    for fixture in answers:
        result = normalize_output(fixture["llm_response"])
        assert result.valid, (fixture["test"], result.violations)
        decode(GOAL_PLAN_OUTPUT, json.dumps(result.value))
    clamps = next(f for f in answers if f["test"] == "test_create_plan_clamps_estimated_cycles")
    assert ("/steps/0/estimated_cycles", 100, MOST_CYCLES) in repaired(clamps["llm_response"])


# Properties ----------------------------------------------------------------------------------

texts = st.text(min_size=1, max_size=30)
cycles = st.one_of(
    st.integers(-1000, 1000), st.floats(-50, 50, allow_nan=False, allow_infinity=False)
)
good_step = st.fixed_dictionaries(
    {"description": texts, "action_hint": texts, "expected_outcome": texts},
    optional={"estimated_cycles": cycles, "status": st.just("pending"), "why": texts},
)
junk = st.one_of(st.integers(), st.text(max_size=5), st.fixed_dictionaries({"x": st.integers()}))


@st.composite
def upstream_answers(draw: st.DrawFn) -> Any:
    """Answers the upstream made a plan of: at least one step, among junk, in any number."""
    items = draw(st.lists(st.one_of(good_step, junk), max_size=10))
    items.insert(draw(st.integers(0, len(items))), draw(good_step))
    if draw(st.booleans()):
        return items
    return {"steps": items, **draw(st.dictionaries(st.sampled_from(["why", "plan"]), texts))}


@settings(max_examples=examples_at_most(200), deadline=None)
@given(upstream_answers())
def test_an_answer_the_upstream_took_always_normalizes_to_a_valid_one(value: Any) -> None:
    result = normalize_output(value)
    assert result.valid, result.violations
    assert normalize_output(result.value).repairs == ()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=20,
)


@settings(max_examples=examples_at_most(200), deadline=None)
@given(st.one_of(json_values, upstream_answers()))
def test_any_value_normalizes_to_a_fixed_point_judged_by_its_contract(value: Any) -> None:
    result = normalize_output(value)
    again = normalize_output(result.value)
    assert again.repairs == ()
    assert again.value == result.value
    assert list(result.violations) == list(violations(GOAL_PLAN_OUTPUT, result.value))


# The command ---------------------------------------------------------------------------------


def test_the_command_prints_the_repaired_answer_and_reports_each_repair() -> None:
    answer = [step("a", estimated_cycles=9)]
    done = cli("normalize", "goal-plan-output", "-", stdin=json.dumps(answer))
    assert done.returncode == 0, done.stderr
    output = decode(GOAL_PLAN_OUTPUT, done.stdout)
    assert [s.estimated_cycles for s in output.steps] == [MOST_CYCLES, LEAST_CYCLES]
    said = done.stderr.splitlines()
    assert said[0] == "<stdin>: 3 repairs"
    assert said[1].startswith("  (document): ")
    assert said[2] == (
        "  /steps/0/estimated_cycles: 9 -> 5 (clamped to 1..5 cycles, as the upstream clamped it)"
    )
    assert said[3].startswith("  /steps/-: (absent) -> ")
    assert len(said) == 4


def test_the_command_as_json_is_one_object() -> None:
    answer = json.dumps({"steps": [step("a")]})
    done = cli("normalize", "goal-plan-output", "--json", "-", stdin=answer)
    assert done.returncode == 0, done.stderr
    (record,) = [json.loads(line) for line in done.stdout.splitlines()]
    assert record["valid"] is True
    assert [(r["pointer"], "before" in r, "after" in r) for r in record["repairs"]] == [
        ("/steps/0/estimated_cycles", False, True),
        ("/steps/-", False, True),
    ]
    decode(GOAL_PLAN_OUTPUT, json.dumps(record["output"]))


@pytest.mark.parametrize(
    ("stdin", "said"),
    [
        ('{"steps": []}', "<stdin>: still invalid (1 violation), so nothing is printed"),
        ("{", "<stdin>: cannot be normalized (1 violation), so nothing is printed"),
    ],
)
def test_what_stays_invalid_prints_nothing_and_exits_1(stdin: str, said: str) -> None:
    done = cli("normalize", "goal-plan-output", "-", stdin=stdin)
    assert (done.returncode, done.stdout) == (1, "")
    assert said in done.stderr.splitlines()
    assert "Traceback" not in done.stderr


def test_a_file_that_cannot_be_read_is_a_usage_error(tmp_path: Path) -> None:
    done = cli("normalize", "goal-plan-output", str(tmp_path / "none.json"))
    assert (done.returncode, done.stdout) == (2, "")
    assert len(done.stderr.splitlines()) == 1
    assert "none.json: no such file" in done.stderr
    as_json = cli("normalize", "goal-plan-output", "--json", str(tmp_path))
    assert as_json.returncode == 2
    assert json.loads(as_json.stdout)["valid"] is False


def test_planning_blocks_options_are_refused_for_a_goal_plans_answer() -> None:
    # `--mode` chooses the planning protocol's rules: it says nothing of a goal plan.
    done = cli("normalize", "goal-plan-output", "--mode", "think", "-", stdin="[]")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines() == [
        "plancontracts: error: --mode applies to planning-block only, not goal-plan-output"
    ]


def test_each_family_declares_what_it_normalizes_and_the_command_finds_it() -> None:
    assert normalizable() == ["goal-plan-output", "planning-block"]
    assert normalizer_of("goal-plan-output") is NORMALIZERS["goal-plan-output"]
    assert normalizer_of("plan") is None
    dropped = Repair("/steps/0", "go", ABSENT, "not a step")
    assert str(dropped) == '/steps/0: "go" -> (dropped) (not a step)'
