"""Goal plans: each decision of the planning system, its rules, random event scripts, the CLI.

Each decision the schemas record (in their descriptions) has its own test,
through the planning system as a simulation meets it. Every number is read
from the contracts (`x-planning`, bounds). Property tests run random scripts
of goals, contexts and cycles through one person and check the invariants
after every event; the command line is run as a user runs it, in this process.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from commands import cli
from hypothesis import given, settings
from hypothesis import strategies as st
from tiers import examples_at_most

from plancontracts import (
    GOAL_PLAN,
    GOAL_PLANNING_SYSTEM,
    ContractError,
    contract_schema,
    convert,
    violations,
)
from plancontracts.generated.goal_plans import (
    ContextEvent,
    Goal,
    GoalPlanOutput,
    Horizon,
    StepProposal,
)
from plancontracts.runtime.core.errors import TooManyGoals
from plancontracts.runtime.goal_plans import (
    ABANDONED,
    HORIZONS,
    MAX_GOALS,
    MAX_REPLANS,
    OVERRIDDEN,
    STUCK,
    CycleReport,
    GoalPlanner,
    Happening,
    Person,
    PlanningSystem,
    PlanRequest,
    StepOutcome,
    directive,
    fallback_steps,
    follows,
)
from plancontracts.runtime.goal_plans.session import (
    CONFIDENCE_PER_ABANDONED_PLAN,
    OVERRIDES_TO_REPLAN,
    PROGRESS_PER_COMPLETED_PLAN,
    READY_BELOW,
    STUCK_MULTIPLIER,
    completed_steps,
)

NOW = 1770000000.0


def output(*hints: str, cycles: int = 1) -> GoalPlanOutput:
    """A model answer: one step per hint, each estimated at `cycles` cycles."""
    steps = [
        StepProposal(
            description=f"Do: {hint}",
            action_hint=hint,
            expected_outcome=f"{hint} done",
            estimated_cycles=cycles,
        )
        for hint in hints
    ]
    return GoalPlanOutput(steps=steps)


@dataclass
class Recording(GoalPlanner):
    """The planner, scripted, remembering every request it was asked to write steps for."""

    requests: list[PlanRequest] = field(default_factory=list)

    async def steps(self, request: PlanRequest) -> Any:
        self.requests.append(request)
        return await super().steps(request)


def person(*answers: GoalPlanOutput) -> tuple[Person, Recording]:
    """A person whose plans are the scripted `answers`, then the fallback's."""
    planner = Recording(scripted=deque(answers))
    return Person(PlanningSystem(clock=lambda: NOW), planner), planner


def goal(description: str = "Have food", horizon: Horizon = "short", **more: Any) -> Goal:
    return Goal(description=description, horizon=horizon, **more)


def add(someone: Person, new: Goal) -> list[Happening]:
    return trio.run(someone.add_goal, new)


def cycle(someone: Person, action: str, delta: float = 1.0, **needs: float) -> CycleReport:
    return trio.run(partial(someone.cycle, action, delta, needs or None))


def context(someone: Person, **needs: float) -> list[Happening]:
    event = ContextEvent(needs=needs)
    result = trio.run(someone.run_event, event)
    assert isinstance(result, list)
    return result


def contract_holds(system: PlanningSystem) -> None:
    """The whole state is a valid planning system, its rules included."""
    found = violations(GOAL_PLANNING_SYSTEM, msgspec.to_builtins(system.to_contract()))
    assert list(found) == []


# Following a step ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "hint", "followed"),
    [
        ("walk to store", "walk to store", True),
        ("Walk To Store quickly", "walk to store", True),  # the action contains the hint
        ("work", "work at the cafe", True),  # the hint contains the action
        ("  WORK\t", "work", True),  # case and surrounding whitespace ignored
        ("sleep", "work", False),
        ("walk to the store", "walk to store", False),  # neither contains the other
        ("   ", "work", False),  # whitespace alone follows nothing
    ],
)
def test_an_action_follows_a_step_when_one_contains_the_other(
    action: str, hint: str, followed: bool
) -> None:
    assert follows(action, hint) is followed


def test_a_followed_step_completes_when_satisfaction_did_not_fall() -> None:
    someone, _ = person(output("look for work", "work"))
    add(someone, goal())
    report = cycle(someone, "look for work", 0.0)  # no change is not a fall
    assert report.outcome is StepOutcome.COMPLETED
    plan = someone.system.plans[0]
    assert [step.status for step in plan.steps] == ["completed", "active"]
    assert plan.current_step_index == 1
    assert plan.steps[0].actual_cycles == 1  # the completing cycle counts


