"""Who writes a plan's steps: scripted answers, the local model, or the fallback decomposition.

    planner = GoalPlanner(load=load_first_writer)  # the model, loaded on first use
    output, source = await planner.steps(PlanRequest(goal, circumstances))

A request is a goal to plan, or to replan after a failed step
(`PlanRequest.failed`). The model reads `prompts.plan_messages(request)` and
writes under `profiles.output_profile()`, the decoding schema derived from the
`goal-plan-output` contract: 2 to 6 steps, bounded strings, cycles 1 to 5,
so every answer is a valid output by construction and nothing is parsed
out of free text. Without a model, or when the model writes nothing
complete, `fallback_steps` decomposes the goal deterministically, so the
planning system keeps running.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Literal

from ...generated import GOAL_PLAN_OUTPUT
from ...generated.goal_plans import GoalPlanningSystem, GoalPlanOutput, GoalStep, StepProposal
from ..core.contracts import field_bound
from ..core.plain_text import one_line
from ..core.validation import convert
from .profiles import output_profile
from .prompts import PlanRequest, plan_messages

if TYPE_CHECKING:
    from ..model.writer import Writer

__all__ = ["MAX_SCRIPTED", "GoalPlanner", "Source", "fallback_steps"]

PLAN_TOKENS = 700
"Enough for the longest plan the profile allows."
Source = Literal["script", "model", "fallback"]
"Who wrote a plan's steps."

MAX_SCRIPTED = field_bound(GoalPlanningSystem, "scripted", "max_length")
"The most scripted answers that wait to be used: a saved planning system keeps them."
_HINT = field_bound(StepProposal, "action_hint", "max_length")
_DESCRIPTION = field_bound(StepProposal, "description", "max_length")
_MAX_CYCLES = field_bound(StepProposal, "estimated_cycles", "le")
_MAX_STEPS = field_bound(GoalPlanOutput, "steps", "max_length")
_AGAIN = "Try again: "


# The fallback -------------------------------------------------------------------------------


def fallback_steps(request: PlanRequest) -> GoalPlanOutput:
    """Steps for `request` without a model, the same for the same request.

    A first plan finds out what the goal needs, then works at it. A replan
    tries the failed step once more with one cycle more (at most the
    bound), then the steps its plan had not reached, then works at the goal
    when fewer than two steps would be left.
    """
    goal = one_line(request.goal.description, _DESCRIPTION - 20)
    work = StepProposal(
        description=one_line(f"Work at the goal: {goal}", _DESCRIPTION),
        action_hint=one_line(f"work at {goal.lower()}", _HINT),
        expected_outcome="the goal is closer",
        estimated_cycles=3,
    )
    if request.failed is None:
        find = StepProposal(
            description=one_line(f"Find out what it takes to: {goal}", _DESCRIPTION),
            action_hint="look around",
            expected_outcome="know what the goal needs",
            estimated_cycles=1,
        )
        return GoalPlanOutput(steps=[find, work])
    failed = request.failed
    again = failed.description
    retry = StepProposal(
        # A retry of a retry says it once.
        description=again if again.startswith(_AGAIN) else one_line(_AGAIN + again, _DESCRIPTION),
        action_hint=failed.action_hint,
        expected_outcome=failed.expected_outcome,
        estimated_cycles=min(_MAX_CYCLES, failed.estimated_cycles + 1),
    )
    steps = [retry, *map(_proposal, request.pending)]
    if len(steps) < 2:
        steps.append(work)
    return GoalPlanOutput(steps=steps[:_MAX_STEPS])


def _proposal(step: GoalStep) -> StepProposal:
    """`step` as the model would propose it: the fields a proposal has, taken from the step."""
    return StepProposal(**{name: getattr(step, name) for name in StepProposal.__struct_fields__})


# Who writes ---------------------------------------------------------------------------------


@dataclass
class GoalPlanner:
    """Writes steps for plan requests: scripted answers first, then the model, then the fallback.

    `load` is called once, on the first request no scripted answer is left
    for, and returns the model (or None: the fallback writes from then on).
    When the model writes nothing complete, the fallback writes that plan.
    `say` is told, in one line, whenever the fallback writes.
    """

    load: Callable[[], Writer | None] | None = None
    say: Callable[[str], None] = lambda line: None
    seed: int | None = None
    scripted: deque[GoalPlanOutput] = field(default_factory=deque)
    _model: Writer | None = None
    _loaded: bool = False

    def script(self, output: GoalPlanOutput) -> None:
        """Queue `output` as the answer to the next request.

        Raises ValueError when `MAX_SCRIPTED` answers wait already.
        """
        if len(self.scripted) >= MAX_SCRIPTED:
            raise ValueError(f"{MAX_SCRIPTED} scripted answers wait to be used already")
        self.scripted.append(output)

    async def steps(self, request: PlanRequest) -> tuple[GoalPlanOutput, Source]:
        """The steps for `request`, and who wrote them.

        An answer refused (by the profile, when a server does not hold it, or
        by the contract) is asked again once with its violations; when that
        one is refused too, the fallback writes the steps.
        """
        if self.scripted:
            return self.scripted.popleft(), "script"
        model = await self._loaded_model()
        if model is None:
            return fallback_steps(request), "fallback"
        from ..core.errors import GenerationFailed
        from ..model.writing import write_under_profile

        try:
            written = await write_under_profile(
                model,
                plan_messages(request),
                output_profile(),
                answer="Plan JSON",
                max_tokens=PLAN_TOKENS,
                seed=self.seed,
                accept=partial(convert, GOAL_PLAN_OUTPUT),
                say=self.say,
                who="goals",
            )
        except GenerationFailed as failure:
            self.say(f"goals: the model wrote no plan ({failure}); the fallback wrote it")
            return fallback_steps(request), "fallback"
        return written, "model"

    async def _loaded_model(self) -> Writer | None:
        if not self._loaded and self.load is not None:  # without `load`, the caller chose
            import trio

            self._loaded = True
            # In a thread: a load (a model file read, a server's model list) blocks,
            # and trio handles a signal only while its own thread is free. On
            # cancellation the thread is abandoned; it ends with its request's deadline.
            self._model = await trio.to_thread.run_sync(self.load, abandon_on_cancel=True)
            if self._model is None:
                self.say("goals: no model; the fallback decomposition writes the plans")
        return self._model
