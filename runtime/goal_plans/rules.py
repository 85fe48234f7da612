"""Rules of the goal-plan contracts that a JSON Schema cannot state, checked on parsed JSON.

A goal plan's steps follow its current index: the steps before it are
completed; while the plan is `active` the step at the index is the one
`active` step and the steps after it are `pending`; a `replanned` or
`failed` plan stopped at a `failed` step, and a `completed` plan has every
step completed and its index past the last. Only a plan replanned 3 times
fails (fewer replans lead to a new plan instead), and a replanned plan was
replanned fewer than 3 times, or no new plan could have followed it.

A planning system's plans point at its goals: each plan's `goal_id` is the
index of a goal, whose description and horizon the plan repeats; a goal has
at most one active plan, and a horizon too.

Each rule reads the value as parsed, whatever else is wrong with it, checks
only what is there and well typed, and walks the steps and plans in loops,
in time linear in the value's size. The planning system keeps every rule
(tests/test_goal_plans.py checks it after every event of random scripts);
`validate` applies them to documents from elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...generated import GOAL_PLAN, GOAL_PLANNING_SYSTEM
from ...generated.goal_plans import GoalPlan
from ..core.contracts import field_bound
from ..core.errors import Violation, shown
from ..core.rules import Rules, as_integer

__all__ = ["GOAL_PLAN_RULES", "MAX_REPLANS", "RULES", "SYSTEM_RULES"]

MAX_REPLANS = field_bound(GoalPlan, "times_replanned", "le")
"How many times one goal's plan may be replanned before it is abandoned."


def _goal_plan(value: Any) -> Iterator[Violation]:
    yield from _plan_at("", value)


def _plan_at(prefix: str, value: Any) -> Iterator[Violation]:
    if not isinstance(value, dict):
        return  # the schema says what it should have been
    status = value.get("status")
    replans = as_integer(value.get("times_replanned"))
    if status == "failed" and replans is not None and replans < MAX_REPLANS:
        message = (
            f"a plan fails only after {MAX_REPLANS} replans; this one had {replans}: "
            "it would have been replanned"
        )
        yield Violation(f"{prefix}/status", message)
    if status == "replanned" and replans is not None and replans >= MAX_REPLANS:
        message = f"a plan replanned {replans} times is abandoned, never replanned again"
        yield Violation(f"{prefix}/status", message)
    steps = value.get("steps")
    index = as_integer(value.get("current_step_index"))
    if not isinstance(steps, list) or index is None or not isinstance(status, str):
        return
    if status == "completed":
        if index != len(steps):
            message = f"a completed plan's index is past its last step, {len(steps)}, not {index}"
            yield Violation(f"{prefix}/current_step_index", message)
        index = len(steps)
    elif index >= len(steps):
        message = (
            f"is {index}, but the plan has {len(steps)} step{'s' if len(steps) != 1 else ''} "
            f"and is {status}: only a completed plan is past its last step"
        )
        yield Violation(f"{prefix}/current_step_index", message)
        return
    current = {"active": "active", "replanned": "failed", "failed": "failed"}.get(status)
    for number, step in enumerate(steps):
        if not isinstance(step, dict):
            continue  # the schema says so
        # A step without a status is pending: its default, which the typed plan holds.
        state = step.get("status", "pending")
        if not isinstance(state, str):
            continue
        expected = "completed" if number < index else current if number == index else "pending"
        if state != expected:
            given = "status" in step
            where = f"{prefix}/steps/{number}" + ("/status" if given else "")
            said = f"is {shown(state)}" if given else "has no status, so is pending"
            yield Violation(where, _why(number, index, status, said, expected))


def _why(number: int, index: int, status: str, said: str, expected: str | None) -> str:
    if number < index:
        return f"{said}, but the plan is past it (at step {index}): it is completed"
    if number == index:
        return f"{said}, but it is the current step and the plan is {status}: it is {expected}"
    return f"{said}, but the plan is at step {index}, before it: it is pending"


def _system(value: Any) -> Iterator[Violation]:
    if not isinstance(value, dict):
        return
    goals = value.get("goals")
    plans = value.get("plans")
    if not isinstance(plans, list):
        return
    goals = goals if isinstance(goals, list) else []
    active_goal: dict[int, int] = {}
    active_horizon: dict[str, int] = {}
    for number, plan in enumerate(plans):
        where = f"/plans/{number}"
        yield from _plan_at(where, plan)
        if not isinstance(plan, dict):
            continue
        goal_id = as_integer(plan.get("goal_id"))
        if goal_id is not None:
            yield from _goal_of(where, plan, goal_id, goals)
        if plan.get("status") != "active":
            continue
        horizon = plan.get("horizon")
        if goal_id is not None and goal_id in active_goal:
            message = f"goal {goal_id} has an active plan already, /plans/{active_goal[goal_id]}"
            yield Violation(f"{where}/status", message)
        elif isinstance(horizon, str) and horizon in active_horizon:
            message = (
                f"the {horizon}-term horizon has an active plan already, "
                f"/plans/{active_horizon[horizon]}: one active plan per horizon"
            )
            yield Violation(f"{where}/status", message)
        if goal_id is not None:
            active_goal.setdefault(goal_id, number)
        if isinstance(horizon, str):
            active_horizon.setdefault(horizon, number)


def _goal_of(
    where: str, plan: dict[str, Any], goal_id: int, goals: list[Any]
) -> Iterator[Violation]:
    if not 0 <= goal_id < len(goals):
        count = f"{len(goals)} goal{'s' if len(goals) != 1 else ''}"
        yield Violation(
            f"{where}/goal_id", f"is {goal_id}, but there are {count}: not a goal's index"
        )
        return
    goal = goals[goal_id]
    if not isinstance(goal, dict):
        return
    for field, own in (("goal_description", "description"), ("horizon", "horizon")):
        mine, theirs = plan.get(field), goal.get(own)
        if isinstance(mine, str) and isinstance(theirs, str) and mine != theirs:
            message = f"is {shown(mine)}, but goal {goal_id}'s {own} is {shown(theirs)}"
            yield Violation(f"{where}/{field}", message)


GOAL_PLAN_RULES = Rules(GOAL_PLAN.name, "the goal plan's rules", _goal_plan)
SYSTEM_RULES = Rules(GOAL_PLANNING_SYSTEM.name, "the planning system's rules", _system)
RULES = {GOAL_PLAN.name: GOAL_PLAN_RULES, GOAL_PLANNING_SYSTEM.name: SYSTEM_RULES}