def test_a_followed_step_stays_active_when_satisfaction_fell_and_the_overrides_reset() -> None:
    someone, _ = person(output("look for work", "work", cycles=5))
    add(someone, goal())
    cycle(someone, "go to sleep")
    cycle(someone, "read a book")
    assert someone.system.plans[0].consecutive_overrides == 2
    report = cycle(someone, "look for work at the market", -0.5)
    assert report.outcome is StepOutcome.IN_PROGRESS
    plan = someone.system.plans[0]
    assert plan.consecutive_overrides == 0
    assert plan.steps[0].status == "active"
    assert plan.steps[0].actual_cycles == 3  # every cycle counts, overridden ones too


def test_an_override_counts_the_cycle_and_the_overrides() -> None:
    someone, _ = person(output("look for work", "work", cycles=5))
    add(someone, goal())
    report = cycle(someone, "take a nap", 10.0)
    assert report.outcome is StepOutcome.OVERRIDDEN
    plan = someone.system.plans[0]
    assert (plan.steps[0].actual_cycles, plan.consecutive_overrides) == (1, 1)


def test_the_last_step_completes_the_plan_and_adds_to_the_goals_progress() -> None:
    someone, _ = person(output("walk to store", "buy food"), output("cook", "eat"))
    add(someone, goal())
    cycle(someone, "walk to store")
    report = cycle(someone, "buy food")
    assert report.outcome is StepOutcome.PLAN_COMPLETED
    ended = someone.system.plans[0]
    assert ended.status == "completed"
    assert ended.current_step_index == len(ended.steps)
    assert someone.system.goals[0].progress == pytest.approx(PROGRESS_PER_COMPLETED_PLAN)
    # Its progress is below 1: the goal is planned again at once, from the next answer.
    assert [h.what for h in report.happened] == ["completed", "planned"]
    assert report.happened[0].ended is ended
    assert someone.system.current_plan() is someone.system.plans[1]
    contract_holds(someone.system)


def test_progress_is_clamped_at_1_and_a_goal_achieved_is_not_planned_again() -> None:
    someone, planner = person(output("walk to store", "buy food"))
    add(someone, goal(progress=0.9))
    cycle(someone, "walk to store")
    report = cycle(someone, "buy food")
    assert someone.system.goals[0].progress == 1.0
    assert [h.what for h in report.happened] == ["completed"]
    assert someone.system.directive() is None
    assert len(planner.requests) == 1


def test_no_active_plan_means_no_outcome_beyond_saying_so() -> None:
    someone, _ = person()
    assert cycle(someone, "sleep").outcome is StepOutcome.NO_PLAN
    assert someone.system.directive() is None


# Replanning ---------------------------------------------------------------------------------


def test_a_step_is_stuck_only_past_the_multiple_of_its_estimate() -> None:
    estimate = 2
    limit = int(STUCK_MULTIPLIER * estimate)
    someone, planner = person(output("work", "rest", cycles=estimate), output("beg", "eat"))
    add(someone, goal())
    for _ in range(limit):  # followed, with falling satisfaction: counted, never overridden
        report = cycle(someone, "work", -1.0)
        assert report.happened == []
    assert someone.system.plans[0].steps[0].actual_cycles == limit  # exactly the multiple
    report = cycle(someone, "work", -1.0)
    assert [(h.what, h.reason) for h in report.happened] == [("replanned", STUCK)]
    assert planner.requests[-1].reason == STUCK


def test_consecutive_overrides_replan_and_a_followed_cycle_resets_them() -> None:
    someone, _ = person(output("work", "rest", cycles=5), output("beg", "eat"))
    add(someone, goal())
    for _ in range(OVERRIDES_TO_REPLAN - 1):
        cycle(someone, "sleep")
    cycle(someone, "work", -1.0)  # followed: the count starts again
    for _ in range(OVERRIDES_TO_REPLAN - 1):
        assert cycle(someone, "sleep").happened == []
    report = cycle(someone, "sleep")
    assert [(h.what, h.reason) for h in report.happened] == [("replanned", OVERRIDDEN)]
    replaced, new = someone.system.plans
    assert replaced.consecutive_overrides == OVERRIDES_TO_REPLAN  # kept as it was
    assert new.consecutive_overrides == 0


def test_a_step_both_stuck_and_overridden_fails_as_stuck() -> None:
    someone, _ = person(output("work", "rest", cycles=1), output("beg", "eat"))
    add(someone, goal())
    for _ in range(OVERRIDES_TO_REPLAN):  # 3 cycles > 2 x 1, and 3 overrides
        report = cycle(someone, "sleep")
    assert [h.reason for h in report.happened] == [STUCK]


