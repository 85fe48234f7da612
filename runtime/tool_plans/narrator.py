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
`plancontracts.narrator` logger, with which skills were chosen and why
(`choice_line`), and a structured record in the log record's
`plancontracts` attribute: plan id, generation, skills chosen, outcome,
failed tools, and planning and execution times.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

from ...generated.tool_plans import (
    ExecutionResult,
    FailedTool,
    Plan,
    PlanAttempt,
    PlanMetadata,
    SkillChoice,
    ToolInvocation,
)
from ..core.telemetry import span
from ..core.templates import template
from ..engine.limits import MAX_GENERATIONS, Limits
from ..engine.result import milliseconds
from ..engine.skills import SkillSet
from .agent import Planner
from .choosing import NARRATION_CAPABILITY
from .patterns import echo_narrative
from .prompts import what_failed

if TYPE_CHECKING:
    from ..engine.executor import UiEventHandler

__all__ = ["Attempt", "PlanSource", "Turn", "attempt_record", "choice_line", "play_turn"]

log = logging.getLogger("plancontracts.narrator")


class PlanSource(Protocol):
    """What the narrator plans with: `tool_plans.agent.Planner`, or any planner like it."""

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
    generation: int
    "1 for the turn's first plan, up to 5."
    ended: datetime
    "When the execution ended, in UTC."


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

    @property
    def disabled(self) -> list[str]:
        """The skills a next plan for the input would leave out: the last attempt's, sorted."""
        return sorted(self.attempts[-1].result.disabled_skills) if self.attempts else []

    @property
    def why_it_fell_back(self) -> str | None:
        """Briefly, on one line, why no plan succeeded; None when one did.

        How many plans failed, and the first failure of the last one (see
        `prompts.what_failed`), with how many more it had.
        """
        if not self.fell_back or not self.attempts:
            return None
        last = self.attempts[-1]
        failures = what_failed(attempt_record(last)) or ["no tool failed, yet the plan did"]
        plans = f"{len(self.attempts)} plan{'s' if len(self.attempts) > 1 else ''}"
        more = len(failures) - 1
        also = f" (and {more} more)" if more else ""
        return f"{plans} failed; the last: {failures[0]}{also}"


async def play_turn(
    player_input: str,
    planner: PlanSource,
    *,
    state: Mapping[str, Any] | None = None,
    limits: Limits | None = None,
    data_root: Path | None = None,
    on_ui_event: UiEventHandler | None = None,
    on_attempt: Callable[[PlanAttempt], None] | None = None,
    seed: int | None = None,
    max_generations: int = MAX_GENERATIONS,
    disabled: Iterable[str] = (),
) -> Turn:
    """Plan and execute `player_input` until a plan succeeds or the generations run out.

    `on_ui_event` receives each tool's `ui_event` as it arrives (see
    `execute_plan`); `on_attempt` receives each attempt's `plan-attempt`
    record as soon as its execution ended, after it was logged. An exception
    from either stops the turn and propagates. `disabled` skills are left
    out from the first plan on (a session's skills turned off, say).
    Raises ValueError for `max_generations` outside 1..5. Traced as one
    `invoke_agent narrator` span (`core.telemetry`).
    """
    # The executor (and trio) are imported on first use: every command imports this family.
    from ..engine.executor import execute_plan

    if not 1 <= max_generations <= MAX_GENERATIONS:
        raise ValueError(f"max_generations must be 1 to {MAX_GENERATIONS}")
    attempts: list[Attempt] = []
    off = sorted(set(disabled))
    parent: str | None = None
    failures: list[str] = []
    # One turn of the narrator, an agent in the GenAI conventions' terms: its plans'
    # writing and execution are its children.
    with span(
        "invoke_agent narrator",
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "narrator"},
    ) as told:
        for generation in range(1, max_generations + 1):
            started = time.perf_counter()
            asked: dict[str, Any] = {
                "disabled": off,
                "state": state,
                "generation": generation,
                "parent_plan_id": parent,
                "seed": seed,
                "failures": failures,
            }
            ran: dict[str, Any] = {
                "skills": planner.skills,
                "limits": limits,
                "data_root": data_root,
            }
            if isinstance(planner, Planner) and planner.writer is not None:
                plan, result, planned = await _streamed(
                    planner, player_input, asked, ran, on_ui_event
                )
            else:
                plan = await planner.plan(player_input, **asked)
                planned = time.perf_counter()
                result = await execute_plan(plan, **ran, on_ui_event=on_ui_event)
            ended = datetime.now(UTC)
            attempt = Attempt(
                plan, result, planned - started, time.perf_counter() - planned, generation, ended
            )
            attempts.append(attempt)
            record = attempt_record(attempt)
            log.info(
                "plan %s (generation %d): %s; %s", record.plan_id, generation, record.outcome,
                choice_line(plan), extra={"plancontracts": msgspec.to_builtins(record)},
            )  # fmt: skip
            if on_attempt is not None:
                on_attempt(record)
            told.set("plancontracts.turn.generations", generation)
            if result.success:
                # A plan of no tools whose narrative is blank still tells the player something.
                narration = _narration(plan, result, planner.skills) or echo_narrative(player_input)
                told.set("plancontracts.turn.fell_back", False)
                return Turn(narration, tuple(attempts), fell_back=False)
            off = list(result.disabled_skills)
            parent = plan.request_id
            failures = what_failed(record)
            if not result.can_replan:
                break
        told.set("plancontracts.turn.fell_back", True)
        return Turn(fallback_narration(player_input), tuple(attempts), fell_back=True)


