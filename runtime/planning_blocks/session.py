"""A planning session between turns: the game clock and the frozen plans (seed 000's freezes).

    session = new_session()                                   # or decode(PLANNING_SESSION, ...)
    verdict, session = may_think(session, "vault_heist")      # refused while frozen
    ... thought = await thinker.think("THINK: the vault", ...) # only when verdict.allowed
    session, frozen = after_thought(session, thought, "vault_heist")

A Think-mode check that fails freezes its topic for the hours its DC sets,
from the moment it was rolled; thinking about a frozen topic again is
refused before any roll, with the time left, until game time passes its end
(Story-mode turns move the clock) or an early break lifts it. Everything here
is a pure function of the session it is given: `think --state FILE` keeps the
session in a file between invocations.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import msgspec

from ...generated.planning_blocks import FrozenPlan, PlanningSession
from ..core.contracts import field_bound
from ..core.plain_text import one_line
from .mechanics import EarlyBreak, GameClock, Reattempt, advance, freeze, reattempt, thaw

if TYPE_CHECKING:
    from .agent import Thought

__all__ = ["MINUTE", "after_thought", "may_think", "new_session"]

MINUTE = 60_000_000
"One game minute in microseconds."
_DESCRIPTION = field_bound(FrozenPlan, "description", "max_length")


def new_session() -> PlanningSession:
    """A session at the start of a campaign: time 0, turn 0, nothing frozen."""
    return PlanningSession(time=0, turn=0, frozen_plans={})


def may_think(
    session: PlanningSession, topic: str, *, breaks: Iterable[EarlyBreak] = ()
) -> tuple[Reattempt, PlanningSession]:
    """Whether `topic` may be planned now, and the session with any ended or lifted freeze gone.

    `breaks` lift a freeze early (see `mechanics.reattempt`). Raises
    ValueError for something that is not an early break.
    """
    verdict = reattempt(session.frozen_plans, topic, now=session.time, breaks=breaks)
    return verdict, msgspec.structs.replace(session, frozen_plans=verdict.frozen_plans)


def after_thought(
    session: PlanningSession, thought: Thought, topic: str, *, elapsed: int | None = None
) -> tuple[PlanningSession, FrozenPlan | None]:
    """The session after `thought`, and the frozen plan its failed check made, if it made one.

    Think mode moves the clock by one microsecond and keeps the turn; a
    failed check freezes `topic` from the moment it was rolled (the clock's
    time before the move), described as `planning <the situation>`. Story
    mode moves the clock by `elapsed` microseconds (required) and the turn
    by one. Freezes that have ended by the new time are dropped. Raises
    ValueError as `mechanics.advance` and `mechanics.freeze` do: a missing
    `elapsed` in Story mode, one given in Think mode, a time past the
    contract's bound, a topic that is not a topic key.
    """
    clock = advance(GameClock(session.time, session.turn), thought.mode, elapsed=elapsed)
    frozen = thaw(session.frozen_plans, clock.time)
    made = None
    check = thought.check
    if check is not None and not check.outcome.success:
        description = one_line(f"planning {thought.situation}", _DESCRIPTION)
        frozen = freeze(frozen, topic, dc=check.dc, now=session.time, description=description)
        made = frozen[topic]
    return PlanningSession(time=clock.time, turn=clock.turn, frozen_plans=frozen), made