def test_a_replan_keeps_the_completed_steps_and_records_the_failed_one() -> None:
    someone, planner = person(
        output("look for work", "work", "buy food", cycles=5), output("a", "b")
    )
    add(someone, goal())
    cycle(someone, "look for work")
    for _ in range(OVERRIDES_TO_REPLAN):
        report = cycle(someone, "sleep")
    replaced, new = someone.system.plans
    assert report.happened[0].ended is replaced
    assert replaced.status == "replanned"
    assert [s.status for s in replaced.steps] == ["completed", "failed", "pending"]
    assert replaced.steps[1].failure_reason == OVERRIDDEN
    assert (new.times_replanned, new.status, new.current_step_index) == (1, "active", 0)
    assert [s.action_hint for s in new.steps] == ["a", "b"]
    request = planner.requests[-1]
    assert [s.action_hint for s in request.completed] == ["look for work"]
    assert request.failed is not None
    assert request.failed.action_hint == "work"
    assert [s.action_hint for s in request.pending] == ["buy food"]
    assert request.reason == OVERRIDDEN
    contract_holds(someone.system)


def test_completed_steps_of_a_round_carry_over_replans_but_not_past_a_completed_plan() -> None:
    someone, _ = person(output("a", "b"), output("c", "d", cycles=5), output("e", "f"))
    add(someone, goal())
    cycle(someone, "a")
    cycle(someone, "b")  # the first plan completed: its steps belong to an ended round
    cycle(someone, "c")
    for _ in range(OVERRIDES_TO_REPLAN):
        cycle(someone, "sleep")
    hints = [s.action_hint for s in completed_steps(someone.system.plans, 0)]
    assert hints == ["c"]


def test_the_last_replan_asks_the_model_and_the_next_failure_abandons_without_it() -> None:
    answers = [output("work", "rest", cycles=5) for _ in range(1 + MAX_REPLANS)]
    someone, planner = person(*answers, output("start over", "eat"))
    add(someone, goal(confidence=0.5))
    for replans in range(1, MAX_REPLANS + 1):
        for _ in range(OVERRIDES_TO_REPLAN):
            report = cycle(someone, "sleep")
        assert [h.what for h in report.happened] == ["replanned"]
        assert someone.system.current_plan() is someone.system.plans[-1]
        assert someone.system.plans[-1].times_replanned == replans
    asked = len(planner.requests)
    for _ in range(OVERRIDES_TO_REPLAN):
        report = cycle(someone, "sleep")
    assert [h.what for h in report.happened] == ["abandoned", "planned"]
    abandoned = report.happened[0].ended
    assert abandoned is not None
    assert abandoned.status == "failed"
    assert abandoned.steps[0].failure_reason == ABANDONED + OVERRIDDEN
    # One request only: a first plan for the goal, which keeps some confidence; no replan.
    assert len(planner.requests) == asked + 1
    assert planner.requests[-1].failed is None
    assert someone.system.plans[-1].times_replanned == 0
    confidence = someone.system.goals[0].confidence
    assert confidence == pytest.approx(0.5 - CONFIDENCE_PER_ABANDONED_PLAN)
    contract_holds(someone.system)


def test_confidence_is_clamped_at_0_and_a_goal_without_confidence_is_not_planned_again() -> None:
    someone, planner = person(output("work", "rest", cycles=5))
    add(someone, goal(confidence=0.1))
    plan = someone.system.plans[0]
    plan.times_replanned = MAX_REPLANS  # as if this were the plan of the last replan
    for _ in range(OVERRIDES_TO_REPLAN):
        report = cycle(someone, "sleep")
    assert [h.what for h in report.happened] == ["abandoned"]
    assert someone.system.goals[0].confidence == 0.0
    assert someone.system.directive() is None
    assert len(planner.requests) == 1


# Horizons and readiness ---------------------------------------------------------------------


def test_the_current_step_comes_from_the_shortest_horizon_not_the_oldest_plan() -> None:
    someone, _ = person(output("save money", "buy a house"), output("cook", "eat"))
    add(someone, goal("Own a house", "long"))
    add(someone, goal("Have dinner", "short"))
    long_plan, short_plan = someone.system.plans
    assert someone.system.current_plan() is short_plan
    assert someone.system.active_plans() == [short_plan, long_plan]
    cycle(someone, "cook")
    assert short_plan.steps[0].status == "completed"
    assert long_plan.steps[0].actual_cycles == 0  # only the current plan is judged


def test_one_active_plan_per_horizon_and_waiting_goals_planned_in_the_order_added() -> None:
    someone, planner = person(output("a", "b"), output("c", "d"))
    add(someone, goal("First", "short", progress=0.8))
    add(someone, goal("Second", "short"))
    assert [p.goal_id for p in someone.system.active_plans()] == [0]
    cycle(someone, "a")
    report = cycle(someone, "b")  # the first goal is achieved: the horizon is free
    assert [(h.what, h.goal_id) for h in report.happened] == [("completed", 0), ("planned", 1)]
    assert len(planner.requests) == 2


