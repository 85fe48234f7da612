"""A session: the one plan an agent keeps, changed only by calls of the planning tools.

    from plancontracts.runtime.session_plans import PlanSession

    session = PlanSession()
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

from ...generated.session_plans import SessionPlan
from ..core.sessions import Handled, ToolSession
from .handlers import HANDLERS

__all__ = ["PlanSession"]


class PlanSession(ToolSession[SessionPlan | None, None]):
    """One plan at a time, its snapshots kept for inspection.

    `keep` is how many snapshots the history keeps, the newest (None, the
    default: every one); the latest is always among them.
    """

    def __init__(self, *, keep: int | None = None) -> None:
        if keep is not None and keep < 1:
            raise ValueError(f"a session keeps at least its latest snapshot, not {keep}")
        super().__init__(HANDLERS, None, None)
        self._snapshots: deque[SessionPlan] = deque(maxlen=keep)

    @property
    def latest(self) -> SessionPlan | None:
        """The plan now, or None before the first successful setup."""
        return self.state

    @property
    def history(self) -> tuple[SessionPlan, ...]:
        """The snapshots kept, oldest first: one per successful call that changed the plan."""
        return tuple(self._snapshots)

    def adopt(self, tool: str, handled: Handled[SessionPlan | None]) -> SessionPlan | None:
        if handled.changed and handled.state is not None:
            self._snapshots.append(handled.state)
        return handled.state
