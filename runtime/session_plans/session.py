"""A session: the one plan an agent keeps, changed only by calls of the planning tools.

    from plancontracts.runtime.session_plans import PlanSession

    session = PlanSession()
    unsubscribe = session.subscribe(print)  # told of each call: a SessionToolEvent
    done = session.call("planning_setup_plan", {"objective": "Triage the open bug reports"})
    done.ok, done.message        # True, 'The plan is set up and active, with no steps yet.'
    session.latest               # the plan now: a frozen SessionPlan
    session.history              # every plan the session held, oldest first

Every call that changes the plan and succeeds adds exactly one snapshot, a
new frozen plan; a refused call adds none and leaves the latest as it was;
reading the plan adds none either. Snapshots are immutable and share the
steps a call left alone, so keeping them all costs little; `keep` bounds
how many are kept when a session runs for long.

Every call, refused or not, is also told to the session's subscribers as a
`SessionToolEvent` (the `session-tool-event` contract), once it is done.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import count
from typing import Any

import msgspec

from ...generated.session_plans import Refusal, RefusalViolation, SessionPlan, SessionToolEvent
from ..core.sessions import CallResult, Handled, ToolSession
from .handlers import HANDLERS

__all__ = ["PlanSession", "Subscriber", "SubscriberFailed"]

Subscriber = Callable[[SessionToolEvent], None]
"Told of each call of a session once it is done (`PlanSession.subscribe`)."
SubscriberFailed = Callable[[SessionToolEvent, Exception], None]
"Told of a subscriber that raised: the event it was given and what it raised."

log = logging.getLogger("plancontracts.session")


def _logged(event: SessionToolEvent, error: Exception) -> None:
    """The default `on_subscriber_error`: one line on the `plancontracts.session` logger."""
    log.error(
        "a subscriber of session %s failed on call %d (%s): %s: %s",
        event.session_id,
        event.sequence,
        event.tool,
        type(error).__name__,
        error,
    )


class PlanSession(ToolSession[SessionPlan | None, None]):
    """One plan at a time, its snapshots kept for inspection, each call told to subscribers.

    `keep` is how many snapshots the history keeps, the newest (None, the
    default: every one); the latest is always among them. `session_id`
    names the session in its events (None, the default: a random UUID).
    `on_subscriber_error` is told of a subscriber that raised (the default
    logs one line on the `plancontracts.session` logger, at ERROR level).
    Raises ValueError for a `keep` below 1 or a `session_id` that is no UUID.
    A session is for one thread: calls and subscriptions are not locked.
    """

    def __init__(
        self,
        *,
        keep: int | None = None,
        session_id: str | None = None,
        on_subscriber_error: SubscriberFailed = _logged,
    ) -> None:
        if keep is not None and keep < 1:
            raise ValueError(f"a session keeps at least its latest snapshot, not {keep}")
        super().__init__(HANDLERS, None, None)
        self._snapshots: deque[SessionPlan] = deque(maxlen=keep)
        # The contract's hyphenated form, whatever form of UUID was given.
        self.session_id = str(uuid.uuid4() if session_id is None else uuid.UUID(session_id))
        self._on_subscriber_error = on_subscriber_error
        self._calls = 0
        self._subscribers: dict[int, Subscriber] = {}
        self._tokens = count()
        self._untold: deque[SessionToolEvent] = deque()
        self._telling = False

    @property
    def latest(self) -> SessionPlan | None:
        """The plan now, or None before the first successful setup.

        The seed's `select_latest(session, Plan)`: a session holds one plan,
        so it needs no type to pick it by.
        """
        return self.state

    @property
    def history(self) -> tuple[SessionPlan, ...]:
        """The snapshots kept, oldest first: one per successful call that changed the plan."""
        return tuple(self._snapshots)

    @property
    def calls(self) -> int:
        """How many calls the session took, refused ones included: the last event's `sequence`."""
        return self._calls

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        """Tell `subscriber` of every call from now on; returns the function that stops it.

        Subscribers are told in the order they subscribed, each event once
        the call is done and its plan kept, so `latest` is already the plan
        after it. A subscriber that raises an Exception changes nothing of
        the call (its result stands, and so does its plan): the error goes
        to `on_subscriber_error` and the other subscribers are still told.
        A call a subscriber makes is told after the event being told, so
        every subscriber sees the events in `sequence` order. An event holds
        the call's own arguments object: a subscriber reads it, never
        changes it. The same function subscribed twice is told twice;
        stopping it twice is harmless.
        """
        token = next(self._tokens)
        self._subscribers[token] = subscriber

        def unsubscribe() -> None:
            self._subscribers.pop(token, None)

        return unsubscribe

    @property
    def conversation_id(self) -> str:
        """The session's id, on its calls' spans as on its events."""
        return self.session_id

    def call(self, tool: str, arguments: Any) -> CallResult[SessionPlan | None]:
        """Call the tool `tool` with `arguments`, as `ToolSession.call` does, then tell subscribers.

        Never raises for a bad call; an exception a subscriber raises is
        reported, not raised (`subscribe`).
        """
        started = time.monotonic()
        done = super().call(tool, arguments)
        seconds = time.monotonic() - started
        self._calls += 1
        if self._subscribers:  # with no one to tell, the event is not made
            self._tell(_event(self.session_id, self._calls, arguments, done, seconds))
        return done

    def adopt(self, tool: str, handled: Handled[SessionPlan | None]) -> SessionPlan | None:
        if handled.changed and handled.state is not None:
            self._snapshots.append(handled.state)
        return handled.state

    def _tell(self, event: SessionToolEvent) -> None:
        """Tell every subscriber of `event`, after any event still being told."""
        self._untold.append(event)
        if self._telling:  # a subscriber made a call: its event waits its turn
            return
        self._telling = True
        try:
            while self._untold:
                told = self._untold.popleft()
                # A copy: a subscriber may unsubscribe (or subscribe) while it is told.
                for subscriber in tuple(self._subscribers.values()):
                    try:
                        subscriber(told)
                    except Exception as error:  # any: the call's result stands whatever it is
                        self._on_subscriber_error(told, error)
        finally:
            self._telling = False
            self._untold.clear()  # only left by an interruption (Ctrl-C) on the way


def _event(
    session_id: str,
    sequence: int,
    arguments: Any,
    done: CallResult[SessionPlan | None],
    seconds: float,
) -> SessionToolEvent:
    """The event of one call that took `seconds`."""
    error = done.error
    # As JSON has it (lists, not the frozen plan's tuples): what a reader of the
    # events file decodes, and nothing a subscriber could change of the plan.
    result = None if done.result is None else msgspec.json.decode(msgspec.json.encode(done.result))
    refusal = None
    if error is not None:
        violations = [
            RefusalViolation(pointer=v.pointer, message=v.message) for v in error.violations
        ]
        refusal = Refusal(field=error.field, message=done.message, violations=violations)
    return SessionToolEvent(
        session_id=session_id,
        sequence=sequence,
        tool=done.tool,
        # The contract's arguments are an object: what else a call gave, its error says.
        arguments=arguments if isinstance(arguments, dict) else None,
        ok=done.ok,
        message=done.message,
        result=result,
        error=refusal,
        duration_seconds=seconds,
        ended_at=_now(),
    )


def _now() -> str:
    """Now, in UTC, to the millisecond, in the contract's form: `2026-11-27T07:30:00.125Z`."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").removesuffix("+00:00") + "Z"