def test_at_most_one_plan_per_horizon_so_three_at_once() -> None:
    someone, _ = person()
    for index, horizon in enumerate([*HORIZONS, *HORIZONS]):
        add(someone, goal(f"Goal {index}", horizon))
    assert len(someone.system.active_plans()) == len(HORIZONS) == 3
    assert [p.horizon for p in someone.system.active_plans()] == list(HORIZONS)


@pytest.mark.parametrize("horizon", [h for h in HORIZONS if h != "short"])
def test_a_longer_goal_waits_until_a_source_need_is_below_the_threshold(
    horizon: Horizon,
) -> None:
    someone, _ = person()
    context(someone, hunger=READY_BELOW, sleep=90.0)
    assert add(someone, goal("Stock the pantry", horizon, source_needs=["hunger", "sleep"])) == []
    assert context(someone, sleep=READY_BELOW + 1) == []
    assert [h.what for h in context(someone, hunger=READY_BELOW - 0.1)] == ["planned"]


def test_a_cycles_needs_can_make_a_goal_ready() -> None:
    someone, _ = person()
    context(someone, hunger=80.0)
    add(someone, goal("Stock the pantry", "mid", source_needs=["hunger"]))
    report = cycle(someone, "sleep", 0.0, hunger=20.0)
    assert report.outcome is StepOutcome.NO_PLAN
    assert [h.what for h in report.happened] == ["planned"]


def test_a_longer_goal_without_source_needs_or_known_needs() -> None:
    someone, _ = person()
    assert [h.what for h in add(someone, goal("Learn to read", "long"))] == ["planned"]
    other, _ = person()
    # Its source need is unknown: not known to be low, so it waits.
    assert add(other, goal("Stock up", "mid", source_needs=["hunger"])) == []


def test_a_short_goal_is_planned_at_once_whatever_its_needs() -> None:
    someone, _ = person()
    context(someone, hunger=100.0)
    assert [h.what for h in add(someone, goal(source_needs=["hunger"]))] == ["planned"]


def test_the_goal_list_is_bounded() -> None:
    system = PlanningSystem()
    for index in range(MAX_GOALS):
        system.add_goal(goal(f"Goal {index}", "long", source_needs=["hunger"]))
    with pytest.raises(TooManyGoals, match=f"{MAX_GOALS} goals"):
        system.add_goal(goal())


def test_start_plan_refuses_a_second_active_plan_for_a_goal_or_a_horizon() -> None:
    system = PlanningSystem()
    system.add_goal(goal("One"))
    system.add_goal(goal("Two"))
    system.start_plan(0, output("a", "b").steps)
    with pytest.raises(ValueError, match="goal 0 has an active plan"):
        system.start_plan(0, output("a", "b").steps)
    with pytest.raises(ValueError, match="short-term horizon"):
        system.start_plan(1, output("a", "b").steps)
    with pytest.raises(ValueError, match="no goal 2"):
        system.start_plan(2, output("a", "b").steps)


# The directive ------------------------------------------------------------------------------


def test_the_directive_reads_as_the_seed_writes_it() -> None:
    system = PlanningSystem()
    system.add_goal(goal("Have enough food for the week"))
    plan = system.start_plan(0, output("look for work", "work").steps)
    system.evaluate_step("look for work", 1.0)
    assert directive(plan) == (
        "Current Plan Step (follow this unless urgent needs override): "
        "Goal: Have enough food for the week. Step 2 of 2: Do: work. Suggested action: work."
    )
    assert system.directive() == directive(plan)


# Rules beyond the schema --------------------------------------------------------------------


def a_plan(**changes: Any) -> dict[str, Any]:
    steps = [
        {
            "description": "Borrow a ladder",
            "action_hint": "ask for ladder",
            "expected_outcome": "a",
        },
        {"description": "Buy tar", "action_hint": "buy tar", "expected_outcome": "b"},
        {"description": "Patch the roof", "action_hint": "patch roof", "expected_outcome": "c"},
    ]
    statuses = changes.pop("statuses", ["completed", "active", "pending"])
    plan: dict[str, Any] = {
        "goal_description": "Fix the roof",
        "goal_id": 0,
        "horizon": "mid",
        "steps": [{**step, "status": status} for step, status in zip(steps, statuses, strict=True)],
        "current_step_index": 1,
        "status": "active",
        "times_replanned": 0,
        "created_at": NOW,
        "consecutive_overrides": 0,
    }
    return {**plan, **changes}


