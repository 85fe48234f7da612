"""The reducers: the only code that makes a new session plan, one per tool that changes it.

Each takes the latest plan and a tool's checked arguments and returns a new
plan; nothing is changed in place (plans are frozen structs of tuples), and
steps a call leaves alone are shared with the plan before, not copied. The
handlers (`handlers`) have checked everything a reducer relies on: the plan's
state, that the step exists, the limits.
"""

from __future__ import annotations

from collections.abc import Callable

from msgspec.structs import replace

from ...generated.session_plans import (
    NewPlanStep,
    PlanStep,
    SessionAddStep,
    SessionMarkStep,
    SessionPlan,
    SessionSetupPlan,
    SessionUpdateStep,
)
from .steps import step_id, step_number

__all__ = ["abandon", "add_steps", "mark_step", "next_step_number", "set_up", "update_step"]


def set_up(arguments: SessionSetupPlan) -> SessionPlan:
    """A new active plan: its objective, and its first steps numbered from S001, pending."""
    steps = tuple(_new_step(number, step) for number, step in enumerate(arguments.initial_steps, 1))
    return SessionPlan(objective=arguments.objective, status="active", steps=steps)


def add_steps(plan: SessionPlan, arguments: SessionAddStep) -> SessionPlan:
    """`plan` with the new steps appended, pending, numbered after its highest id."""
    first = next_step_number(plan)
    added = tuple(_new_step(number, step) for number, step in enumerate(arguments.steps, first))
    return replace(plan, steps=plan.steps + added)


def update_step(plan: SessionPlan, arguments: SessionUpdateStep) -> SessionPlan:
    """`plan` with the step's title and details replaced where the arguments give them."""

    def updated(step: PlanStep) -> PlanStep:
        title = step.title if arguments.title is None else arguments.title
        details = step.details if arguments.details is None else arguments.details
        return replace(step, title=title, details=details)

    return _with_step(plan, arguments.step_id, updated)


def mark_step(plan: SessionPlan, arguments: SessionMarkStep) -> SessionPlan:
    """`plan` with the step's new status and note; completed exactly when every step is done."""

    def marked(step: PlanStep) -> PlanStep:
        notes = step.notes if arguments.note is None else (*step.notes, arguments.note)
        return replace(step, status=arguments.status, notes=notes)

    plan = _with_step(plan, arguments.step_id, marked)
    done = all(step.status == "done" for step in plan.steps)
    return replace(plan, status="completed" if done else "active")


def abandon(plan: SessionPlan) -> SessionPlan:
    """`plan` abandoned: its objective kept, its steps discarded."""
    return replace(plan, status="abandoned", steps=())


def next_step_number(plan: SessionPlan) -> int:
    """The number the next step added to `plan` gets: one more than its highest."""
    return 1 + max((step_number(step.step_id) or 0 for step in plan.steps), default=0)


def _new_step(number: int, step: NewPlanStep) -> PlanStep:
    return PlanStep(
        step_id=step_id(number), title=step.title, details=step.details, status="pending", notes=()
    )


def _with_step(plan: SessionPlan, step: str, change: Callable[[PlanStep], PlanStep]) -> SessionPlan:
    steps = tuple(change(each) if each.step_id == step else each for each in plan.steps)
    return replace(plan, steps=steps)
