"""The plan executor: runs a `plan` and returns its `execution-result`.

    result = await execute_plan(plan)                       # bundled skills
    result = await execute_plan(plan, skills=discover_skills([folder]))
    result = await execute_plan(plan, functions={"inventory/add": add_item})

Before anything runs, the plan is checked: unique `toolId`s, dependencies
that name tools of the plan, no cycle, every `toolPath` a declared script of
an enabled skill (or a registered function), every input valid against its
script's input schema. A plan that fails a check is rejected: the result has
`success` false, no tool results, and the reason in `error`.

Then tools run in dependency order, ties broken by their order in the plan.
With `parallel` on the plan and `async` on a tool, ready tools run together,
at most `Limits.max_concurrency` at once; any other tool runs alone. A tool
whose dependency failed while `required`, or was skipped, is skipped; a
dependency that failed without being required reaches its dependents as
`null`. Tools that do not depend on a failure keep running.

Each failed attempt is retried up to the policy's `maxRetries`, waiting
`backoffMs * 2^(n-1)` before retry n, never past the plan's deadline. At the
plan's deadline, running tools are stopped (state `timeout`) and tools not
started are `skipped`.
"""

from __future__ import annotations

import contextlib
import heapq
import math
import os
import signal
import stat
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import msgspec
import trio

from ...generated.tool_plans import (
    AssetEvent,
    AssetReference,
    DoneEvent,
    DroppedEvents,
    ErrorEvent,
    ExecutionResult,
    LogEvent,
    Plan,
    RelativePath,
    RetryPolicy,
    SkillName,
    StatePatchEvent,
    ToolError,
    ToolEvent,
    ToolInvocation,
    ToolRequest,
    ToolResult,
    UiEvent,
)
from ..core.contracts import field_bound
from ..core.errors import ContractError
from ..core.jsontext import TOO_DEEP, MalformedJSON, copy_json, parse
from ..core.validation import convert
from .limits import MAX_ATTEMPT_NUMBER, MAX_GENERATIONS, Limits
from .script_io import fit_text
from .skills import Script, SkillSet, UnusableScript, bundled_skills
from .tool_process import (
    ProcessEnd,
    ProtocolViolation,
    StreamLimits,
    run_process,
)

__all__ = [
    "EmitEvent",
    "Limits",
    "ToolFunction",
    "UiEventHandler",
    "check_plan",
    "default_data_root",
    "execute_plan",
    "merge_patch",
]

EmitEvent = Callable[[ToolEvent], None]
"How an in-process tool reports: the same events a script writes, as typed objects."
ToolFunction = Callable[[ToolRequest, EmitEvent], Awaitable[None]]
"""An in-process tool. Returning means success (unless it emitted `done` with ok
false); raising an exception means failure. Emitting `done` is optional."""
UiEventHandler = Callable[[str, UiEvent], None]
"Receives each `ui_event` as it arrives, with the `toolId` that emitted it."

DEFAULT_RETRY_POLICY = RetryPolicy()
_SCRIPT_ENVIRONMENT = {
    "PATH": os.defpath,
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    # Bundled skills live inside the installed package; no bytecode files there.
    "PYTHONDONTWRITEBYTECODE": "1",
}
_encoder = msgspec.json.Encoder()
_MESSAGE_LENGTH = field_bound(ToolError, "message", "max_length")
_CODE_LENGTH = field_bound(ToolError, "code", "max_length")