def pointers(contract: Any, value: Any) -> list[str]:
    return [v.pointer for v in violations(contract, value)]


def test_a_consistent_plan_has_no_violations() -> None:
    assert pointers(GOAL_PLAN, a_plan()) == []
    done = a_plan(statuses=["completed"] * 3, status="completed", current_step_index=3)
    assert pointers(GOAL_PLAN, done) == []
    replanned = a_plan(statuses=["completed", "failed", "pending"], status="replanned")
    assert pointers(GOAL_PLAN, replanned) == []
    failed = {**replanned, "status": "failed", "times_replanned": MAX_REPLANS}
    assert pointers(GOAL_PLAN, failed) == []


@pytest.mark.parametrize(
    ("plan", "pointer", "words"),
    [
        (a_plan(current_step_index=3), "/current_step_index", "only a completed plan"),
        (a_plan(statuses=["completed", "active", "active"]), "/steps/2/status", "pending"),
        (a_plan(statuses=["active", "active", "pending"]), "/steps/0/status", "completed"),
        (a_plan(statuses=["completed", "pending", "pending"]), "/steps/1/status", "active"),
        (
            a_plan(statuses=["completed", "completed", "pending"], status="completed"),
            "/current_step_index",
            "past its last step",
        ),
        (
            a_plan(statuses=["completed", "failed", "pending"], status="failed"),
            "/status",
            f"only after {MAX_REPLANS} replans",
        ),
        (
            a_plan(
                statuses=["completed", "failed", "pending"],
                status="replanned",
                times_replanned=MAX_REPLANS,
            ),
            "/status",
            "never replanned again",
        ),
    ],
)
def test_the_plan_rules_point_at_what_breaks_them(plan: Any, pointer: str, words: str) -> None:
    found = violations(GOAL_PLAN, plan)
    assert pointer in [v.pointer for v in found]
    assert any(words in v.message for v in found if v.pointer == pointer)
    with pytest.raises(ContractError):
        convert(GOAL_PLAN, plan)


def test_a_step_without_a_status_is_pending_and_the_violation_points_at_the_step() -> None:
    plan = a_plan()
    del plan["steps"][1]["status"]
    found = violations(GOAL_PLAN, plan)
    assert [(v.pointer, "has no status" in v.message) for v in found] == [("/steps/1", True)]


def system_of(*plans: dict[str, Any], goals: Sequence[dict[str, Any]] | None = None) -> Any:
    default = [{"description": "Fix the roof", "horizon": "mid"}]
    return {"goals": list(default if goals is None else goals), "plans": list(plans)}


def test_the_systems_rules_tie_plans_to_their_goals_and_horizons() -> None:
    assert pointers(GOAL_PLANNING_SYSTEM, system_of(a_plan())) == []
    assert pointers(GOAL_PLANNING_SYSTEM, system_of(a_plan(goal_id=1))) == ["/plans/0/goal_id"]
    renamed = a_plan(goal_description="Fix the fence")
    assert pointers(GOAL_PLANNING_SYSTEM, system_of(renamed)) == ["/plans/0/goal_description"]
    assert pointers(GOAL_PLANNING_SYSTEM, system_of(a_plan(horizon="long"))) == ["/plans/0/horizon"]
    twice = system_of(a_plan(), a_plan())
    assert pointers(GOAL_PLANNING_SYSTEM, twice) == ["/plans/1/status"]
    goals = [{"description": "Fix the roof", "horizon": "mid"}] * 2
    same_horizon = system_of(a_plan(), a_plan(goal_id=1), goals=goals)
    found = violations(GOAL_PLANNING_SYSTEM, same_horizon)
    assert [v.pointer for v in found] == ["/plans/1/status"]
    assert "mid-term horizon" in found[0].message
    nested = system_of(a_plan(current_step_index=5))
    assert pointers(GOAL_PLANNING_SYSTEM, nested) == ["/plans/0/current_step_index"]


def test_the_systems_state_round_trips_through_its_contract() -> None:
    someone, _ = person(output("look for work", "work", cycles=5), output("beg", "eat"))
    add(someone, goal())
    cycle(someone, "look for work")
    for _ in range(OVERRIDES_TO_REPLAN):
        cycle(someone, "sleep")
    text = msgspec.json.encode(someone.system.to_contract())
    state = msgspec.json.decode(text, type=Any)
    decoded = convert(GOAL_PLANNING_SYSTEM, state)
    again = PlanningSystem.from_contract(decoded, clock=lambda: NOW)
    assert msgspec.json.encode(again.to_contract()) == text
    assert again.directive() == someone.system.directive()


# Random scripts -----------------------------------------------------------------------------

