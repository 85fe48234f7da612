"""One tool of a plan as the executor keeps it: what it runs, its record, how its errors read.

A plan's tool runs either a skill script (a `Script`) or an in-process
function (a `ToolFunction`). Every part of the executor (the checks, the
scheduler, the attempts, the event sink, the result) reads and updates the
same `ToolRun` for it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import msgspec

from ...generated.tool_plans import (
    AssetReference,
    ToolError,
    ToolEvent,
    ToolInvocation,
    ToolRequest,
    UiEvent,
)
from ..core.contracts import field_bound
from .script_io import fit_text
from .skills import Script

__all__ = [
    "Asset",
    "EmitEvent",
    "ToolFunction",
    "ToolRun",
    "UiEventHandler",
    "call_input",
    "failure",
    "fit",
    "identity",
]

EmitEvent = Callable[[ToolEvent], None]
"How an in-process tool reports: the same events a script writes, as typed objects."
ToolFunction = Callable[[ToolRequest, EmitEvent], Awaitable[None]]
"""An in-process tool. Returning means success (unless it emitted `done` with ok
false); raising an exception means failure. Emitting `done` is optional."""
UiEventHandler = Callable[[str, UiEvent], None]
"Receives each `ui_event` as it arrives, with the `toolId` that emitted it."

_MESSAGE_LENGTH = field_bound(ToolError, "message", "max_length")
_CODE_LENGTH = field_bound(ToolError, "code", "max_length")


@dataclass(frozen=True, slots=True)
class Asset:
    """A registered asset and the identity of its file when it was registered."""

    reference: AssetReference
    device: int
    inode: int

    def swapped(self) -> bool:
        """Whether its path no longer leads, through no symbolic link, to that same regular file."""
        path = self.reference.path
        # The path was resolved at registration: one that resolves elsewhere now
        # has a link on its way, in a folder swapped for a link included.
        return os.path.realpath(path) != path or identity(path) != (self.device, self.inode)

    def refusal(self) -> ToolError:
        """The error of the tool that registered it, once it is `swapped`."""
        reference = self.reference
        return failure(
            "invalid_json",
            "asset_swapped",
            f"asset {reference.asset_id!r}: {reference.path} was replaced after it was "
            "registered (by another file, or a link on its path), so it is not reported",
        )


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the regular file at `path` itself, or None for anything else."""
    try:
        status = os.lstat(path)
    except OSError:
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


@dataclass(slots=True)
class ToolRun:
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
    exit_code: int | None = None
    """The exit status of its last attempt's process (negative for a signal); None for
    a function, or a process stopped before it exited."""
    output: dict[str, Any] | None = None
    patches: list[dict[str, Any]] = field(default_factory=list)
    "The state patches of its successful attempt."
    assets: list[Asset] = field(default_factory=list)
    "The assets of its successful attempt."

    @property
    def settled(self) -> bool:
        return self.state not in ("pending", "running")


def call_input(call: ToolInvocation) -> dict[str, Any]:
    """The input a call gives its tool: `{}` when it gives none."""
    return {} if isinstance(call.input, msgspec.UnsetType) else call.input


def failure(
    category: Literal["tool_failure", "timeout", "invalid_json", "process_error"],
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
) -> ToolError:
    """A failed attempt's error, its code and message cut to what the contract allows."""
    error = ToolError(category=category, code=code[:_CODE_LENGTH], message=fit(message))
    if details:
        error.details = details
    return error


def fit(message: str) -> str:
    """`message` cut to the length of a `ToolError` message."""
    return fit_text(message, _MESSAGE_LENGTH)
