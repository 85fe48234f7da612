"""One tool's attempts: a script as a process or an in-process function, retried by its policy.

Each attempt gets a deadline: the call's `timeoutMs`, else the script's
declared timeout, else `Limits.tool_timeout`, never past the plan's deadline.
A failed attempt is retried up to the retry policy's `maxRetries` (the call's,
else its skill's, else the default), waiting `backoffMs * 2^(n-1)` before
retry n, unless that wait would reach the plan's deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path

import msgspec
import trio

from ...generated.tool_plans import Plan, RetryPolicy, ToolError, ToolRequest
from ..core.errors import ProtocolViolation
from ..core.telemetry import Told, span, tracing
from .limits import Limits
from .runs import ToolFunction, ToolRun, UiEventHandler, call_input, failure
from .sink import EventBudget, Sink
from .skills import Script
from .spans import retried, tool_attributes, tool_ended, tool_span_name, tool_stopped
from .tool_process import ProcessEnd, StreamLimits, run_process

__all__ = ["ToolAttempts"]

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


class ToolAttempts:
    """Runs the tools of one execution, one `run_tool` call each.

    `failed` collects the index of each tool that ends failed or timed out,
    in the order they end; the plan's event budget is shared by all attempts.
    """

    def __init__(
        self,
        plan: Plan,
        runs: list[ToolRun],
        *,
        limits: Limits,
        deadline: float,
        data_root: Path | None,
        asset_folders: tuple[Path, ...],
        on_ui_event: UiEventHandler | None,
        failed: list[int],
    ) -> None:
        self.plan = plan
        self.runs = runs
        self.limits = limits
        self.deadline = deadline
        self.data_root = data_root
        self.asset_folders = asset_folders
        self.on_ui_event = on_ui_event
        self.failed = failed
        self.budget = EventBudget(limits.max_kept_event_bytes)

    async def run_tool(self, run: ToolRun) -> None:
        """Attempt `run` until it succeeds or its retries are spent; its state says how it ended.

        Traced as the span `execute_tool {toolPath}` (`spans.py`) when the
        program traces: a tool the plan's deadline stops is told as timed
        out; any other exception marks the span failed by its type.
        """
        if not tracing():
            await self._run_tool(run, None)
            return
        stopped: trio.Cancelled | None = None
        with span(tool_span_name(run), tool_attributes(run)) as told:
            try:
                await self._run_tool(run, told)
            except trio.Cancelled as cancelled:
                now = trio.current_time()
                if now < self.deadline:
                    raise
                # Raised again once the span is told why: the plan's deadline, not
                # an outside cancellation.
                tool_stopped(told, run, now - (run.started or now))
                stopped = cancelled
            else:
                tool_ended(told, run)
        if stopped is not None:
            raise stopped

    async def _run_tool(self, run: ToolRun, told: Told | None) -> None:
        """`run_tool`'s work; each retry an event of `told`, the tool's span, if traced."""
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
            if told is not None:
                retried(told, attempt, outcome)
        run.elapsed = trio.current_time() - run.started
        if run.state != "success":
            self.failed.append(run.index)

    async def _attempt(self, run: ToolRun, attempt: int) -> ToolError | None:
        """Run one attempt; None on success, else why it failed."""
        request = ToolRequest(
            version="0",
            request_id=f"{self.plan.request_id}/{run.call.tool_id}",
            tool_id=run.call.tool_id,
            tool_path=run.call.tool_path,
            attempt=attempt,
            input=call_input(run.call),
            dependencies={
                self.runs[index].call.tool_id: self.runs[index].output for index in run.dependencies
            },
            data_dir="",
        )
        if isinstance(run.target, Script):
            return await self._attempt_script(run, run.target, request)
        return await self._attempt_function(run, run.target, request)

    def _timeout(self, run: ToolRun) -> float:
        """Seconds this attempt may run: its own timeout, cut short by the plan's deadline."""
        if run.call.timeout_ms:
            seconds = run.call.timeout_ms / 1000
        elif isinstance(run.target, Script):
            seconds = run.target.declaration.timeout / 1000
        else:
            seconds = self.limits.tool_timeout
        return min(seconds, max(0.0, self.deadline - trio.current_time()))

    def _sink(self, run: ToolRun, asset_roots: tuple[Path, ...]) -> Sink:
        return Sink(
            run,
            asset_roots,
            max_events=self.limits.max_events,
            budget=self.budget,
            on_ui_event=self.on_ui_event,
        )

    async def _attempt_script(
        self, run: ToolRun, script: Script, request: ToolRequest
    ) -> ToolError | None:
        data_dir = self.data_root / script.skill if self.data_root else script.skill_folder / "data"
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            return failure("process_error", "no_data_folder", f"cannot create {data_dir}: {error}")
        request.data_dir = str(data_dir.resolve())
        sink = self._sink(run, (script.skill_folder, data_dir.resolve(), *self.asset_folders))
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
        run.exit_code = None
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
                return failure("process_error", "not_started", f"the script did not start: {error}")
        run.exit_code = end.exit_code
        # Not cut to a message's length: the end of standard error says why a
        # script died, and the stream limit already bounds what was kept.
        details = {"stderr": end.stderr_text()} if end.stderr else {}
        if deadline.cancelled_caught:
            return failure("timeout", "tool_deadline", f"ran longer than {timeout:g} s", details)
        if end.violation is not None:
            return failure("invalid_json", end.violation.code, end.violation.message, details)
        if end.exit_code:
            how = (
                f"was killed by signal {_signal_name(-end.exit_code)}"
                if end.exit_code < 0
                else f"exited with status {end.exit_code}"
            )
            return failure("process_error", "exit_status", f"the script {how}", details)
        if sink.done is None:
            return failure(
                "process_error", "no_done", "the script exited without a done event", details
            )
        return sink.finish(details)

    async def _attempt_function(
        self, run: ToolRun, function: ToolFunction, request: ToolRequest
    ) -> ToolError | None:
        sink = self._sink(run, self.asset_folders)
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
                    return failure("tool_failure", "exception", f"{type(error).__name__}: {error}")
            if sink.handler_error is not None:
                raise sink.handler_error
        if deadline is not None and deadline.cancelled_caught:
            return failure("timeout", "tool_deadline", f"ran longer than {timeout:g} s")
        if sink.violation is not None:
            return failure("invalid_json", sink.violation.code, sink.violation.message)
        return sink.finish({})


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _script_environment() -> dict[str, str]:
    # PYTHONPATH is kept so that a Python script imports what the executor
    # imports (plancontracts' script helpers among them), however it was installed.
    kept = {name: os.environ[name] for name in ("PYTHONPATH",) if name in os.environ}
    return {**_SCRIPT_ENVIRONMENT, **kept}