NEEDS = ["hunger", "sleep"]
ACTIONS = ["sleep", "eat", "work", "look around", "walk"]


@st.composite
def events(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """A script: goals, needs, scripted answers and cycles, in any order."""
    kinds = st.one_of(
        st.tuples(
            st.just("goal"),
            st.tuples(
                st.sampled_from(HORIZONS),
                st.lists(st.sampled_from(NEEDS), max_size=2),
                st.sampled_from([0.0, 0.5, 0.9]),
                st.sampled_from([0.1, 0.5, 1.0]),
            ),
        ),
        st.tuples(st.just("needs"), st.dictionaries(st.sampled_from(NEEDS), st.floats(0, 100))),
        st.tuples(
            st.just("answer"),
            st.tuples(
                st.lists(st.sampled_from(ACTIONS), min_size=2, max_size=6),
                st.integers(1, 5),
            ),
        ),
        st.tuples(
            st.just("cycle"),
            st.tuples(
                st.one_of(st.just(None), st.sampled_from(ACTIONS)),  # None: follow the step
                st.sampled_from([-5.0, -0.5, 0.0, 2.0]),
            ),
        ),
    )
    return draw(st.lists(kinds, max_size=60))


@settings(max_examples=examples_at_most(60), deadline=None)
@given(events())
def test_random_scripts_keep_every_invariant(script: list[tuple[str, Any]]) -> None:
    someone, _ = person()
    seen_cycles: dict[tuple[int, int], int] = {}
    ended: dict[int, bytes] = {}
    progress = confidence = 0.0
    for kind, value in script:
        before = [(g.progress, g.confidence) for g in someone.system.goals]
        if kind == "goal":
            horizon, needs, progress, confidence = value
            new = goal(f"Goal {len(someone.system.goals)}", horizon, source_needs=list(set(needs)))
            new.progress, new.confidence = progress, confidence
            add(someone, new)
            before.append((progress, confidence))
        elif kind == "needs":
            context(someone, **value)
        elif kind == "answer":
            hints, cycles = value
            someone.planner.script(output(*hints, cycles=cycles))
        else:
            action, delta = value
            step = someone.system.current_step()
            chosen = action or (step.action_hint if step is not None else "wait")
            cycle(someone, chosen, delta)
        system = someone.system
        active = system.active_plans()
        assert len(active) <= len(HORIZONS)
        assert len({plan.horizon for plan in active}) == len(active)
        assert len({plan.goal_id for plan in active}) == len(active)
        contract_holds(system)
        for number, plan in enumerate(system.plans):
            assert plan.times_replanned <= MAX_REPLANS
            for index, step in enumerate(plan.steps):
                counted = seen_cycles.get((number, index), 0)
                assert step.actual_cycles >= counted  # counters never go back
                seen_cycles[(number, index)] = step.actual_cycles
            text = msgspec.json.encode(plan)
            if number in ended:
                assert text == ended[number]  # an ended plan never changes again
            elif plan.status != "active":
                ended[number] = text
        for (old_progress, old_confidence), now in zip(before, system.goals, strict=True):
            assert now.progress >= old_progress
            assert now.confidence <= old_confidence
        current = system.current_plan()
        if current is None:
            assert system.directive() is None
        else:
            step = current.steps[current.current_step_index]
            shown = system.directive()
            assert shown is not None
            assert f"Step {current.current_step_index + 1} of {len(current.steps)}" in shown
            assert f": {step.description}. Suggested action: {step.action_hint}." in shown
            assert current.horizon == min((p.horizon for p in active), key=HORIZONS.index)


# The command line ---------------------------------------------------------------------------

TRACE = [
    {"event": "context", "needs": {"hunger": 30, "sleep": 70}},
    {
        "event": "model_output",
        "output": msgspec.to_builtins(output("look for work", "work", "buy food", cycles=3)),
    },
    {"event": "goal", "description": "Have enough food", "horizon": "short"},
    {"event": "cycle", "action": "look for work", "satisfaction_delta": 2},
    {"event": "cycle", "action": "sleep", "satisfaction_delta": 3},
    {"event": "cycle", "action": "nap", "satisfaction_delta": 3},
    {"event": "cycle", "action": "read", "satisfaction_delta": 3},
]


def ndjson(*lines: Any) -> str:
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)