async def _streamed(
    planner: Planner,
    player_input: str,
    asked: dict[str, Any],
    ran: dict[str, Any],
    on_ui_event: UiEventHandler | None,
) -> tuple[Plan, ExecutionResult, float]:
    """Plan and run at once: each tool starts as soon as its entry is written whole.

    The tools of the model's first answer run as it writes them
    (`execute_streamed`); when the plan the planner returns is another (the
    answer was refused, then asked again or answered by the patterns), what
    started is cancelled and the plan returned runs whole, as without
    streaming. Returns the plan, its result and when the plan was whole
    (`time.perf_counter()`).
    """
    import uuid

    import trio

    from ...generated.tool_plans import ToolError
    from ..engine.executor import execute_plan
    from ..engine.streamed import PlanHeader, Refusal, StreamItem, execute_streamed

    header = PlanHeader(str(uuid.uuid4()), disabled_skills=tuple(asked["disabled"]))
    send, receive = trio.open_memory_channel[StreamItem](math.inf)
    handed: list[ToolInvocation] = []
    outcome: list[ExecutionResult] = []

    async def on_entry(tool: ToolInvocation) -> None:
        handed.append(tool)
        # The executor stops reading once an entry dooms the plan: the rest is not sent.
        with contextlib.suppress(trio.BrokenResourceError):
            send.send_nowait(tool)

    async def execute() -> None:
        async with receive:
            outcome.append(await execute_streamed(header, receive, **ran, on_ui_event=on_ui_event))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(execute)
        async with send:
            plan = await planner.plan(
                player_input, **asked, on_entry=on_entry, request_id=header.request_id
            )
            planned = time.perf_counter()
            end: StreamItem = plan
            if not handed or plan.tools != handed:
                why = "the plan written as it went was replaced; the replacement runs whole"
                end = Refusal(ToolError(category="invalid_plan", code="replanned", message=why))
            with contextlib.suppress(trio.BrokenResourceError):
                send.send_nowait(end)
    if not handed or plan.tools != handed:
        return plan, await execute_plan(plan, **ran, on_ui_event=on_ui_event), planned
    return plan, outcome[0], planned


def choice_line(plan: Plan) -> str:
    """On one line, which skills the plan's planner chose and why (its `metadata.choice`).

    For a plan that does not say (one written elsewhere), the skills it calls.
    """
    choice = plan.metadata.choice if isinstance(plan.metadata, PlanMetadata) else None
    if isinstance(choice, SkillChoice):
        reasons = "; ".join(f"{chosen.skill} ({chosen.why})" for chosen in choice.skills)
        return f"skills chosen by {choice.by}: {reasons or 'none'}"
    return f"skills called: {', '.join(_skills_called(plan)) or 'none'}"


def _skills_called(plan: Plan) -> list[str]:
    """The skills whose scripts `plan` calls, sorted, each once."""
    return sorted({call.tool_path.split("/")[1] for call in plan.tools if "/" in call.tool_path})


def fallback_narration(player_input: str) -> str:
    """The template narration for a turn whose every plan failed."""
    action = " ".join(player_input.split())[:200].rstrip(".!?") or "act"
    for prefix in ("I ", "i "):
        action = action.removeprefix(prefix)
    return template(__package__, "fallback.md").substitute(action=action).strip()


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


def attempt_record(attempt: Attempt) -> PlanAttempt:
    """The `plan-attempt` log record of `attempt`."""
    plan, result = attempt.plan, attempt.result
    outcome: Literal["success", "failed", "rejected"] = (
        "rejected" if result.error else "success" if result.success else "failed"
    )
    paths = {call.tool_id: call.tool_path for call in plan.tools}
    traces = {trace.tool_id: trace for trace in result.tool_results}
    failures = []
    for tool_id in result.failed_tools:
        trace = traces[tool_id]
        if trace.error and trace.state in ("failed", "timeout"):
            failures.append(
                FailedTool(
                    tool_id=tool_id,
                    tool_path=paths[tool_id],
                    state=trace.state,
                    retry_count=trace.retry_count,
                    error=trace.error,
                )
            )
    ended = attempt.ended.astimezone(UTC).replace(tzinfo=None)
    record = PlanAttempt(
        timestamp=ended.isoformat(timespec="milliseconds") + "Z",
        plan_id=plan.request_id,
        generation=attempt.generation,
        outcome=outcome,
        skills=_skills_called(plan),
        plan=plan,
        failures=failures,
        disabled_skills=list(result.disabled_skills),
        planning_ms=milliseconds(attempt.planning_seconds),
        execution_ms=milliseconds(attempt.execution_seconds),
    )
    if result.error:
        record.rejection = result.error
    return record