async def execute_plan(
    plan: Plan,
    *,
    skills: SkillSet | None = None,
    functions: Mapping[str, ToolFunction] | None = None,
    limits: Limits | None = None,
    data_root: Path | None = None,
    asset_folders: Sequence[Path] = (),
    on_ui_event: UiEventHandler | None = None,
    attempt_number: int = 1,
) -> ExecutionResult:
    """Run `plan` and return its execution result, valid against `execution-result`.

    `skills` defaults to the bundled skills. `functions` registers in-process
    tools by name; a plan calls one by giving its name as `toolPath`. A name
    is a relative path whose first segment is the skill name reported in
    `disabledSkills` when it fails, and it may not start with `skills/`.
    Scripts keep files in `data_root/<skill>` (default: `default_data_root()`).
    An asset path is relative to the skill folder or, when no file is there,
    to the data folder (for an in-process tool: to the first asset folder);
    it must resolve inside one of those or of `asset_folders`. `on_ui_event`
    is called for every `ui_event` as it arrives; an exception from it stops
    the execution and propagates.

    Raises ValueError for a bad function name or `attempt_number` outside
    1..MAX_ATTEMPT_NUMBER. Cancellation from outside stops every script's process group
    (within the shutdown grace) and propagates.
    """
    if not 1 <= attempt_number <= MAX_ATTEMPT_NUMBER:
        raise ValueError(f"attempt_number must be 1 to {MAX_ATTEMPT_NUMBER}")
    execution = _Execution(
        plan,
        skills,
        functions,
        limits=limits or Limits(),
        data_root=data_root,
        asset_folders=tuple(folder.resolve() for folder in asset_folders),
        on_ui_event=on_ui_event,
        attempt_number=attempt_number,
    )
    try:
        return await execution.run()
    except BaseExceptionGroup as group:
        # The nurseries inside are an implementation detail: one failure is
        # raised as itself, so callers can catch it by its type.
        leaves = list(_leaves(group))
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


def check_plan(
    plan: Plan,
    *,
    skills: SkillSet | None = None,
    functions: Mapping[str, ToolFunction] | None = None,
) -> ToolError | None:
    """Why `execute_plan` would reject `plan` before running anything, or None.

    The same checks, with the same errors: duplicate ids, unknown
    dependencies, cycles, unusable script paths, inputs that break their
    script's input schema. Runs nothing; needs no event loop.
    """
    execution = _Execution(plan, skills, functions)
    try:
        execution._prepare()
    except _Rejected as rejection:
        return rejection.error
    return None


def _leaves(group: BaseExceptionGroup[BaseException]) -> Iterable[BaseException]:
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            yield from _leaves(error)
        else:
            yield error


def default_data_root() -> Path:
    """Where skills keep their data unless told otherwise: `$XDG_DATA_HOME/plancontracts/skills`.

    `XDG_DATA_HOME` defaults to `~/.local/share`. Each skill gets a folder of
    its own name inside.
    """
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "plancontracts" / "skills"