def records(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_simulate_prints_one_line_per_event_with_the_directive_and_the_plans() -> None:
    done = cli("goals", "simulate", "-", "--fallback", stdin=ndjson(*TRACE))
    assert done.returncode == 0, done.stderr
    lines = records(done.stdout)
    assert [line["line"] for line in lines] == list(range(1, len(TRACE) + 1))
    assert [line["event"] for line in lines] == [event["event"] for event in TRACE]
    assert all(line["ok"] for line in lines)
    assert [line.get("outcome") for line in lines[3:]] == [
        "step_completed",
        "step_overridden",
        "step_overridden",
        "step_overridden",
    ]
    assert lines[2]["happened"] == [{"what": "planned", "goal_id": 0, "by": "script"}]
    assert lines[1]["directive"] is None
    assert lines[1]["plans"] == []
    assert "Step 2 of 3: Do: work. Suggested action: work." in lines[3]["directive"]
    replanned = lines[-1]["happened"]
    assert [(h["what"], h["by"], h["reason"]) for h in replanned] == [
        ("replanned", "fallback", OVERRIDDEN)
    ]
    assert replanned[0]["ended"]["status"] == "replanned"
    for line in lines:
        for plan in line["plans"]:
            convert(GOAL_PLAN, plan)
    assert done.stderr == ""  # the fallback was chosen: nothing to say


def test_simulate_refuses_bad_lines_in_place_and_goes_on() -> None:
    script = ndjson(
        TRACE[1],
        '{"event": "cycle", "action": ',
        {"event": "cycle", "action": "x", "satisfaction_delta": 500},
        {"event": "goal", "description": "Have food", "horizon": "soon"},
        {"event": "model_output", "output": {"steps": [{"description": "only one"}]}},
        ["not", "an", "event"],
        {"event": "goal", "description": "Have food", "horizon": "short"},
    )
    done = cli("goals", "simulate", "-", "--fallback", stdin=script)
    assert done.returncode == 1
    lines = records(done.stdout)
    assert [line["ok"] for line in lines] == [True, False, False, False, False, False, True]
    assert [line["event"] for line in lines[1:6]] == [None, "cycle", "goal", "model_output", None]
    pointers = [[v["pointer"] for v in line["error"]["violations"]] for line in lines[1:6]]
    assert pointers[1] == ["/satisfaction_delta"]
    assert pointers[2] == ["/horizon"]
    assert "/output/steps" in pointers[3]
    # The scripted answer of line 1 was kept and used by the goal of line 7.
    assert lines[-1]["happened"] == [{"what": "planned", "goal_id": 0, "by": "script"}]
    assert done.stderr.count("\n") <= 1
    assert "Traceback" not in done.stderr


def test_simulate_refuses_a_goal_beyond_the_list_bound() -> None:
    first = {"event": "goal", "horizon": "long", "source_needs": ["hunger"]}
    script = ndjson(*[{**first, "description": f"Goal {n}"} for n in range(MAX_GOALS + 1)])
    done = cli("goals", "simulate", "-", "--fallback", stdin=script)
    assert done.returncode == 1
    last = records(done.stdout)[-1]
    assert (last["ok"], last["event"]) == (False, "goal")
    assert f"{MAX_GOALS} goals" in last["error"]["message"]


def test_simulate_with_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    done = cli("goals", "simulate", str(tmp_path / "none.ndjson"))
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1
    assert "none.ndjson" in done.stderr


def test_validate_reports_a_goal_plans_rules() -> None:
    broken = a_plan(statuses=["completed", "active", "active"])
    done = cli("validate", "goal-plan", "-", stdin=json.dumps(broken))
    assert done.returncode == 1
    assert "/steps/2/status" in done.stdout + done.stderr


def test_the_fallback_keeps_a_person_going_without_any_model() -> None:
    someone = Person(PlanningSystem(clock=lambda: NOW), GoalPlanner())
    add(someone, goal("Have enough food for the week"))
    plan = someone.system.plans[0]
    assert [s.action_hint for s in plan.steps] == [
        s.action_hint
        for s in fallback_steps(PlanRequest(someone.system.goals[0], someone.context)).steps
    ]
    contract_holds(someone.system)


def test_a_goal_is_planned_a_bounded_number_of_times() -> None:
    # The plan list's bound rests on it: 4 completions or 5 abandonments end a goal.
    completions = 0
    progress = 0.0
    system = PlanningSystem(goals=[goal(progress=progress)])
    while system.goals_to_plan({}):
        system.start_plan(0, output("a", "b").steps)
        system.evaluate_step("a", 1.0)
        system.evaluate_step("b", 1.0)
        completions += 1
    assert completions == 4
    system = PlanningSystem(goals=[goal(confidence=1.0)])
    abandoned = 0
    while system.goals_to_plan({}):
        plan = system.start_plan(0, output("a", "b").steps, times_replanned=MAX_REPLANS)
        for _ in range(OVERRIDES_TO_REPLAN):
            system.evaluate_step("sleep", 0.0)
        (failure,) = system.due_replans()
        assert failure.abandons
        system.abandon(failure)
        assert plan.status == "failed"
        abandoned += 1
    assert abandoned == 5
    assert system.goals[0].confidence == 0.0


def test_the_numbers_of_the_rules_are_stated_where_the_schema_describes_them() -> None:
    schema = contract_schema(GOAL_PLANNING_SYSTEM)
    text = schema["description"]
    for number in (READY_BELOW, PROGRESS_PER_COMPLETED_PLAN, CONFIDENCE_PER_ABANDONED_PLAN):
        assert f"{number:g}" in text
    plan_text = contract_schema(GOAL_PLAN)["description"]
    assert f"{STUCK_MULTIPLIER:.1f} times" in plan_text
    assert f"{OVERRIDES_TO_REPLAN} consecutive overrides" in plan_text
    assert f"is already {MAX_REPLANS}" in plan_text


@pytest.mark.usefixtures("shared_model")
def test_simulate_without_scripted_answers_plans_with_the_packaged_model() -> None:
    script = ndjson(
        {"event": "context", "needs": {"hunger": 25}, "world": {"location": "home"}},
        {"event": "goal", "description": "Have enough food for the week", "horizon": "short"},
        {"event": "cycle", "action": "sleep", "satisfaction_delta": 1},
    )
    done = cli("goals", "simulate", "-", "--no-download", "--seed", "1", stdin=script)
    assert done.returncode == 0, done.stderr
    lines = records(done.stdout)
    assert lines[1]["happened"] == [{"what": "planned", "goal_id": 0, "by": "model"}]
    (plan,) = lines[1]["plans"]
    assert 2 <= len(convert(GOAL_PLAN, plan).steps) <= 6
    assert lines[2]["directive"].startswith("Current Plan Step")
    assert "model: loaded" in done.stderr


@pytest.mark.parametrize("count", [0, 1, 7])
def test_start_plan_refuses_steps_outside_the_output_contract(count: int) -> None:
    system = PlanningSystem(goals=[goal()])
    steps = output(*[f"step {n}" for n in range(count)]).steps
    with pytest.raises(ContractError, match="/steps"):
        system.start_plan(0, steps)
    assert system.plans == []


def test_a_retry_of_a_retry_says_it_once() -> None:
    someone, _ = person(output("work", "rest", cycles=5))
    add(someone, goal())
    for _ in range(2 * OVERRIDES_TO_REPLAN):  # two replans, both written by the fallback
        cycle(someone, "sleep")
    _first, second, third = someone.system.plans
    assert second.steps[0].description == "Try again: Do: work"
    assert third.steps[0].description == "Try again: Do: work"
    assert third.steps[0].estimated_cycles == 5  # one more each time, at most the bound


def test_completed_and_abandoned_plans_show_their_goal_after() -> None:
    someone, _ = person(output("a", "b"), output("work", "rest", cycles=5))
    add(someone, goal(confidence=0.1))
    cycle(someone, "a")
    (completed, _planned) = cycle(someone, "b").happened
    assert completed.goal is not None
    assert completed.goal.progress == pytest.approx(PROGRESS_PER_COMPLETED_PLAN)
    someone.system.plans[-1].times_replanned = MAX_REPLANS
    for _ in range(OVERRIDES_TO_REPLAN):
        report = cycle(someone, "sleep")
    (abandoned,) = report.happened
    assert abandoned.goal is not None
    assert abandoned.goal.confidence == 0.0
    assert someone.system.goals[0].confidence == 0.0


@pytest.mark.process  # a signal to a command's own process
@pytest.mark.parametrize("command", ["plan", "simulate"])
@pytest.mark.parametrize(("signum", "status"), [(2, 130), (15, 143), (1, 129)])
def test_a_signal_stops_goals_while_a_server_trickles(
    signum: int, status: int, command: str, tmp_path: Path
) -> None:
    import signal
    import subprocess
    import sys
    import time

    from local_servers import Reply, conforming, model_server

    # A model list of 600 bytes at one every half second: five minutes, each read quick.
    listed = json.dumps({"data": [{"id": "stub-model"}]}).encode().ljust(600)
    trickle = Reply(content=None, body=listed, every=0.5)
    with model_server(conforming, listing=trickle) as server:
        script = tmp_path / "day.ndjson"  # a goal, planned as soon as it is added
        script.write_text(
            '{"event": "goal", "description": "Reach the tower", "horizon": "short"}\n'
        )
        what = ["Reach the tower"] if command == "plan" else [str(script)]
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "plancontracts",
                "goals",
                command,
                *what,
                "--server",
                server.url,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(3)  # into the model list's trickle: the interpreter starts within it
        process.send_signal(signal.Signals(signum))
        try:
            _, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
    assert process.returncode == status, stderr
