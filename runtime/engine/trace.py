"""An execution result as text for people: one line per tool, then the outcome."""

from __future__ import annotations

import json

from ...generated.tool_plans import ExecutionResult, ToolResult
from ..core.errors import printable

__all__ = ["render_trace"]


def render_trace(result: ExecutionResult) -> str:
    """The readable form of `result`, ending with a newline.

    The first line says how the plan ended; then one line per tool with its
    state, time, retries and what it said (its summary, or why it failed),
    followed by how many of its events were not kept, if any; then the failed
    tools, disabled skills, merged state and assets.
    """
    seconds = result.execution_time_ms / 1000
    if result.error:
        error = result.error
        return (
            f"plan {result.plan_id} rejected before execution: "
            f"{error.category}: {printable(error.message)}\n"
        )
    verdict = "succeeded" if result.success else "failed"
    lines = [
        f"plan {result.plan_id} {verdict} in {seconds:.2f} s (attempt {result.attempt_number})"
    ]
    width = max((len(trace.tool_id) for trace in result.tool_results), default=0)
    for trace in result.tool_results:
        lines.append(_tool_line(trace, width))
        if trace.dropped_events:
            dropped = trace.dropped_events
            lines.append(
                f"    {dropped.count} log and ui_event events ({dropped.bytes} bytes) not kept: "
                "the plan's budget for kept events was spent"
            )
    if result.failed_tools:
        lines.append(f"failed tools: {', '.join(result.failed_tools)}")
    if result.disabled_skills:
        lines.append(f"disabled skills: {', '.join(result.disabled_skills)}")
    if not result.success:
        lines.append("a new plan may do better" if result.can_replan else "no replan left")
    lines.append(f"state: {json.dumps(result.aggregated_state, ensure_ascii=False)}")
    lines.extend(
        f"asset {asset.asset_id} ({asset.kind}, {asset.media_type}): {asset.path}"
        for asset in result.aggregated_assets
    )
    return "".join(printable(line) + "\n" for line in lines)


def _tool_line(trace: ToolResult, width: int) -> str:
    retries = f"{trace.retry_count} retr{'y' if trace.retry_count == 1 else 'ies'}"
    seconds = trace.execution_time_ms / 1000
    line = f"  {trace.tool_id:<{width}}  {trace.state:<7}  {seconds:6.2f} s  {retries:<10}"
    if trace.error:
        code = f" {trace.error.code}" if trace.error.code else ""
        line += f"  {trace.error.category}{code}: {trace.error.message}"
    elif trace.output and isinstance(trace.output.get("summary"), str):
        line += f"  {trace.output['summary']}"
    return line.rstrip()
