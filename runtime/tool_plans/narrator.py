"""The narrator's turn: plan, execute, replan, narrate (seed 003, spec 002 sections 4.3 and 5.5).

    turn = await play_turn("I light the torch", planner)
    print(turn.narration)

Each turn makes at most five plan generations. After a failed execution the
skills of the failed tools join `disabledSkills`, so the next plan (with
`metadata.generationAttempt` one higher and `metadata.parentPlanId` naming the
failed plan) cannot use them, and the planner is told what went wrong: the
reason a plan was rejected, or each failed tool with its error and retries
(`prompts.what_failed`). When no generation succeeds, the turn ends with
a narration from a template. Every attempt is logged on the
`plancontracts.narrator` logger, with a structured record in the log
record's `plancontracts` attribute: plan id, generation, skills chosen,
outcome, failed tools, and planning and execution times.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from string import Template
from typing import Any, Protocol

from ...generated.tool_plans import ExecutionResult, Plan
from ..engine.executor import UiEventHandler, execute_plan
from ..engine.limits import MAX_GENERATIONS, Limits
from ..engine.skills import SkillSet
from .prompts import what_failed

__all__ = ["Attempt", "PlanSource", "Turn", "play_turn"]

NARRATION_CAPABILITY = "narration"
log = logging.getLogger("plancontracts.narrator")


class PlanSource(Protocol):
    """What the narrator plans with: `tool_plans.planner.Planner`, or any planner like it."""

    skills: SkillSet

    async def plan(
        self,
        player_input: str,
        *,
        disabled: Iterable[str] = (),
        state: Mapping[str, Any] | None = None,
        generation: int = 1,
        parent_plan_id: str | None = None,
        seed: int | None = None,
        failures: Sequence[str] = (),
    ) -> Plan: ...


@dataclass(frozen=True)
class Attempt:
    """One generation of the turn: the plan and what executing it did."""

    plan: Plan
    result: ExecutionResult
    planning_seconds: float
    execution_seconds: float


@dataclass(frozen=True)
class Turn:
    narration: str
    attempts: tuple[Attempt, ...]
    fell_back: bool
    "True when no generation succeeded and the narration came from the template."

    @property
    def state(self) -> dict[str, Any]:
        """The session state the successful attempt left; empty when none succeeded."""
        last = self.attempts[-1].result if self.attempts else None
        return dict(last.aggregated_state) if last is not None and last.success else {}


async def play_turn(
    player_input: str,
    planner: PlanSource,
    *,
    state: Mapping[str, Any] | None = None,
    limits: Limits | None = None,
    data_root: Path | None = None,
    on_ui_event: UiEventHandler | None = None,
    seed: int | None = None,
    max_generations: int = MAX_GENERATIONS,
) -> Turn:
    """Plan and execute `player_input` until a plan succeeds or the generations run out."""
    if not 1 <= max_generations <= MAX_GENERATIONS:
        raise ValueError(f"max_generations must be 1 to {MAX_GENERATIONS}")
    attempts: list[Attempt] = []
    disabled: list[str] = []
    parent: str | None = None
    failures: list[str] = []
    for generation in range(1, max_generations + 1):
        started = time.perf_counter()
        plan = await planner.plan(
            player_input,
            disabled=disabled,
            state=state,
            generation=generation,
            parent_plan_id=parent,
            seed=seed,
            failures=failures,
        )
        planned = time.perf_counter()
        result = await execute_plan(
            plan,
            skills=planner.skills,
            limits=limits,
            data_root=data_root,
            on_ui_event=on_ui_event,
        )
        attempt = Attempt(plan, result, planned - started, time.perf_counter() - planned)
        attempts.append(attempt)
        _log(attempt, generation)
        if result.success:
            narration = _narration(plan, result, planner.skills)
            return Turn(narration, tuple(attempts), fell_back=False)
        disabled = list(result.disabled_skills)
        parent = plan.request_id
        failures = what_failed(plan, result)
        if not result.can_replan:
            break
    return Turn(fallback_narration(player_input), tuple(attempts), fell_back=True)


def fallback_narration(player_input: str) -> str:
    """The template narration for a turn whose every plan failed."""
    action = " ".join(player_input.split())[:200].rstrip(".!?") or "act"
    for prefix in ("I ", "i "):
        action = action.removeprefix(prefix)
    template = files(__package__).joinpath("templates", "fallback.md").read_text("utf-8")
    return Template(template).substitute(action=action).strip()


def _narration(plan: Plan, result: ExecutionResult, skills: SkillSet) -> str:
    """The plan's narrative, then what the tools said: the narration skill's words if one ran."""
    summaries: list[tuple[bool, str]] = []
    for call, trace in zip(plan.tools, result.tool_results, strict=True):
        summary = (trace.output or {}).get("summary") if trace.state == "success" else None
        if isinstance(summary, str) and summary:
            skill = (
                skills.skills.get(call.tool_path.split("/")[1]) if "/" in call.tool_path else None
            )
            narrates = skill is not None and NARRATION_CAPABILITY in skill.manifest.capabilities
            summaries.append((narrates, summary))
    told = [text for narrates, text in summaries if narrates] or [text for _, text in summaries]
    parts: Sequence[str] = [plan.narrative, *told] if plan.narrative else told
    return " ".join(part.strip() for part in parts if part.strip())


def _log(attempt: Attempt, generation: int) -> None:
    plan, result = attempt.plan, attempt.result
    outcome = "rejected" if result.error else "success" if result.success else "failed"
    record = {
        "planId": plan.request_id,
        "generation": generation,
        "skills": sorted(
            {call.tool_path.split("/")[1] for call in plan.tools if "/" in call.tool_path}
        ),
        "outcome": outcome,
        "failedTools": list(result.failed_tools),
        "disabledSkills": list(result.disabled_skills),
        "planningMs": round(attempt.planning_seconds * 1000),
        "executionMs": round(attempt.execution_seconds * 1000),
    }
    log.info(
        "plan %s (generation %d): %s", plan.request_id, generation, outcome,
        extra={"plancontracts": record},
    )  # fmt: skip
