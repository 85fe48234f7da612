"""Streamed execution: each tool of a plan started as soon as its entry is written.

    result = await execute_streamed(header, entries)   # entries: ToolInvocation..., then the end

A planner that writes its plan piece by piece hands each complete tool entry
over as it is written, then the end: the whole `Plan` the contract accepted,
or a `Refusal`. Each entry is checked alone when it arrives (its `toolId`
is new, its `toolPath` resolves, its input passes its script's input
schema) and runs under the same rules as `execute_plan` (dependency order,
`parallel`/`async`, `max_concurrency`, `required`, retries, the plan's
deadline) as soon as its dependencies have arrived, finished and are
satisfied; a dependency on a tool not written yet waits for it.

An entry that fails its check dooms the plan at its arrival: every started
tool is cancelled (its process group torn down, as when `execute_plan` is
cancelled), nothing more starts and the rest of the stream is not read; the
error is that entry's (a duplicate `toolId` reads as `execute_plan` says it).
At the end the whole plan gets `execute_plan`'s checks (cycles, dependencies
never written among them); a plan refused there, or by the planner, or
doomed, has the result of a rejected plan:
`success` false, no tool results, the reason in `error`. A tool started
before that may have done what it does (written its data folder, spent its
time): only its result is dropped. Otherwise the result is the one
`execute_plan` gives for the same plan, apart from timings; and so are its
spans (`spans.py`), the plan's marked `plancontracts.plan.streamed`.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import AsyncIterable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import trio

from ...generated.tool_plans import ExecutionResult, Plan, ToolError, ToolInvocation
from .attempts import ToolAttempts
from .checks import Rejected, _target, prepare, with_defaults
from .executor import _leaves
from .limits import MAX_ATTEMPT_NUMBER, Limits
from .result import execution_result
from .runs import ToolFunction, ToolRun, UiEventHandler
from .scheduling import must_skip, settle_at_deadline
from .skills import SkillSet
from .spans import plan_ended, plan_span, tool_skipped

__all__ = ["PlanHeader", "Refusal", "StreamItem", "execute_streamed"]


@dataclass(frozen=True)
class PlanHeader:
    """The fields of a plan its tools need before the plan is whole."""

    request_id: str
    parallel: bool = False
    disabled_skills: tuple[str, ...] = ()


@dataclass(frozen=True)
class Refusal:
    """The end of a stream whose plan the planner refused as a whole; `error` says why."""

    error: ToolError


StreamItem: TypeAlias = ToolInvocation | Plan | Refusal
"What a plan stream yields: each complete tool entry, then the whole Plan or a Refusal."


async def execute_streamed(
    header: PlanHeader,
    items: AsyncIterable[StreamItem],
    *,
    skills: SkillSet | None = None,
    functions: Mapping[str, ToolFunction] | None = None,
    limits: Limits | None = None,
    data_root: Path | None = None,
    asset_folders: Sequence[Path] = (),
    on_ui_event: UiEventHandler | None = None,
    on_start: Callable[[str], None] | None = None,
    attempt_number: int = 1,
) -> ExecutionResult:
    """Run a plan's tools as `items` brings their entries; its execution result at the end.

    `items` yields `ToolInvocation`s in plan order, then one `Plan` (whose
    tools must be those entries) or one `Refusal`; a stream that ends
    without either is refused. `on_start` is called with a tool's id as
    the tool starts (for callers that watch when tools start). Arguments as in
    `execute_plan`; raises ValueError as it does.
    """
    if not 1 <= attempt_number <= MAX_ATTEMPT_NUMBER:
        raise ValueError(f"attempt_number must be 1 to {MAX_ATTEMPT_NUMBER}")
    streamed = plan_span(
        header.request_id, parallel=header.parallel, attempt=attempt_number, streamed=True
    )
    with streamed as told:
        plan, result = await _execute(
            header,
            items,
            skills,
            functions,
            limits or Limits(),
            data_root=data_root,
            asset_folders=asset_folders,
            on_ui_event=on_ui_event,
            on_start=on_start,
            attempt_number=attempt_number,
        )
        plan_ended(told, plan, result)
    return result


async def _execute(
    header: PlanHeader,
    items: AsyncIterable[StreamItem],
    skills: SkillSet | None,
    functions: Mapping[str, ToolFunction] | None,
    limits: Limits,
    *,
    data_root: Path | None,
    asset_folders: Sequence[Path],
    on_ui_event: UiEventHandler | None,
    on_start: Callable[[str], None] | None,
    attempt_number: int,
) -> tuple[Plan, ExecutionResult]:
    """`execute_streamed`'s work, inside its span: the plan as far as written, and its result."""
    skills, functions = with_defaults(skills, functions)
    started = trio.current_time()
    deadline = started + limits.plan_timeout
    stream = _Stream(header, skills, functions, limits, deadline)
    stream.attempts = ToolAttempts(
        stream.plan,
        stream.runs,
        limits=limits,
        deadline=deadline,
        data_root=data_root,
        asset_folders=tuple(folder.resolve() for folder in asset_folders),
        on_ui_event=on_ui_event,
        failed=stream.failed,
    )
    stream.on_start = on_start
    try:
        await stream.run(items)
    except BaseExceptionGroup as group:
        # As in execute_plan: one failure (the stream's own, say) is raised as itself.
        leaves = list(_leaves(group))
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
    elapsed = trio.current_time() - started
    final = stream.final or stream.plan
    if stream.error is not None:
        return final, execution_result(
            final, [], [], [], elapsed=elapsed, attempt_number=attempt_number, error=stream.error
        )
    settle_at_deadline(stream.runs, limits, stream.failed)
    return final, execution_result(
        final,
        stream.runs,
        stream.order,
        stream.failed,
        elapsed=elapsed,
        attempt_number=attempt_number,
    )