def merge_patch(state: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Merge `patch` into `state` in place: objects merge, arrays replace, null deletes.

    Values are JSON values (dicts, lists and scalars); they may nest as deep as
    the parser allows, so nothing here recurses.
    """
    pending: list[tuple[dict[str, Any], Mapping[str, Any]]] = [(state, patch)]
    while pending:
        target, source = pending.pop()
        for key, value in source.items():
            if value is None:
                target.pop(key, None)
            elif isinstance(value, dict):
                current = target.get(key)
                if not isinstance(current, dict):
                    current = target[key] = {}
                pending.append((current, value))
            else:
                target[key] = copy_json(value)


class _Rejected(Exception):
    def __init__(self, category: Literal["circular_dependency", "invalid_plan"], code: str,
                 message: str, details: dict[str, Any]) -> None:  # fmt: skip
        super().__init__(message)
        self.error = ToolError(category=category, code=code, message=_fit(message), details=details)


@dataclass(slots=True)
class _EventBudget:
    """The bytes of events one plan keeps (see `Limits.max_kept_event_bytes`).

    Events that only inform (`log`, `ui_event`) get half: once one does not
    fit, none is kept any more, so a trace keeps a plan's first notices, not
    a random few. Every other event carries state, an asset or a verdict and
    may use the whole budget, half of which is left for them whatever the
    notices took.
    """

    limit: int
    kept: int = 0
    notices: int = 0
    notices_closed: bool = False

    def keep_notice(self, size: int) -> bool:
        """Whether a `log` or `ui_event` of `size` bytes is kept; counted in if it is."""
        fits = self.notices + size <= self.limit // 2 and self.kept + size <= self.limit
        if self.notices_closed or not fits:
            self.notices_closed = True
            return False
        self.notices += size
        self.kept += size
        return True

    def keep(self, size: int) -> bool:
        """Whether any other event of `size` bytes fits; counted in if it does."""
        if self.kept + size > self.limit:
            return False
        self.kept += size
        return True


@dataclass(frozen=True, slots=True)
class _Asset:
    """A registered asset and the identity of its file when it was registered."""

    reference: AssetReference
    device: int
    inode: int

    def swapped(self) -> bool:
        """Whether its path no longer leads, through no symbolic link, to that same regular file."""
        path = self.reference.path
        # The path was resolved at registration: one that resolves elsewhere now
        # has a link on its way, in a folder swapped for a link included.
        return os.path.realpath(path) != path or _identity(path) != (self.device, self.inode)

    def refusal(self) -> ToolError:
        reference = self.reference
        return _failure(
            "invalid_json",
            "asset_swapped",
            f"asset {reference.asset_id!r}: {reference.path} was replaced after it was "
            "registered (by another file, or a link on its path), so it is not reported",
        )


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the regular file at `path` itself, or None for anything else."""
    try:
        status = os.lstat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


@dataclass(slots=True)
class _Run:
    """What is known about one tool of the plan, updated as it runs."""

    index: int
    call: ToolInvocation
    target: Script | ToolFunction
    skill: str | None
    dependencies: tuple[int, ...]
    dependents: list[int] = field(default_factory=list)
    state: Literal["pending", "running", "success", "failed", "timeout", "skipped"] = "pending"
    events: list[ToolEvent] = field(default_factory=list)
    dropped: int = 0
    "How many events, over all attempts, the budget left out of `events`."
    dropped_bytes: int = 0
    retries: int = 0
    started: float | None = None
    elapsed: float = 0.0
    error: ToolError | None = None
    output: dict[str, Any] | None = None
    patches: list[dict[str, Any]] = field(default_factory=list)
    "The state patches of its successful attempt."
    assets: list[_Asset] = field(default_factory=list)
    "The assets of its successful attempt."

    @property
    def settled(self) -> bool:
        return self.state not in ("pending", "running")


class _Execution:
    def __init__(
        self,
        plan: Plan,
        skills: SkillSet | None,
        functions: Mapping[str, ToolFunction] | None,
        *,
        limits: Limits | None = None,
        data_root: Path | None = None,
        asset_folders: tuple[Path, ...] = (),
        on_ui_event: UiEventHandler | None = None,
        attempt_number: int = 1,
    ) -> None:
        self.plan = plan
        self.skills = bundled_skills() if skills is None else skills
        self.functions = dict(functions or {})
        for name in self.functions:
            _check_function_name(name)
        self.limits = limits or Limits()
        self.data_root = data_root
        self.asset_folders = asset_folders
        self.on_ui_event = on_ui_event
        self.attempt_number = attempt_number
        self.runs: list[_Run] = []
        self.order: list[int] = []
        self.finished: list[int] = []
        self.started = 0.0
        self.deadline = math.inf
        self.budget = _EventBudget(self.limits.max_kept_event_bytes)

    async def run(self) -> ExecutionResult:
        self.started = trio.current_time()
        self.deadline = self.started + self.limits.plan_timeout
        try:
            self._prepare()
        except _Rejected as rejection:
            self.runs = []
            return self._result(error=rejection.error)
        with trio.CancelScope(deadline=self.deadline):
            await self._schedule()
        now = trio.current_time()
        for run in self.runs:
            if run.state == "running":
                run.state = "timeout"
                run.elapsed = now - (run.started or now)
                run.error = ToolError(
                    category="timeout",
                    code="plan_deadline",
                    message=f"stopped at the plan's deadline ({self.limits.plan_timeout:g} s)",
                )
                self.finished.append(run.index)
            elif run.state == "pending":
                run.state = "skipped"
        return self._result()

    # Checks before anything runs ------------------------------------------------

    def _prepare(self) -> None:
        tools = self.plan.tools
        index: dict[str, int] = {}
        for position, call in enumerate(tools):
            if call.tool_id in index:
                raise _Rejected(
                    "invalid_plan",
                    "duplicate_tool_id",
                    f"toolId {call.tool_id!r} is used twice, by tools {index[call.tool_id]} "
                    f"and {position}",
                    {"toolId": call.tool_id},
                )
            index[call.tool_id] = position
        dependencies: list[tuple[int, ...]] = []
        for call in tools:
            try:
                positions = [index[name] for name in call.dependencies]
            except KeyError as missing:
                name = missing.args[0]
                raise _Rejected(
                    "invalid_plan",
                    "unknown_dependency",
                    f"tool {call.tool_id!r} depends on {name!r}, which is not a tool of this plan",
                    {"toolId": call.tool_id, "dependency": name},
                ) from None
            dependencies.append(tuple(dict.fromkeys(positions)))
        self.order = _dependency_order(tools, dependencies)
        for position, call in enumerate(tools):
            target, skill = self._target(call)
            self.runs.append(_Run(position, call, target, skill, dependencies[position]))
        for run in self.runs:
            for dependency in run.dependencies:
                self.runs[dependency].dependents.append(run.index)

    def _target(self, call: ToolInvocation) -> tuple[Script | ToolFunction, str | None]:
        function = self.functions.get(call.tool_path)
        if function is not None:
            skill = call.tool_path.split("/", 1)[0]
            if skill in self.plan.disabled_skills:
                raise _Rejected(
                    "invalid_plan",
                    "disabled_skill",
                    f"tool {call.tool_id!r}: {call.tool_path} belongs to the disabled "
                    f"skill {skill!r}",
                    {"toolId": call.tool_id, "toolPath": call.tool_path},
                )
            return function, skill
        try:
            script = self.skills.resolve(call.tool_path, self.plan.disabled_skills)
        except UnusableScript as unusable:
            raise _Rejected(
                "invalid_plan",
                "unusable_script",
                f"tool {call.tool_id!r}: {unusable}",
                {"toolId": call.tool_id, "toolPath": call.tool_path},
            ) from None
        problem = script.check_input(_input(call), seconds=self._checking_time_left())
        if problem is not None:
            details = {"toolId": call.tool_id}
            if problem.pointer is not None:
                details["pointer"] = problem.pointer
            raise _Rejected(
                "invalid_plan", problem.code, f"tool {call.tool_id!r}: {problem.message}", details
            )
        return script, script.skill

    # When checking inputs must end, on the monotonic clock: set by the first check.
    _checks_deadline: float | None = None

    def _checking_time_left(self) -> float:
        """Seconds left to check inputs: all of them share the time before the plan's deadline.

        `check_plan` runs without an event loop or a deadline of its own; its
        checks share the plan timeout of `self.limits`.
        """
        if self._checks_deadline is None:
            left = self.limits.plan_timeout
            if not math.isinf(self.deadline):
                left = self.deadline - trio.current_time()
            self._checks_deadline = time.monotonic() + left
        return self._checks_deadline - time.monotonic()

    # Scheduling -------------------------------------------------------------------

    async def _schedule(self) -> None:
        rank = {index: position for position, index in enumerate(self.order)}
        waiting = [len(run.dependencies) for run in self.runs]
        ready = [(rank[run.index], run.index) for run in self.runs if not run.dependencies]
        heapq.heapify(ready)
        finished_send, finished_receive = trio.open_memory_channel[int](math.inf)
        running = 0
        unsettled = len(self.runs)

        def settle(run: _Run) -> None:
            nonlocal unsettled
            unsettled -= 1
            for dependent in run.dependents:
                waiting[dependent] -= 1
                if waiting[dependent] == 0:
                    heapq.heappush(ready, (rank[dependent], dependent))

        async def run_concurrently(run: _Run) -> None:
            await self._run_tool(run)
            finished_send.send_nowait(run.index)

        async with trio.open_nursery() as nursery:
            while unsettled:
                while ready:
                    run = self.runs[ready[0][1]]
                    if self._must_skip(run):
                        heapq.heappop(ready)
                        run.state = "skipped"
                        settle(run)
                        continue
                    if self.plan.parallel and run.call.async_:
                        if running >= self.limits.max_concurrency:
                            break
                        heapq.heappop(ready)
                        running += 1
                        run.state = "running"
                        nursery.start_soon(run_concurrently, run)
                    elif running:
                        break
                    else:
                        # A tool that runs alone runs here, without a task of its own;
                        # so no concurrent tool can start while it runs.
                        heapq.heappop(ready)
                        run.state = "running"
                        await self._run_tool(run)
                        settle(run)
                if not unsettled:
                    break
                finished = await finished_receive.receive()
                running -= 1
                settle(self.runs[finished])

    def _must_skip(self, run: _Run) -> bool:
        for index in run.dependencies:
            dependency = self.runs[index]
            if dependency.state == "skipped":
                return True
            if dependency.state in ("failed", "timeout") and dependency.call.required:
                return True
        return False

    # One tool -----------------------------------------------------------------------

    async def _run_tool(self, run: _Run) -> None:
        run.started = trio.current_time()
        if isinstance(run.target, Script):
            policy = run.call.retry_policy or run.target.retry_policy or DEFAULT_RETRY_POLICY
        else:
            policy = run.call.retry_policy or DEFAULT_RETRY_POLICY
        attempt = 1
        while True:
            outcome = await self._attempt(run, attempt)
            if outcome is None:
                run.state = "success"
                break
            run.error = outcome
            run.state = "timeout" if outcome.category == "timeout" else "failed"
            if attempt > policy.max_retries:
                break
            delay = policy.backoff_ms * 2 ** (attempt - 1) / 1000
            if trio.current_time() + delay >= self.deadline:
                # A retry that cannot finish before the plan's deadline is not started.
                break
            await trio.sleep(delay)
            attempt += 1
            run.retries += 1
        run.elapsed = trio.current_time() - run.started
        if run.state != "success":
            self.finished.append(run.index)

    async def _attempt(self, run: _Run, attempt: int) -> ToolError | None:
        """Run one attempt; None on success, else why it failed."""
        request = ToolRequest(
            version="0",
            request_id=f"{self.plan.request_id}/{run.call.tool_id}",
            tool_id=run.call.tool_id,
            tool_path=run.call.tool_path,
            attempt=attempt,
            input=_input(run.call),
            dependencies={
                self.runs[index].call.tool_id: self.runs[index].output for index in run.dependencies
            },
            data_dir="",
        )
        if isinstance(run.target, Script):
            return await self._attempt_script(run, run.target, request)
        return await self._attempt_function(run, run.target, request)

    def _timeout(self, run: _Run) -> float:
        """Seconds this attempt may run: its own timeout, cut short by the plan's deadline."""
        if run.call.timeout_ms:
            seconds = run.call.timeout_ms / 1000
        elif isinstance(run.target, Script):
            seconds = run.target.declaration.timeout / 1000
        else:
            seconds = self.limits.tool_timeout
        return min(seconds, max(0.0, self.deadline - trio.current_time()))

    async def _attempt_script(
        self, run: _Run, script: Script, request: ToolRequest
    ) -> ToolError | None:
        data_dir = self.data_root / script.skill if self.data_root else script.skill_folder / "data"
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return _failure("process_error", "no_data_folder", f"cannot create {data_dir}: {error}")
        request.data_dir = str(data_dir.resolve())
        sink = _Sink(self, run, (script.skill_folder, data_dir.resolve(), *self.asset_folders))
        end = ProcessEnd()
        argv = (
            [sys.executable, str(script.file)]
            if script.file.suffix == ".py"
            else [str(script.file)]
        )
        limits = StreamLimits(
            self.limits.max_line_bytes, self.limits.max_stderr_bytes, self.limits.shutdown_grace
        )
        timeout = self._timeout(run)
        with trio.move_on_after(timeout) as deadline:
            try:
                await run_process(
                    argv,
                    cwd=script.skill_folder,
                    env=_script_environment(),
                    stdin=_encoder.encode(request),
                    on_line=sink.line,
                    limits=limits,
                    end=end,
                )
            except OSError as error:
                return _failure(
                    "process_error", "not_started", f"the script did not start: {error}"
                )
        # Not cut to a message's length: the end of standard error says why a
        # script died, and the stream limit already bounds what was kept.
        details = {"stderr": end.stderr_text()} if end.stderr else {}
        if deadline.cancelled_caught:
            return _failure("timeout", "tool_deadline", f"ran longer than {timeout:g} s", details)
        if end.violation is not None:
            return _failure("invalid_json", end.violation.code, end.violation.message, details)
        if end.exit_code:
            how = (
                f"was killed by signal {_signal_name(-end.exit_code)}"
                if end.exit_code < 0
                else f"exited with status {end.exit_code}"
            )
            return _failure("process_error", "exit_status", f"the script {how}", details)
        if sink.done is None:
            return _failure(
                "process_error", "no_done", "the script exited without a done event", details
            )
        return sink.finish(details)

    async def _attempt_function(
        self, run: _Run, function: ToolFunction, request: ToolRequest
    ) -> ToolError | None:
        sink = _Sink(self, run, self.asset_folders)
        timeout = self._timeout(run)
        # A cancel scope costs more than a call of a small function; when the
        # plan's deadline comes first, the plan's scope is enough.
        deadline: trio.CancelScope | None = None
        if trio.current_time() + timeout < self.deadline:
            deadline = trio.move_on_after(timeout)
        with deadline or contextlib.nullcontext():
            try:
                await function(request, sink.accept)
            except ProtocolViolation:
                pass
            except Exception as error:
                if sink.handler_error is None:
                    return _failure("tool_failure", "exception", f"{type(error).__name__}: {error}")
            if sink.handler_error is not None:
                raise sink.handler_error
        if deadline is not None and deadline.cancelled_caught:
            return _failure("timeout", "tool_deadline", f"ran longer than {timeout:g} s")
        if sink.violation is not None:
            return _failure("invalid_json", sink.violation.code, sink.violation.message)
        return sink.finish({})

    # The result -----------------------------------------------------------------------

    def _result(self, error: ToolError | None = None) -> ExecutionResult:
        for run in self.runs:
            # A later tool, or a process a script left behind, may have swapped an
            # asset's file since its attempt ended: the tool that registered it fails.
            swapped = next((asset for asset in run.assets if asset.swapped()), None)
            if swapped is not None:
                run.state, run.error = "failed", swapped.refusal()
                self.finished.append(run.index)
        state: dict[str, Any] = {}
        assets: list[AssetReference] = []
        for index in self.order if self.runs else ():
            run = self.runs[index]
            if run.state == "success":
                for patch in run.patches:
                    merge_patch(state, patch)
                assets.extend(asset.reference for asset in run.assets)
        failed = [self.runs[index] for index in self.finished]
        disabled = list(self.plan.disabled_skills)
        for run in failed:
            if run.skill and run.skill not in disabled:
                disabled.append(run.skill)
        success = error is None and all(
            run.state == "success" or not run.call.required for run in self.runs
        )
        generation = self.plan.metadata.generation_attempt if self.plan.metadata else 1
        result = ExecutionResult(
            plan_id=self.plan.request_id,
            success=success,
            can_replan=not success and generation < MAX_GENERATIONS,
            failed_tools=[run.call.tool_id for run in failed],
            disabled_skills=disabled,
            tool_results=[_tool_result(run) for run in self.runs],
            aggregated_state=state,
            aggregated_assets=assets,
            execution_time_ms=_milliseconds(trio.current_time() - self.started),
            attempt_number=self.attempt_number,
        )
        if error is not None:
            result.error = error
        return result


class _Sink:
    """Receives one attempt's events, enforces the protocol, and keeps what they say."""

    def __init__(self, execution: _Execution, run: _Run, asset_roots: Iterable[Path]) -> None:
        self.execution = execution
        self.run = run
        self.asset_roots = tuple(asset_roots)
        self.count = 0
        self.lines = 0
        self.done: DoneEvent | None = None
        self.last_error: ErrorEvent | None = None
        self.patches: list[dict[str, Any]] = []
        self.assets: list[_Asset] = []
        self.violation: ProtocolViolation | None = None
        self.handler_error: Exception | None = None

    def line(self, raw: bytes) -> None:
        self.lines += 1
        if not raw.strip():
            return
        where = f"output line {self.lines}"
        if self.done is not None:
            raise self._violate("output_after_done", f"{where}: output after the done event")
        try:
            event: ToolEvent = convert("tool-event", parse(raw))
        except MalformedJSON as error:
            raise self._violate("malformed_line", f"{where}: {error}") from None
        except ContractError as error:
            raise self._violate("invalid_event", f"{where}: {_listed(error)}") from None
        self._keep(event, len(raw))

    def accept(self, event: ToolEvent) -> None:
        """Take an event from an in-process tool; checked as if it were a line of output."""
        if self.done is not None:
            raise self._violate("output_after_done", "an event after the done event")
        try:
            checked: ToolEvent = convert("tool-event", msgspec.to_builtins(event))
        except ContractError as error:
            raise self._violate("invalid_event", _listed(error)) from None
        except RecursionError:
            # A value built in Python can nest deeper than any line the parser takes.
            raise self._violate("invalid_event", TOO_DEEP) from None
        self._keep(checked, len(_encoder.encode(checked)))

    def _keep(self, event: ToolEvent, size: int) -> None:
        """Keep `event` (`size` bytes as a JSON line) in the trace, or count it as dropped."""
        limits, budget = self.execution.limits, self.execution.budget
        if self.count >= limits.max_events:
            raise self._violate(
                "too_many_events", f"more than {limits.max_events} events in one attempt"
            )
        self.count += 1
        if isinstance(event, LogEvent | UiEvent):
            if budget.keep_notice(size):
                self.run.events.append(event)
            else:
                self.run.dropped += 1
                self.run.dropped_bytes += size
        elif budget.keep(size):
            self.run.events.append(event)
        else:
            raise self._violate(
                "too_many_event_bytes",
                f"a {type(event).__struct_config__.tag} event of {size} bytes does not fit in "
                f"what is left ({budget.limit - budget.kept} bytes) of the plan's "
                f"{budget.limit} bytes for kept events",
            )
        if isinstance(event, StatePatchEvent):
            self.patches.append(event.patch)
        elif isinstance(event, AssetEvent):
            self._register(event)
        elif isinstance(event, UiEvent):
            if self.execution.on_ui_event is not None:
                try:
                    self.execution.on_ui_event(self.run.call.tool_id, event)
                except Exception as error:
                    # The caller's handler failed, not the tool: remembered so that
                    # an in-process tool catching it cannot hide it.
                    self.handler_error = error
                    raise
        elif isinstance(event, ErrorEvent):
            self.last_error = event
        elif isinstance(event, DoneEvent):
            self.done = event

    def _register(self, event: AssetEvent) -> None:
        roots = self.asset_roots
        # Relative to the working folder, else to the data folder (the first two roots).
        candidates = [(root / event.path).resolve() for root in roots[:2]]
        path = next((found for found in candidates if found.exists()), None)
        if path is None:
            raise self._violate(
                "asset_missing", f"asset {event.asset_id!r}: {event.path} is not a file"
            )
        if not any(path.is_relative_to(root) for root in roots):
            raise self._violate(
                "asset_outside_folder",
                f"asset {event.asset_id!r}: {event.path} is outside the folders assets may use",
            )
        identity = _identity(str(path))
        if identity is None:
            raise self._violate(
                "asset_missing", f"asset {event.asset_id!r}: {event.path} is not a file"
            )
        reference = AssetReference(
            asset_id=event.asset_id,
            kind=event.kind,
            media_type=event.media_type,
            path=str(path),
            tool_id=self.run.call.tool_id,
        )
        self.assets.append(_Asset(reference, *identity))

    def _violate(self, code: str, message: str) -> ProtocolViolation:
        self.violation = ProtocolViolation(code, _fit(message))
        return self.violation

    def finish(self, details: dict[str, Any]) -> ToolError | None:
        """The attempt's verdict once it ended without breaking the protocol."""
        if self.done is not None and not self.done.ok:
            if self.last_error is not None:
                code, message = self.last_error.error_code, self.last_error.error_message
            else:
                code, message = "failed", self.done.summary or "the tool reported failure"
            return _failure("tool_failure", code, message, details)
        for asset in self.assets:
            if asset.swapped():
                return asset.refusal()
        output: dict[str, Any] = {}
        if self.done is not None and self.done.summary:
            output["summary"] = self.done.summary
        if self.patches:
            state: dict[str, Any] = {}
            for patch in self.patches:
                merge_patch(state, patch)
            output["state"] = state
        self.run.output = output
        self.run.patches = self.patches
        self.run.assets = self.assets
        return None


def _dependency_order(
    tools: Sequence[ToolInvocation], dependencies: list[tuple[int, ...]]
) -> list[int]:
    """Plan indices in dependency order, ties by plan order; rejects a cycle."""
    waiting = [len(depends) for depends in dependencies]
    dependents: list[list[int]] = [[] for _ in tools]
    for index, depends in enumerate(dependencies):
        for dependency in depends:
            dependents[dependency].append(index)
    ready = [index for index, count in enumerate(waiting) if count == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        index = heapq.heappop(ready)
        order.append(index)
        for dependent in dependents[index]:
            waiting[dependent] -= 1
            if waiting[dependent] == 0:
                heapq.heappush(ready, dependent)
    if len(order) < len(tools):
        cycle = _find_cycle({i for i, count in enumerate(waiting) if count}, dependencies)
        names = [tools[index].tool_id for index in cycle]
        raise _Rejected(
            "circular_dependency",
            "cycle",
            "the dependencies form a cycle: " + " -> ".join(names),
            {"cycle": names},
        )
    return order


def _find_cycle(left: set[int], dependencies: list[tuple[int, ...]]) -> list[int]:
    # Every tool left after the topological sort waits on another one left, so
    # following dependencies inside `left` must come back to a tool already seen.
    path: list[int] = []
    seen: dict[int, int] = {}
    node = min(left)
    while node not in seen:
        seen[node] = len(path)
        path.append(node)
        node = next(dependency for dependency in dependencies[node] if dependency in left)
    # Shown as "needed by" arrows, starting from the tool listed first in the plan.
    cycle = path[seen[node] :][::-1]
    first = cycle.index(min(cycle))
    cycle = cycle[first:] + cycle[:first]
    return [*cycle, cycle[0]]


def _tool_result(run: _Run) -> ToolResult:
    assert run.settled
    result = ToolResult(
        tool_id=run.call.tool_id,
        state=cast(Literal["success", "failed", "skipped", "timeout"], run.state),
        events=run.events,
        execution_time_ms=_milliseconds(run.elapsed),
        retry_count=run.retries,
    )
    if run.dropped:
        result.dropped_events = DroppedEvents(count=run.dropped, bytes=run.dropped_bytes)
    if run.output is not None and run.state == "success":
        result.output = run.output
    if run.error is not None and run.state in ("failed", "timeout"):
        result.error = run.error
    return result


def _input(call: ToolInvocation) -> dict[str, Any]:
    return {} if isinstance(call.input, msgspec.UnsetType) else call.input


def _failure(
    category: Literal["tool_failure", "timeout", "invalid_json", "process_error"],
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
) -> ToolError:
    error = ToolError(category=category, code=code[:_CODE_LENGTH], message=_fit(message))
    if details:
        error.details = details
    return error


def _check_function_name(name: str) -> None:
    skill, _, rest = name.partition("/")
    try:
        msgspec.convert(name, RelativePath)
        msgspec.convert(skill, SkillName)
    except msgspec.ValidationError:
        valid = False
    else:
        valid = bool(rest) and skill != "skills"
    if not valid:
        raise ValueError(
            f"function name {name!r} must be <skill name>/<tool name>, a relative path "
            "as a toolPath is, and must not start with skills/"
        )


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _milliseconds(seconds: float) -> int:
    return min(86_400_000, max(0, round(seconds * 1000)))


def _script_environment() -> dict[str, str]:
    # PYTHONPATH is kept so that a Python script imports what the executor
    # imports (plancontracts' script helpers among them), however it was installed.
    kept = {name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ}
    return {**_SCRIPT_ENVIRONMENT, **kept}


def _listed(error: ContractError) -> str:
    return "; ".join(map(str, error.violations))


def _fit(text: str) -> str:
    return fit_text(text, _MESSAGE_LENGTH)
