"""An execution result as text for people: one line per tool, then the outcome."""

from __future__ import annotations

import json
from typing import get_args, get_type_hints

from ...generated.tool_plans import ErrorEvent, ExecutionResult, LogEvent, ToolResult
from ..core.errors import printable
from ..core.plain_text import one_line

__all__ = ["EVENTS_SHOWN", "render_trace"]

# The contract's levels, least to most severe: debug, info, warn, error.
_LEVELS: tuple[str, ...] = get_args(get_type_hints(LogEvent)["level"])
_QUIET_FROM = _LEVELS.index("warn")
"Without verbosity, log events from this level up are shown."
EVENTS_SHOWN = 20
"The most event lines shown under one tool; the rest are counted (`--json` has them all)."
_MESSAGE_SHOWN = 300


def render_trace(result: ExecutionResult, *, verbosity: int = 0) -> str:
    """The readable form of `result`, ending with a newline.

    The first line says how the plan ended; then one line per tool with its
    state, time, retries and what it said (its summary, or why it failed),
    followed by the events it reported worth a reader's eye, one line each
    (its `error` events and its `log` events at `warn` or `error` level;
    `verbosity` 1 adds `info`, 2 adds `debug`), at most `EVENTS_SHOWN`, and
    by how many of its events were not kept, if any; then the failed tools,
    disabled skills, merged state and assets.
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
        lines.extend(_event_lines(trace, verbosity))
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


def _event_lines(trace: ToolResult, verbosity: int) -> list[str]:
    """The lines of `trace`'s events that `verbosity` shows, in the order they came."""
    levels = _LEVELS[max(0, _QUIET_FROM - verbosity) :]
    shown = []
    for event in trace.events:
        if isinstance(event, ErrorEvent):
            shown.append(f"error {event.error_code}: {event.error_message}")
        elif isinstance(event, LogEvent) and event.level in levels:
            shown.append(f"log {event.level}: {event.message}")
    lines = [f"    {one_line(text, _MESSAGE_SHOWN)}" for text in shown[:EVENTS_SHOWN]]
    if len(shown) > EVENTS_SHOWN:
        more = len(shown) - EVENTS_SHOWN
        lines.append(f"    and {more} more event{'s' if more > 1 else ''} (--json lists them)")
    return lines
