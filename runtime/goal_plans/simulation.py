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
`plancontracts goals simulate` reads them. `to_contract` and
`from_contract` save and resume the whole person: its planning system, what
it feels and knows, and the scripted answers not yet used, as one
`goal-planning-system` document.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import msgspec
from msgspec import UnsetType

from ...generated import GOAL_EVENT
from ...generated.goal_plans import (
    Context,
    ContextEvent,
    CycleEvent,
    Goal,
    GoalEvent,
    GoalPlan,
    GoalPlanningSystem,
    ModelOutputEvent,
    NewGoalEvent,
)
from ..core.contracts import field_bound
from ..core.errors import ContractError, Violation
from ..core.telemetry import Told, capturing_content, span
from .agent import MAX_SCRIPTED, GoalPlanner, Source
from .prompts import Circumstances, PlanRequest
from .session import Failure, PlanningSystem, StepOutcome, completed_steps

__all__ = ["MAX_NEEDS", "CycleReport", "Happening", "Person"]

MAX_NEEDS = field_bound(Context, "needs", "max_length")
"The most needs a person knows of: the needs of every context and cycle, merged, are kept."


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
    cycles: int = field(default=0, init=False)
    """The cycles this person ran, the number of its last `goal cycle` span (not saved:
    a person resumed counts from 0 again)."""

    async def add_goal(self, goal: Goal) -> list[Happening]:
        """Add `goal` and plan what is due. Raises TooManyGoals when the goal list is full."""
        self.system.add_goal(goal)
        return await self._plan_due()

    def set_context(self, event: ContextEvent) -> None:
        """Take what `event` gives: needs are merged, the other parts replaced.

        Raises ContractError, changing nothing, when the needs merged would be
        more than `MAX_NEEDS`.
        """
        context = self.context
        if not isinstance(event.needs, UnsetType):
            context = replace(context, needs=self._merged(event.needs))
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
        """One cycle: the needs after it (if given), the step judged, then what is due planned.

        Raises ContractError, changing nothing, when the needs merged would be
        more than `MAX_NEEDS`. The cycle is one `goal cycle` span, the model's
        answers its children, what it decided counted on it (`_told_cycle`).
        """
        number = self.cycles + 1
        with span("goal cycle", {"plancontracts.goal.cycle": number}) as told:
            if told.recording and capturing_content():
                told.set("plancontracts.goal.action", action)
            if needs is not None:
                self.context = replace(self.context, needs=self._merged(needs))
            self.cycles = number  # a cycle refused changes nothing, its number included
            plan = self.system.current_plan()
            outcome = self.system.evaluate_step(action, satisfaction_delta)
            happened = []
            if outcome is StepOutcome.PLAN_COMPLETED and plan is not None:
                goal = self._goal(plan.goal_id)
                happened.append(Happening("completed", plan.goal_id, ended=plan, goal=goal))
            report = CycleReport(outcome, happened + await self._plan_due())
            if told.recording:
                _told_cycle(told, report)
        return report

    def _merged(self, needs: Mapping[str, float]) -> dict[str, float]:
        """The needs known once `needs` are told. Raises ContractError beyond `MAX_NEEDS`."""
        merged = {**self.context.needs, **needs}
        if len(merged) > MAX_NEEDS:
            new = len(merged) - len(self.context.needs)
            message = (
                f"would make {len(merged)} needs known ({new} new), more than the "
                f"{MAX_NEEDS} a person keeps"
            )
            raise ContractError(GOAL_EVENT.name, [Violation("/needs", message)])
        return merged

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
        if len(self.planner.scripted) >= MAX_SCRIPTED:
            message = (
                f"{MAX_SCRIPTED} scripted answers wait to be used already, "
                "the most a planning system keeps"
            )
            raise ContractError(GOAL_EVENT.name, [Violation("/output", message)])
        self.planner.script(event.output)
        return []

    # The whole person as a contract ----------------------------------------------------------

    def to_contract(self) -> GoalPlanningSystem:
        """The person as a `goal-planning-system` document: a simulation to resume later.

        Its goals and plans (shared, not copied), what it feels and knows
        (`context`) and the scripted answers not yet used (`scripted`).
        """
        context = self.context
        state = self.system.to_contract()
        state.context = Context(
            needs=dict(context.needs),
            emotions=dict(context.emotions),
            world=dict(context.world),
            lessons=list(context.lessons),
        )
        state.scripted = list(self.planner.scripted)
        return state

    @classmethod
    def from_contract(
        cls,
        state: GoalPlanningSystem,
        planner: GoalPlanner,
        clock: Callable[[], float] = time.time,
    ) -> Person:
        """A person who goes on from `state` (decoded, so its rules hold), which it takes over.

        The state's scripted answers are queued in `planner` before any it
        holds already. `clock` gives each new plan its `created_at`.
        """
        planner.scripted.extendleft(reversed(state.scripted))
        context = Circumstances()
        if not isinstance(state.context, UnsetType):
            known = state.context
            context = Circumstances(
                needs=dict(known.needs),
                emotions=dict(known.emotions),
                world=dict(known.world),
                lessons=tuple(known.lessons),
            )
        return cls(PlanningSystem.from_contract(state, clock), planner, context)


def _told_cycle(told: Told, report: CycleReport) -> None:
    """Tell a cycle's span what it decided: its step's outcome, and how many plans each way.

    Counts only: a goal's and a step's text are what a person wrote.
    """
    told.set("plancontracts.goal.outcome", report.outcome.value)
    for what in ("planned", "replanned", "abandoned", "completed"):
        told.set(
            f"plancontracts.goal.{what}", sum(1 for each in report.happened if each.what == what)
        )
