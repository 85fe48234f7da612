"""Tool calls from lines of NDJSON, `{"tool": NAME, "arguments": {...}}`, and their outcomes.

The families' `run` commands apply such lines to a session of tool calls
(`core.sessions.ToolSession`), in order (`run_calls`); a line that is no
call is refused before any tool sees it, and what it named as its tool, if
anything, is kept for the outcome line. Each call's outcome is one line of
JSON (`outcome`), written at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from ..core.errors import (
    MalformedJSON,
    StreamError,
    ToolValidationError,
    UsageError,
    Violation,
    shown,
)
from ..core.jsontext import parse
from ..core.sessions import CallResult, ToolSession
from .base import EXIT_INVALID, EXIT_OK, Output, label, reason
from .inputs import lines_of, opened, unreadable

__all__ = ["CALL_SHAPE", "Call", "NoCall", "outcome", "read_call", "run_calls"]

CALL_SHAPE = '{"tool": NAME, "arguments": {...}}'
"What a call line holds; `arguments` may be left out when a tool takes none."
_CALL_KEYS = ("tool", "arguments")


@dataclass(frozen=True)
class Call:
    """A line that is a call: the tool's name and its arguments, still to be checked by the tool."""

    tool: str
    arguments: Any


@dataclass(frozen=True)
class NoCall:
    """A line that is no call, and why; `tool` is the name it gave, if it gave a string."""

    tool: str | None
    message: str


def read_call(line: bytes | Violation, tools: str) -> Call | NoCall:
    """The call on one line of NDJSON (or the violation `lines_of` found instead of a line).

    `tools` names the family's tools for a line whose `"tool"` is no string,
    such as `a planning tool: planning_setup_plan, ...`.
    """
    if isinstance(line, Violation):
        return NoCall(None, line.message)
    try:
        call = parse(line)
    except MalformedJSON as error:
        return NoCall(None, error.message)
    if not isinstance(call, dict):
        return NoCall(None, f"a call is an object {CALL_SHAPE}")
    tool = call.get("tool")
    named = tool if isinstance(tool, str) else None
    extra = next((key for key in call if key not in _CALL_KEYS), None)
    if extra is not None:
        return NoCall(named, f"unknown field {shown(extra)} in the call: a call is {CALL_SHAPE}")
    if named is None:
        return NoCall(None, f'"tool" must name {tools}')
    return Call(named, call.get("arguments", {}))


def outcome(done: CallResult[Any]) -> dict[str, Any]:
    """The tool, whether the call succeeded, and its message and result, or its error.

    The error is its `field` (a JSON Pointer into the arguments, or null)
    and `message`, with the `violations` of a document it refused, if any.
    """
    record: dict[str, Any] = {"tool": done.tool or None, "ok": done.ok}
    if done.error is None:
        record["message"] = done.message
        record["result"] = done.result
        return record
    error: dict[str, Any] = {"field": done.error.field, "message": done.message}
    if done.error.violations:
        error["violations"] = [
            {"pointer": each.pointer, "message": each.message} for each in done.error.violations
        ]
    record["error"] = error
    return record


def run_calls(
    path: str,
    max_bytes: int,
    out: Output,
    session: ToolSession[Any, Any],
    after: Callable[[], dict[str, Any]],
) -> int:
    """Apply each line of the file `path` (`-`: standard input) to `session`, in order.

    Each line's outcome is written at once, as one line of JSON: its number,
    `outcome(done)`, then what `after()` adds (the plan after the call,
    say). Returns the exit status: EXIT_OK when every call succeeded,
    EXIT_INVALID when any was refused. Raises UsageError when the file
    cannot be opened and StreamError when it cannot be read.
    """
    try:
        calls = opened(path)
    except OSError as error:
        raise UsageError(f"{label(path)}: {unreadable(error)}") from None
    names = ", ".join(tool.name for tool in session.tools)
    tools = f"a {session.tools.kind} tool: {names}"
    status = EXIT_OK
    try:
        with calls as stream:
            for number, line in lines_of(stream, max_bytes):
                done = _apply_call(session, line, tools)
                record = {"line": number, **outcome(done), **after()}
                out.write(msgspec.json.encode(record).decode() + "\n")
                out.flush()  # a reader of a pipe sees each call as it is applied
                if not done.ok:
                    status = EXIT_INVALID
    except OSError as error:
        raise StreamError(f"cannot read {label(path)}: {reason(error)}") from error
    return status


def _apply_call(
    session: ToolSession[Any, Any], line: bytes | Violation, tools: str
) -> CallResult[Any]:
    """Apply one line's call to `session`; a line that is no call is refused, as of no tool."""
    call = read_call(line, tools)
    if isinstance(call, NoCall):
        name = call.tool or ""
        return session.refuse(name, ToolValidationError(name, None, call.message))
    return session.call(call.tool, call.arguments)