class _Stream:
    """One streamed execution's tools, as they arrive and run."""

    def __init__(
        self,
        header: PlanHeader,
        skills: SkillSet,
        functions: Mapping[str, ToolFunction],
        limits: Limits,
        deadline: float,
    ) -> None:
        # The plan as far as it is known: its tools grow as entries arrive.
        self.plan = Plan(
            request_id=header.request_id,
            tools=[],
            parallel=header.parallel,
            disabled_skills=list(header.disabled_skills),
        )
        self.skills = skills
        self.functions = dict(functions)
        self.limits = limits
        self.deadline = deadline
        self.checks_deadline = time.monotonic() + limits.plan_timeout
        self.runs: list[ToolRun] = []
        self.failed: list[int] = []
        self.order: list[int] = []
        self.index: dict[str, int] = {}
        self.unknown: dict[str, list[int]] = {}
        "Tools waiting for a dependency not written yet, by its toolId."
        self.waiting: list[int] = []
        self.ready: list[int] = []
        self.running = 0
        self.alone = False
        "Whether a tool that runs alone is running."
        self.ended = False
        self.final: Plan | None = None
        self.error: ToolError | None = None
        self.attempts: ToolAttempts | None = None
        self.on_start: Callable[[str], None] | None = None
        self.wake = trio.Event()

    async def run(self, items: AsyncIterable[StreamItem]) -> None:
        with trio.CancelScope(deadline=self.deadline) as plan_scope:
            async with trio.open_nursery() as nursery:
                self.tools = nursery
                nursery.start_soon(self._read, items, nursery.cancel_scope)
                while not self._over():
                    self._start_ready()
                    if self._over():
                        break
                    await self.wake.wait()
                    self.wake = trio.Event()
                nursery.cancel_scope.cancel()
        if plan_scope.cancelled_caught and not self.ended:
            # The plan's deadline came before the whole plan: it is not a plan that ran.
            self.error = Rejected(
                "invalid_plan",
                "plan_deadline",
                f"the plan was not written whole before its deadline "
                f"({self.limits.plan_timeout:g} s)",
                {},
            ).error

    def _over(self) -> bool:
        if self.error is not None:
            return True
        return self.ended and all(run.settled for run in self.runs)

    async def _read(self, items: AsyncIterable[StreamItem], scope: trio.CancelScope) -> None:
        try:
            async for item in items:
                if isinstance(item, ToolInvocation):
                    self._arrive(item)
                    self.wake.set()
                elif isinstance(item, Plan):
                    self._end(item)
                    return
                else:
                    self.error = item.error
                    return
                if self.error is not None:
                    return
            self.error = Rejected(
                "invalid_plan", "no_plan", "the plan stream ended before the plan did", {}
            ).error
        finally:
            self.wake.set()

    def _arrive(self, call: ToolInvocation) -> None:
        """Check `call` alone and add it; a failed check sets `error` (the plan is doomed)."""
        position = len(self.runs)
        self.plan.tools.append(call)
        if call.tool_id in self.index:
            # The exact error comes from the whole plan's checks: those of `prepare`.
            self.error = self._whole_plan_error()
            return
        self.index[call.tool_id] = position
        try:
            target, skill = _target(
                self.plan, self.skills, self.functions, call, self.checks_deadline
            )
        except Rejected as rejection:
            # This entry's own error, not the whole plan's: entries still to come
            # are never read (a model stops writing them), so a later duplicate
            # or cycle that `execute_plan` would name first is not known.
            self.error = rejection.error
            return
        known = [self.index[name] for name in call.dependencies if name in self.index]
        run = ToolRun(position, call, target, skill, tuple(dict.fromkeys(known)))
        self.runs.append(run)
        missing = dict.fromkeys(name for name in call.dependencies if name not in self.index)
        for name in missing:
            self.unknown.setdefault(name, []).append(position)
        self.waiting.append(len(missing))
        for dependency in run.dependencies:
            self.runs[dependency].dependents.append(position)
            if not self.runs[dependency].settled:
                self.waiting[position] += 1
        for dependent in self.unknown.pop(call.tool_id, []):
            waiter = self.runs[dependent]
            waiter.dependencies = tuple(
                dict.fromkeys(self.index[n] for n in waiter.call.dependencies if n in self.index)
            )
            run.dependents.append(dependent)
            # Known now, and pending: the dependent waits for it to settle instead.
        if self.waiting[position] == 0:
            heapq.heappush(self.ready, position)

    def _whole_plan_error(self) -> ToolError:
        """Why the plan as written so far is rejected, as `execute_plan` would say it."""
        try:
            prepare(self.plan, self.skills, self.functions, seconds=self.limits.plan_timeout)
        except Rejected as rejection:
            return rejection.error
        raise AssertionError("a check failed alone that the whole plan passes")

    def _end(self, plan: Plan) -> None:
        self.ended = True
        self.final = plan
        if plan.tools != self.plan.tools or plan.parallel != self.plan.parallel:
            self.error = Rejected(
                "invalid_plan",
                "plan_changed",
                "the whole plan is not the one its entries were streamed as",
                {},
            ).error
            return
        try:
            seconds = max(0.0, self.checks_deadline - time.monotonic())
            _, self.order = prepare(plan, self.skills, self.functions, seconds=seconds)
        except Rejected as rejection:
            self.error = rejection.error

    def _settle(self, run: ToolRun) -> None:
        for dependent in run.dependents:
            self.waiting[dependent] -= 1
            if self.waiting[dependent] == 0:
                heapq.heappush(self.ready, dependent)

    def _start_ready(self) -> None:
        while self.ready and not self.alone:
            run = self.runs[self.ready[0]]
            if must_skip(self.runs, run):
                heapq.heappop(self.ready)
                run.state = "skipped"
                tool_skipped(run)
                self._settle(run)
                continue
            concurrent = self.plan.parallel and run.call.async_
            if concurrent and self.running >= self.limits.max_concurrency:
                break
            if not concurrent and self.running:
                break
            heapq.heappop(self.ready)
            self.running += 1
            self.alone = not concurrent
            run.state = "running"
            self.tools.start_soon(self._run_tool, run)

    async def _run_tool(self, run: ToolRun) -> None:
        assert self.attempts is not None
        if self.on_start is not None:
            self.on_start(run.call.tool_id)
        await self.attempts.run_tool(run)
        self.running -= 1
        self.alone = False
        self._settle(run)
        self.wake.set()
