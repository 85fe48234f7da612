"""The planning system: goals, their plans, and what one cycle of the person does to them.

    system = PlanningSystem()
    goal_id = system.add_goal(Goal(description="Have enough food", horizon="short"))
    system.start_plan(goal_id, output.steps)           # the model's steps (see `agent`)
    system.directive()                                 # what the action decision reads
    system.evaluate_step("look for work", 2.0)         # one cycle: StepOutcome.COMPLETED...
    system.due_replans()                               # plans to replan, and why

This module holds the state and its rules, and never calls a model: asking
for steps is `agent`'s job, and `simulation.Person` puts the two together
cycle by cycle. Every number the rules use (the stuck multiplier, the
overrides that replan, the readiness threshold, the progress and
confidence steps, the replan bound) is read from the contracts'
`x-planning` and bounds; the decisions the seed left open are stated in
the schemas' descriptions, and tests/test_goal_plans.py checks each.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import msgspec

from ...generated import GOAL_PLAN_OUTPUT, GOAL_PLANNING_SYSTEM
from ...generated.goal_plans import (
    Goal,
    GoalPlan,
    GoalPlanningSystem,
    GoalPlanOutput,
    GoalStep,
    Horizon,
    StepProposal,
)
from ..core.contracts import contract_schema, field_bound
from ..core.errors import TooManyGoals
from ..core.validation import convert
from .rules import MAX_REPLANS

__all__ = [
    "ABANDONED",
    "HORIZONS",
    "MAX_GOALS",
    "OVERRIDDEN",
    "STUCK",
    "Failure",
    "PlanningSystem",
    "StepOutcome",
    "directive",
    "follows",
]

HORIZONS: tuple[Horizon, ...] = get_args(Horizon)
"The horizons, shortest first: the order in which active plans give the current step."
MAX_GOALS = field_bound(GoalPlanningSystem, "goals", "max_length")
_PLANNING: dict[str, Any] = contract_schema(GOAL_PLANNING_SYSTEM)["x-planning"]
STUCK_MULTIPLIER: float = _PLANNING["stuck_multiplier"]
OVERRIDES_TO_REPLAN: int = _PLANNING["overrides_to_replan"]
READY_BELOW: float = _PLANNING["ready_below"]
PROGRESS_PER_COMPLETED_PLAN: float = _PLANNING["progress_per_completed_plan"]
CONFIDENCE_PER_ABANDONED_PLAN: float = _PLANNING["confidence_per_abandoned_plan"]

# The failure reasons, as the upstream wrote them, so recorded traces compare.
STUCK = "stuck \u2014 exceeded time estimate"
OVERRIDDEN = "repeatedly overridden by urgent needs"
ABANDONED = "max replans reached: "


class StepOutcome(enum.Enum):
    """What one cycle did to the current step."""

    COMPLETED = "step_completed"
    "The action followed the step and satisfaction did not fall: the next step is active."
    PLAN_COMPLETED = "plan_completed"
    "As COMPLETED, and it was the plan's last step."
    IN_PROGRESS = "step_in_progress"
    "The action followed the step but satisfaction fell: the step goes on."
    OVERRIDDEN = "step_overridden"
    "The person did something else."
    NO_PLAN = "no_plan"
    "There was no active plan to follow."


@dataclass(frozen=True)
class Failure:
    """An active plan whose current step failed, and why: due for a replan (or abandonment)."""

    plan: GoalPlan
    reason: str
    "`STUCK` or `OVERRIDDEN`."

    @property
    def abandons(self) -> bool:
        """Whether the plan was replanned `MAX_REPLANS` times: it is abandoned, not replanned."""
        return self.plan.times_replanned >= MAX_REPLANS


def follows(action: str, hint: str) -> bool:
    """Whether `action` carries out a step with `hint`: one contains the other, ignoring case.

    Surrounding whitespace is ignored too; an action of only whitespace follows nothing.
    """
    action, hint = action.strip().casefold(), hint.strip().casefold()
    return bool(action) and bool(hint) and (hint in action or action in hint)


def directive(plan: GoalPlan) -> str:
    """The line the action decision reads for `plan`'s current step, as the seed words it."""
    step = plan.steps[plan.current_step_index]
    return (
        "Current Plan Step (follow this unless urgent needs override): "
        f"Goal: {plan.goal_description}. "
        f"Step {plan.current_step_index + 1} of {len(plan.steps)}: {step.description}. "
        f"Suggested action: {step.action_hint}."
    )


