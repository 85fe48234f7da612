"""What a plan's execution tells OpenTelemetry: one `execute plan` span, one span per tool.

    with plan_span(plan.request_id, parallel=plan.parallel, attempt=1) as told:
        ...                                   # each tool: `execute_tool {toolPath}`
        plan_ended(told, plan, result)

Each tool of the plan gets an `execute_tool {toolPath}` span (the GenAI
conventions' tool span) under the plan's, covering all its attempts: its
retries as `retry` events, how it ended, its skill, its process's exit code.
A skipped tool gets a span too, as short as its skipping, so that a viewer
shows every tool of the plan. Tools that run together are children of the
plan's span all the same: trio starts a task in a copy of the context of
the task that started it.

A tool's input and output are content: on a span only while
`capturing_content()`. Without OpenTelemetry in the program these functions
return before building anything; the executor calls them only then, or in
branches a plan takes once per tool at most.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from ...generated.tool_plans import ExecutionResult, Plan, ToolError
from ..core.telemetry import (
    AttributeValue,
    Told,
    capturing_content,
    content_json,
    count,
    measure,
    span,
    tracing,
)
from .runs import ToolRun, call_input

__all__ = [
    "PLAN_SPAN",
    "plan_ended",
    "plan_span",
    "retried",
    "tool_attributes",
    "tool_ended",
    "tool_skipped",
    "tool_span_name",
    "tool_stopped",
]

PLAN_SPAN = "execute plan"


def plan_span(
    plan_id: str, *, parallel: bool, attempt: int, streamed: bool = False
) -> AbstractContextManager[Told]:
    """The `execute plan` span of the plan `plan_id`, current inside the block.

    `attempt` is the execution's attempt number; `streamed` whether its
    tools start while the plan is written (`streamed.py`).
    """
    if not tracing():  # `span` records nothing then: no attributes are built for it
        return span(PLAN_SPAN)
    attributes: dict[str, AttributeValue | None] = {
        "plancontracts.plan.id": plan_id,
        "plancontracts.plan.parallel": parallel,
        "plancontracts.plan.attempt": attempt,
        "plancontracts.plan.streamed": streamed or None,
    }
    return span(PLAN_SPAN, attributes)


def plan_ended(told: Told, plan: Plan, result: ExecutionResult) -> None:
    """Tell the plan's span and metrics how `plan` ended: `result`.

    A rejected plan's span fails with `error.type` `plancontracts.rejected`.
    """
    if not tracing():
        return
    skipped = sum(1 for tool in result.tool_results if tool.state == "skipped")
    told.update(
        {
            "plancontracts.plan.tools": len(plan.tools),
            "plancontracts.plan.success": result.success,
            "plancontracts.plan.failed": len(result.failed_tools),
            "plancontracts.plan.skipped": skipped,
        }
    )
    if isinstance(result.error, ToolError):
        told.fail("plancontracts.rejected", result.error.message)
    measure(
        "plancontracts.plan.duration",
        result.execution_time_ms / 1000,
        {"plancontracts.plan.success": result.success},
    )


def tool_span_name(run: ToolRun) -> str:
    """The name of `run`'s span: `execute_tool {toolPath}`."""
    return f"execute_tool {run.call.tool_path}"


def tool_attributes(run: ToolRun) -> dict[str, AttributeValue | None]:
    """The attributes `run`'s span starts with; its input among them while content is captured."""
    attributes: dict[str, AttributeValue | None] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": run.call.tool_path,
        "gen_ai.tool.call.id": run.call.tool_id,
        "gen_ai.tool.type": "function",
        "plancontracts.skill": run.skill,
    }
    if capturing_content():
        attributes["gen_ai.tool.call.arguments"] = content_json(call_input(run.call))
    return attributes


def retried(told: Told, attempt: int, error: ToolError) -> None:
    """Add a `retry` event to a tool's span: attempt number `attempt` starts after `error`."""
    if told.recording:
        told.event("retry", {"plancontracts.attempt": attempt, "error.type": error.category})


def tool_ended(told: Told, run: ToolRun) -> None:
    """Tell `run`'s span and the tool metrics how its attempts ended (its state is settled)."""
    told.update(
        {
            "plancontracts.tool.state": run.state,
            "plancontracts.tool.retries": run.retries,
            "plancontracts.tool.exit_code": run.exit_code,
        }
    )
    if run.state == "success":
        if run.output is not None and capturing_content():
            told.set("gen_ai.tool.call.result", content_json(run.output))
    elif run.error is not None:
        told.fail(run.error.category, run.error.message)
    error_type = run.error.category if run.error is not None else None
    _measured(run.call.tool_path, run.state, run.elapsed, error_type)


def tool_stopped(told: Told, run: ToolRun, elapsed: float) -> None:
    """Tell `run`'s span and metrics that the plan's deadline stopped it after `elapsed` s.

    Its run is settled afterwards (`scheduling.settle_at_deadline`): state `timeout`.
    """
    told.update(
        {
            "plancontracts.tool.state": "timeout",
            "plancontracts.tool.retries": run.retries,
            "plancontracts.tool.exit_code": run.exit_code,
        }
    )
    told.fail("timeout", "stopped at the plan's deadline")
    _measured(run.call.tool_path, "timeout", elapsed, "timeout")


def tool_skipped(run: ToolRun) -> None:
    """Record `run`, just skipped, as a span of its own: state `skipped`, nothing run."""
    if not tracing():
        return
    attributes = tool_attributes(run)
    attributes["plancontracts.tool.state"] = "skipped"
    attributes["plancontracts.tool.retries"] = 0
    with span(tool_span_name(run), attributes):
        pass


def _measured(tool_path: str, state: str, elapsed: float, error_type: str | None) -> None:
    """Record a tool call's duration, and a failure unless it succeeded."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.tool.name": tool_path,
        "plancontracts.tool.state": state,
    }
    measure("plancontracts.tool.duration", elapsed, attributes)
    if state != "success":
        if error_type is not None:
            attributes["error.type"] = error_type
        count("plancontracts.tool.failures", 1, attributes)
