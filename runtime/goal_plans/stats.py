"""What a planning system has done, counted: jenbina's `get_planning_stats`, and more.

    stats = planning_stats(system.to_contract())   # any goal-planning-system document
    stats.active_plans, stats.success_rate, stats.plans   # the active plans themselves

The upstream reported the number of plans, of active, completed and failed
ones, the active plans and the completed ones; those keep their names here
(`total_plans`, `active_plans`, `completed_plans`, `failed_plans`, `plans`,
`completed`), so a reader of the upstream's report reads this one. Since the
document holds the goals and every plan, the counts go on: plans replanned,
the goals by horizon and by where they stand, the steps by status, the
cycles spent and the share of ended plans that were completed.
"""

from __future__ import annotations

from typing import get_args

import msgspec

from ...generated.goal_plans import Goal, GoalPlan, GoalPlanningSystem, GoalStep
from .session import HORIZONS

__all__ = ["GOAL_STANDINGS", "PlanningStats", "planning_stats"]

GOAL_STANDINGS = ("planned", "waiting", "achieved", "given_up")
"Where a goal stands: its plan active; no plan yet or again; progress 1; confidence 0."


def _statuses(struct: type[msgspec.Struct]) -> tuple[str, ...]:
    """The statuses `struct`'s `status` field may hold, in the schema's order."""
    return next(get_args(f.type) for f in msgspec.structs.fields(struct) if f.name == "status")


_PLAN_STATUSES = _statuses(GoalPlan)
_STEP_STATUSES = _statuses(GoalStep)


class PlanningStats(msgspec.Struct, frozen=True, kw_only=True):
    """A planning system counted, as `goals stats` prints it."""

    total_plans: int
    "Every plan made."
    active_plans: int
    completed_plans: int
    failed_plans: int
    "Plans abandoned after their last replan."
    replanned_plans: int
    "Plans a newer one replaced after a step failed: the replans made."
    success_rate: float | None
    "Of the plans that ended (completed or failed), the share completed; None when none ended."
    goals: int
    "Every goal."
    goals_by_horizon: dict[str, int]
    "The goals of each horizon: short, mid, long."
    goals_by_standing: dict[str, int]
    "The goals by where they stand (`GOAL_STANDINGS`)."
    steps: dict[str, int]
    "Every step of every plan, `total` and by status (pending, active, completed, failed)."
    cycles: int
    "The cycles counted in every step: every cycle judged while a plan was active."
    plans: list[GoalPlan]
    "The active plans, shortest horizon first (the upstream's `plans`)."
    completed: list[GoalPlan]
    "The completed plans, in the order made (the upstream's `completed`)."


def _standing(goal_id: int, goal: Goal, active: set[int]) -> str:
    if goal_id in active:
        return "planned"
    if goal.progress >= 1.0:
        return "achieved"
    if goal.confidence <= 0.0:
        return "given_up"
    return "waiting"


def planning_stats(state: GoalPlanningSystem) -> PlanningStats:
    """Count `state`, a decoded `goal-planning-system` document (its plans are shared)."""
    plans = state.plans
    by_status = dict.fromkeys(_PLAN_STATUSES, 0)
    for plan in plans:
        by_status[plan.status] += 1
    ended = by_status["completed"] + by_status["failed"]
    active = sorted(
        (plan for plan in plans if plan.status == "active"),
        key=lambda plan: HORIZONS.index(plan.horizon),
    )
    planned = {plan.goal_id for plan in active}
    by_horizon: dict[str, int] = dict.fromkeys(HORIZONS, 0)
    by_standing = dict.fromkeys(GOAL_STANDINGS, 0)
    for goal_id, goal in enumerate(state.goals):
        by_horizon[goal.horizon] += 1
        by_standing[_standing(goal_id, goal, planned)] += 1
    steps = {"total": 0, **dict.fromkeys(_STEP_STATUSES, 0)}
    cycles = 0
    for plan in plans:
        for step in plan.steps:
            steps["total"] += 1
            steps[step.status] += 1
            cycles += step.actual_cycles
    return PlanningStats(
        total_plans=len(plans),
        active_plans=by_status["active"],
        completed_plans=by_status["completed"],
        failed_plans=by_status["failed"],
        replanned_plans=by_status["replanned"],
        success_rate=round(by_status["completed"] / ended, 6) if ended else None,
        goals=len(state.goals),
        goals_by_horizon=by_horizon,
        goals_by_standing=by_standing,
        steps=steps,
        cycles=cycles,
        plans=active,
        completed=[plan for plan in plans if plan.status == "completed"],
    )
