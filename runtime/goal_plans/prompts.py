"""What the model reads: before writing a goal's plan or replan, and to choose an action.

The system message says what a plan is and how to write one
(`templates/system.md`); the user message gives the goal, its horizon, the
person's needs, emotions, world and lessons (`Circumstances`), and for a
replan the steps completed, the step that failed and why, and the steps not
reached (`templates/plan.md`, `templates/replan.md`).

The action decision's prompt (`action_messages`, `templates/action-system.md`
and `templates/action.md`) is the one the seed gives the current plan step
to: the directive, as `$current_plan_step`, placed above the goals and the
lessons, where it takes precedence over them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...generated.goal_plans import Goal, GoalPlanOutput, GoalStep, Lesson, StepProposal
from ..core.contracts import field_bound
from ..core.plain_text import one_line
from ..core.templates import template
from ..model.chat import Message
from .session import PlanningSystem

__all__ = ["NO_PLAN_STEP", "Circumstances", "PlanRequest", "action_messages", "plan_messages"]

NO_PLAN_STEP = "Current Plan Step: none (no plan is active)"
"What the action decision reads in the directive's place when no plan is active."


@dataclass(frozen=True)
class Circumstances:
    """What the person feels and knows when a plan is made: the prompt's inputs besides the goal."""

    needs: Mapping[str, float] = field(default_factory=dict)
    "Each need's satisfaction in percent, by name."
    emotions: Mapping[str, int] = field(default_factory=dict)
    "Each emotion's strength, 0 to 100, by name."
    world: Mapping[str, str] = field(default_factory=dict)
    "What the person knows of the world, by name."
    lessons: Sequence[Lesson] = ()
    "What the person has learned."


@dataclass(frozen=True)
class PlanRequest:
    """A goal to plan, or to replan: then with the steps completed and the step that failed."""

    goal: Goal
    context: Circumstances
    completed: Sequence[GoalStep] = ()
    "Replans: the steps completed so far, in order."
    failed: GoalStep | None = None
    "Replans: the step that failed; None asks for a first plan."
    reason: str = ""
    "Replans: why the step failed."
    pending: Sequence[GoalStep] = ()
    "Replans: the steps after the failed one, not reached."


def _listed(lines: list[str], none: str = "none known") -> str:
    return "\n".join(f"- {one_line(line)}" for line in lines) if lines else f"- {none}"


def _number(value: float) -> str:
    return f"{value:g}"


def _context_values(context: Circumstances) -> dict[str, str]:
    """The sections every prompt gives of what the person feels and knows."""
    return {
        "needs": _listed([f"{k}: {_number(v)}% satisfied" for k, v in context.needs.items()]),
        "emotions": _listed([f"{k}: {v}" for k, v in context.emotions.items()]),
        "world": _listed([f"{k}: {v}" for k, v in context.world.items()]),
        "lessons": _listed(
            [f"{each.lesson} (confidence {each.confidence:.2f})" for each in context.lessons]
        ),
    }


def action_messages(system: PlanningSystem, context: Circumstances) -> list[Message]:
    """What the model reads to choose the person's next action: chat messages.

    The user message gives the needs, emotions and world of `context`, then
    the current plan step of `system` (its directive, or `NO_PLAN_STEP`),
    above the goals (each with its horizon, progress and confidence) and
    the lessons, as the seed places it: the plan step takes precedence.
    """
    goals = [
        f"{goal.description} ({goal.horizon} term, progress {goal.progress:.2f}, "
        f"confidence {goal.confidence:.2f})"
        for goal in system.goals
    ]
    user = template(__package__, "action.md").substitute(
        _context_values(context),
        current_plan_step=one_line(system.directive() or NO_PLAN_STEP),
        goals=_listed(goals, "none"),
    )
    return [
        {
            "role": "system",
            "content": template(__package__, "action-system.md").substitute().strip(),
        },
        {"role": "user", "content": user.strip()},
    ]


def plan_messages(request: PlanRequest) -> list[Message]:
    """What the model reads before writing steps for `request`: chat messages.

    The system message says what a plan is and how to write one; the user
    message gives the goal, its horizon, the needs, emotions, world and
    lessons, and for a replan the steps completed, the step that failed
    (with what it was to achieve) and why, and the steps not reached.
    """
    values = {
        "goal": one_line(request.goal.description),
        "horizon": request.goal.horizon,
        **_context_values(request.context),
    }
    failed = request.failed
    if failed is None:
        user = template(__package__, "plan.md").substitute(values)
    else:
        completed = [
            f"{step.description} (done by: {step.action_hint})" for step in request.completed
        ]
        pending = [f"{step.description} (action: {step.action_hint})" for step in request.pending]
        user = template(__package__, "replan.md").substitute(
            values,
            completed=_listed(completed, "none"),
            failed=one_line(f"{failed.description} (action: {failed.action_hint})"),
            expected=one_line(failed.expected_outcome),
            reason=one_line(request.reason),
            pending=_listed(pending, "none"),
        )
    return [
        {"role": "system", "content": _system()},
        {"role": "user", "content": user.strip()},
    ]


def _system() -> str:
    """The system message of a plan: what a plan is, its bounds read from `goal-plan-output`."""
    return (
        template(__package__, "system.md")
        .substitute(
            least_steps=field_bound(GoalPlanOutput, "steps", "min_length"),
            most_steps=field_bound(GoalPlanOutput, "steps", "max_length"),
            least_cycles=field_bound(StepProposal, "estimated_cycles", "ge"),
            most_cycles=field_bound(StepProposal, "estimated_cycles", "le"),
        )
        .strip()
    )
