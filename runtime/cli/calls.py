"""Reading one tool call from a line of NDJSON: `{"tool": NAME, "arguments": {...}}`.

The families' `run` commands apply such lines to a session, in order; a line
that is no call is refused before any tool sees it, and what it named as its
tool, if anything, is kept for the outcome line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.errors import Violation, shown
from ..core.jsontext import MalformedJSON, parse

__all__ = ["CALL_SHAPE", "Call", "NoCall", "read_call"]

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
