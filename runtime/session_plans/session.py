"""A session: the one plan an agent keeps, changed only by calls of the planning tools.

    from plancontracts.runtime.session_plans.session import Session

    session = Session()
    done = session.call("planning_setup_plan", {"objective": "Triage the open bug reports"})
    done.ok, done.message        # True, 'The plan is set up and active, with no steps yet.'
    session.latest               # the plan now: a frozen SessionPlan
    session.history              # every plan the session held, oldest first

Every call that changes the plan and succeeds adds exactly one snapshot, a
new frozen plan; a refused call adds none and leaves the latest as it was;
reading the plan adds none either. Snapshots are immutable and share the
steps a call left alone, so keeping them all costs little; `keep` bounds
how many are kept when a session runs for long.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import msgspec

from ...generated.session_plans import SessionPlan
from ..core.errors import ToolValidationError
from .handlers import HANDLERS
from .tools import TOOLS

__all__ = ["CallResult", "Session"]


@dataclass(frozen=True)
class CallResult:
    """What one tool call did: its result, or the error that refused it, and the plan after it."""

    tool: str
    "The name of the tool called."
    result: msgspec.Struct | None
    "What the tool returned (its arguments, trimmed, or the plan it read), or None if refused."
    error: ToolValidationError | None
    "Why the call was refused, or None if it succeeded."
    message: str
    "One line for the model: what the call did, or the error's text."
    plan: SessionPlan | None
    "The latest plan after the call (unchanged by a refused call); None before any."

    @property
    def ok(self) -> bool:
        """Whether the call succeeded."""
        return self.error is None


class Session:
    """One plan at a time, its snapshots kept for inspection.

    `keep` is how many snapshots the history keeps, the newest (None, the
    default: every one); the latest is always among them.
    """

    def __init__(self, *, keep: int | None = None) -> None:
        if keep is not None and keep < 1:
            raise ValueError(f"a session keeps at least its latest snapshot, not {keep}")
        self._snapshots: deque[SessionPlan] = deque(maxlen=keep)

    @property
    def latest(self) -> SessionPlan | None:
        """The plan now, or None before the first successful setup."""
        return self._snapshots[-1] if self._snapshots else None

    @property
    def history(self) -> tuple[SessionPlan, ...]:
        """The snapshots kept, oldest first: one per successful call that changed the plan."""
        return tuple(self._snapshots)

    def call(self, tool: str, arguments: Any) -> CallResult:
        """Call the tool named `tool` with `arguments`, a parsed JSON value (normally a dict).

        Never raises for a bad call: an unknown tool, arguments that break its
        contract and a plan whose state forbids the call are all a result
        whose `error` says why (a `ToolValidationError`).
        """
        latest = self.latest
        try:
            handler = HANDLERS[TOOLS.named(tool).name]  # UnknownToolError names the tools
            handled = handler(latest, arguments)
        except ToolValidationError as error:
            return CallResult(tool, None, error, str(error), latest)
        if handled.changed:
            self._snapshots.append(handled.plan)
        return CallResult(tool, handled.result, None, handled.message, self.latest)
