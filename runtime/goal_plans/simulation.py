"""A person's planning system run cycle by cycle: goals, context, cycles, the model's answers.

    person = Person(PlanningSystem(), GoalPlanner(load=...))
    await person.add_goal(Goal(description="Have enough food", horizon="short"))
    person.system.directive()                     # the step the action decision reads
    report = await person.cycle("look for work", 2.0)
    report.outcome, report.happened               # StepOutcome, what else changed

After each goal, context and cycle the person plans what is due, in this
order: the current step is judged (`PlanningSystem.evaluate_step`), plans
whose step failed are replanned (the model asked for new steps) or
abandoned, then goals that are ready and have a free horizon get a plan.
`run_event` does the same for one `goal-event` document, as
`plancontracts goals simulate` reads them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import msgspec
from msgspec import UnsetType

from ...generated.goal_plans import (
    ContextEvent,
    CycleEvent,
    Goal,
    GoalEvent,
    GoalPlan,
    ModelOutputEvent,
    NewGoalEvent,
)
from .agent import GoalPlanner, Source
from .prompts import Circumstances, PlanRequest
from .session import Failure, PlanningSystem, StepOutcome, completed_steps

__all__ = ["CycleReport", "Happening", "Person"]


class Happening(msgspec.Struct, frozen=True, omit_defaults=True):
    """Something a goal or a cycle made happen to the plans."""

    what: Literal["planned", "replanned", "abandoned", "completed"]
    goal_id: int
    by: Source | None = None
    "Who wrote the new plan's steps (planned, replanned)."
    reason: str | None = None
    "Why the step failed (replanned, abandoned)."
    ended: GoalPlan | None = None
    "The plan that ended (replanned, abandoned, completed); an ended plan never changes again."
    goal: Goal | None = None
    "The goal after its plan was completed or abandoned: its new progress or confidence."


@dataclass(frozen=True)
class CycleReport:
    """What one cycle did: to the current step, and to the plans after it."""

    outcome: StepOutcome
    happened: list[Happening]


@dataclass
class Person:
    """A planning system, who writes its plans' steps, and what the person feels and knows."""

    system: PlanningSystem
    planner: GoalPlanner
    context: Circumstances = field(default_factory=Circumstances)

    async def add_goal(self, goal: Goal) -> list[Happening]:
        """Add `goal` and plan what is due. Raises TooManyGoals when the goal list is full."""
        self.system.add_goal(goal)
        return await self._plan_due()

    def set_context(self, event: ContextEvent) -> None:
        """Take what `event` gives: needs are merged, the other parts replaced."""
        context = self.context
        if not isinstance(event.needs, UnsetType):
            context = replace(context, needs={**context.needs, **event.needs})
        if not isinstance(event.emotions, UnsetType):
            context = replace(context, emotions=dict(event.emotions))
        if not isinstance(event.world, UnsetType):
            context = replace(context, world=dict(event.world))
        if not isinstance(event.lessons, UnsetType):
            context = replace(context, lessons=tuple(event.lessons))
        self.context = context

    async def cycle(
        self, action: str, satisfaction_delta: float, needs: Mapping[str, float] | None = None
    ) -> CycleReport:
        """One cycle: the needs after it (if given), the step judged, then what is due planned."""
        if needs is not None:
            self.context = replace(self.context, needs={**self.context.needs, **needs})
        plan = self.system.current_plan()
        outcome = self.system.evaluate_step(action, satisfaction_delta)
        happened = []
        if outcome is StepOutcome.PLAN_COMPLETED and plan is not None:
            goal = self._goal(plan.goal_id)
            happened.append(Happening("completed", plan.goal_id, ended=plan, goal=goal))
        return CycleReport(outcome, happened + await self._plan_due())

    async def _plan_due(self) -> list[Happening]:
        happened = [await self._replan(failure) for failure in self.system.due_replans()]
        for goal_id in self.system.goals_to_plan(self.context.needs):
            request = PlanRequest(self.system.goals[goal_id], self.context)
            output, source = await self.planner.steps(request)
            self.system.start_plan(goal_id, output.steps)
            happened.append(Happening("planned", goal_id, by=source))
        return happened

    async def _replan(self, failure: Failure) -> Happening:
        plan = failure.plan
        if failure.abandons:
            self.system.abandon(failure)
            goal = self._goal(plan.goal_id)
            return Happening(
                "abandoned", plan.goal_id, reason=failure.reason, ended=plan, goal=goal
            )
        index = plan.current_step_index
        request = PlanRequest(
            self.system.goals[plan.goal_id],
            self.context,
            completed=completed_steps(self.system.plans, plan.goal_id),
            failed=plan.steps[index],
            reason=failure.reason,
            pending=plan.steps[index + 1 :],
        )
        # Asked first: should the model fail or be cancelled, the plans are as they were.
        output, source = await self.planner.steps(request)
        self.system.replan(failure, output.steps)
        return Happening("replanned", plan.goal_id, by=source, reason=failure.reason, ended=plan)

    def _goal(self, goal_id: int) -> Goal:
        """Goal `goal_id` as it is now (a copy: the system goes on changing it)."""
        return msgspec.structs.replace(self.system.goals[goal_id])

    async def run_event(self, event: GoalEvent) -> CycleReport | list[Happening]:
        """Apply one `goal-event` document: a cycle's report, or what a goal made happen.

        Raises TooManyGoals for a goal beyond the list's bound.
        """
        if isinstance(event, NewGoalEvent):
            goal = Goal(
                description=event.description,
                horizon=event.horizon,
                source_needs=list(event.source_needs),
                progress=event.progress,
                confidence=event.confidence,
            )
            return await self.add_goal(goal)
        if isinstance(event, ContextEvent):
            self.set_context(event)  # needs may have fallen: a goal may be ready now
            return await self._plan_due()
        if isinstance(event, CycleEvent):
            needs = None if isinstance(event.needs, UnsetType) else event.needs
            return await self.cycle(event.action, event.satisfaction_delta, needs)
        assert isinstance(event, ModelOutputEvent)
        self.planner.script(event.output)
        return []