def _clamped(value: float) -> float:
    # Rounded, so that steps of 0.2 from 1.0 end at 0.0 exactly, not at 5.6e-17,
    # which would keep a goal planned after its confidence ran out.
    return round(min(1.0, max(0.0, value)), 9)


@dataclass
class PlanningSystem:
    """One person's goals and every plan made for them, in the order made.

    `clock` gives each new plan its `created_at` (Unix seconds).
    """

    goals: list[Goal] = field(default_factory=list)
    plans: list[GoalPlan] = field(default_factory=list)
    clock: Callable[[], float] = time.time

    # The state as a contract ---------------------------------------------------------------

    def to_contract(self) -> GoalPlanningSystem:
        """The state as a `goal-planning-system` document (shared, not copied)."""
        return GoalPlanningSystem(goals=self.goals, plans=self.plans)

    @classmethod
    def from_contract(
        cls, state: GoalPlanningSystem, clock: Callable[[], float] = time.time
    ) -> PlanningSystem:
        """A system that goes on from `state` (decoded, so its rules hold), which it takes over."""
        return cls(state.goals, state.plans, clock)

    # Reading -------------------------------------------------------------------------------

    def active_plans(self) -> list[GoalPlan]:
        """The active plans, shortest horizon first: at most one per horizon."""
        active = [plan for plan in self.plans if plan.status == "active"]
        return sorted(active, key=lambda plan: HORIZONS.index(plan.horizon))

    def current_plan(self) -> GoalPlan | None:
        """The active plan of the shortest horizon, whose step the person is asked to follow."""
        active = self.active_plans()
        return active[0] if active else None

    def current_step(self) -> GoalStep | None:
        """The active step of `current_plan()`, or None without an active plan."""
        plan = self.current_plan()
        return plan.steps[plan.current_step_index] if plan is not None else None

    def directive(self) -> str | None:
        """The current step as the action decision reads it, or None without an active plan."""
        plan = self.current_plan()
        return directive(plan) if plan is not None else None

    def goals_to_plan(self, needs: Mapping[str, float]) -> list[int]:
        """The goals to plan now, given the needs' satisfaction (percent, by name), in order.

        A goal is planned when it has no active plan, its progress is below
        1 and its confidence above 0; a short-term goal at once, another
        once any of its source needs is below `READY_BELOW` (one without
        source needs at once); and its horizon has no active plan, nor an
        earlier goal chosen here.
        """
        busy = {plan.horizon for plan in self.active_plans()}
        chosen = []
        for goal_id, goal in enumerate(self.goals):
            if goal.horizon in busy or goal.progress >= 1.0 or goal.confidence <= 0.0:
                continue
            if goal.horizon != "short" and goal.source_needs:
                known = [needs[name] for name in goal.source_needs if name in needs]
                if not any(value < READY_BELOW for value in known):
                    continue
            busy.add(goal.horizon)
            chosen.append(goal_id)
        return chosen

    def due_replans(self) -> list[Failure]:
        """The active plans whose current step failed: stuck, or overridden too often.

        A step is stuck when its actual cycles exceed `STUCK_MULTIPLIER`
        times its estimate; checked before the overrides, so a step both
        stuck and overridden is stuck.
        """
        found = []
        for plan in self.active_plans():
            step = plan.steps[plan.current_step_index]
            if step.actual_cycles > STUCK_MULTIPLIER * step.estimated_cycles:
                found.append(Failure(plan, STUCK))
            elif plan.consecutive_overrides >= OVERRIDES_TO_REPLAN:
                found.append(Failure(plan, OVERRIDDEN))
        return found

    # Changing ------------------------------------------------------------------------------

    def add_goal(self, goal: Goal) -> int:
        """Add `goal` at the end of the goal list and return its index (its `goal_id`).

        Raises TooManyGoals when the list holds `MAX_GOALS` goals.
        """
        if len(self.goals) >= MAX_GOALS:
            raise TooManyGoals(f"the person has {MAX_GOALS} goals already, the most a system keeps")
        self.goals.append(goal)
        return len(self.goals) - 1

    def start_plan(
        self, goal_id: int, steps: Sequence[StepProposal], *, times_replanned: int = 0
    ) -> GoalPlan:
        """Make a plan of `steps` for goal `goal_id`, its first step active, and return it.

        Raises ValueError when the goal does not exist, already has an active
        plan, or its horizon has one: a goal is planned once at a time; and
        ContractError (a ValueError) when `steps` break the
        `goal-plan-output` contract, as steps built in Python may.
        """
        convert(GOAL_PLAN_OUTPUT, msgspec.to_builtins(GoalPlanOutput(steps=list(steps))))
        if not 0 <= goal_id < len(self.goals):
            raise ValueError(f"there is no goal {goal_id}")
        goal = self.goals[goal_id]
        for plan in self.active_plans():
            if plan.goal_id == goal_id:
                raise ValueError(f"goal {goal_id} has an active plan already")
            if plan.horizon == goal.horizon:
                raise ValueError(f"the {goal.horizon}-term horizon has an active plan already")
        plan = GoalPlan(
            goal_description=goal.description,
            goal_id=goal_id,
            horizon=goal.horizon,
            steps=[_step(proposal) for proposal in steps],
            current_step_index=0,
            status="active",
            times_replanned=times_replanned,
            created_at=self.clock(),
            consecutive_overrides=0,
        )
        plan.steps[0].status = "active"
        self.plans.append(plan)
        return plan

    def evaluate_step(self, action: str, satisfaction_delta: float) -> StepOutcome:
        """Judge the current step by one cycle: the action chosen and the satisfaction's change.

        Every cycle counts in the step's `actual_cycles`, the completing one
        included. An action that follows the step (`follows`) with a change
        of at least 0 completes it and makes the next one active (or
        completes the plan, adding to its goal's progress); one that follows
        it with a fall leaves it active. Either resets the plan's
        consecutive overrides; any other action adds one.
        """
        plan = self.current_plan()
        if plan is None:
            return StepOutcome.NO_PLAN
        step = plan.steps[plan.current_step_index]
        step.actual_cycles += 1
        if not follows(action, step.action_hint):
            plan.consecutive_overrides += 1
            return StepOutcome.OVERRIDDEN
        plan.consecutive_overrides = 0
        if satisfaction_delta < 0:
            return StepOutcome.IN_PROGRESS
        step.status = "completed"
        plan.current_step_index += 1
        if plan.current_step_index < len(plan.steps):
            plan.steps[plan.current_step_index].status = "active"
            return StepOutcome.COMPLETED
        plan.status = "completed"
        goal = self.goals[plan.goal_id]
        goal.progress = _clamped(goal.progress + PROGRESS_PER_COMPLETED_PLAN)
        return StepOutcome.PLAN_COMPLETED

    def replan(self, failure: Failure, steps: Sequence[StepProposal]) -> GoalPlan:
        """Replace `failure.plan` by a new plan of `steps`, and return the new plan.

        The failed step keeps its reason; the old plan becomes `replanned`,
        and keeps its completed steps; the new one counts one replan more.
        Raises ValueError when the plan is to be abandoned instead.
        """
        if failure.abandons:
            raise ValueError(f"a plan replanned {MAX_REPLANS} times is abandoned, not replanned")
        old = failure.plan
        self._fail(old, failure.reason, "replanned")
        return self.start_plan(old.goal_id, steps, times_replanned=old.times_replanned + 1)

    def abandon(self, failure: Failure) -> None:
        """Abandon `failure.plan`: it fails, and its goal loses confidence."""
        plan = failure.plan
        self._fail(plan, ABANDONED + failure.reason, "failed")
        goal = self.goals[plan.goal_id]
        goal.confidence = _clamped(goal.confidence - CONFIDENCE_PER_ABANDONED_PLAN)

    @staticmethod
    def _fail(plan: GoalPlan, reason: str, status: Literal["replanned", "failed"]) -> None:
        step = plan.steps[plan.current_step_index]
        step.status = "failed"
        step.failure_reason = reason
        plan.status = status


def _step(proposal: StepProposal) -> GoalStep:
    """A pending step of a plan, as `proposal` proposes it."""
    return GoalStep(**msgspec.structs.asdict(proposal))


def completed_steps(plans: Iterable[GoalPlan], goal_id: int) -> list[GoalStep]:
    """The steps goal `goal_id`'s current round of plans has completed, in order.

    A round is a first plan and the plans that replanned it; a plan that
    completed or failed ends one. This is what a replan builds on.
    """
    found: list[GoalStep] = []
    for plan in plans:
        if plan.goal_id != goal_id:
            continue
        if plan.status in ("completed", "failed"):
            found = []
            continue
        found += [step for step in plan.steps if step.status == "completed"]
    return found
