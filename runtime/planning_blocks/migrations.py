"""How frozen plans and planning sessions read WorldArchitect's world-time strings.

WorldArchitect (seed 000) records a frozen plan's `failed_at` and
`freeze_until` as world-time strings (`"<current_world_time>"`), where the
`frozen-plans` contract keeps game time as whole microseconds since the
start of the campaign, so that Think mode's one-microsecond step is exact.
Turning one into the other needs the campaign's calendar, which the
documents do not hold: the option `calendar` gives the moment the campaign
starts, as an ISO 8601 date and time (`1492-03-01T08:00:00`), and each
world-time string, written the same way, becomes the microseconds from it
(the proleptic Gregorian calendar; fractions of a second to the
microsecond). Without the option, the step stops with one line naming it.
A planning session holding such frozen plans is upgraded the same way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from ...generated import FROZEN_PLANS, PLANNING_SESSION
from ..core.migrations import MigrationStep

__all__ = ["MIGRATIONS", "WORLD_TIME_FROZEN_PLANS", "WORLD_TIME_SESSION", "game_time"]

_TIMES = ("failed_at", "freeze_until")
_CALENDAR = (
    "calendar",
    "the moment the campaign starts, as an ISO 8601 date and time such as "
    "1492-03-01T08:00:00: world-time strings become microseconds from it",
)


def game_time(world_time: str, start: str) -> int:
    """`world_time`, an ISO 8601 date and time, as microseconds of game time from `start`.

    Raises ValueError, in one line, when either is not a date and time, has
    a time zone, or `world_time` is before `start`.
    """
    began = _moment(start, "the option calendar")
    when = _moment(world_time, "a world time")
    if when < began:
        raise ValueError(f"world time {world_time!r} is before the campaign's start {start!r}")
    elapsed = when - began
    return (elapsed.days * 86_400 + elapsed.seconds) * 1_000_000 + elapsed.microseconds


def _moment(text: str, what: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{what} {text[:80]!r} is not an ISO 8601 date and time (such as 1492-03-01T08:00:00)"
        ) from None
    if moment.tzinfo is not None:
        raise ValueError(f"{what} {text[:80]!r} has a time zone: game time has none")
    return moment


def _old_frozen(value: Any) -> bool:
    return isinstance(value, dict) and any(
        isinstance(plan, dict) and any(isinstance(plan.get(key), str) for key in _TIMES)
        for plan in value.values()
    )


def _frozen(value: Any, options: Mapping[str, str], where: str) -> tuple[Any, list[str]]:
    start = options.get("calendar")
    if start is None:
        raise ValueError(
            "world-time strings need the campaign's calendar: give the option calendar, "
            "the campaign's start as an ISO 8601 date and time (--calendar 1492-03-01T08:00:00)"
        )
    notes: list[str] = []
    upgraded: dict[str, Any] = {}
    for topic, plan in value.items():
        if isinstance(plan, dict):
            plan = dict(plan)
            for key in _TIMES:
                text = plan.get(key)
                if isinstance(text, str):
                    plan[key] = game_time(text, start)
                    notes.append(
                        f"{where}{topic}.{key}: world time {text!r} -> {plan[key]} µs "
                        f"since the campaign's start {start}"
                    )
        upgraded[topic] = plan
    return upgraded, notes


def _upgrade_frozen(value: Any, options: Mapping[str, str]) -> tuple[Any, Sequence[str]]:
    return _frozen(value, options, "")


def _old_session(value: Any) -> bool:
    return isinstance(value, dict) and _old_frozen(value.get("frozen_plans"))


def _upgrade_session(value: Any, options: Mapping[str, str]) -> tuple[Any, Sequence[str]]:
    frozen, notes = _frozen(value["frozen_plans"], options, "frozen_plans.")
    return {**value, "frozen_plans": frozen}, notes


WORLD_TIME_FROZEN_PLANS = MigrationStep(
    contract=FROZEN_PLANS.name,
    reads=0,
    writes=1,
    name="WorldArchitect world-time strings",
    recognizes=_old_frozen,
    upgrade=_upgrade_frozen,
    options=dict([_CALENDAR]),
)
"WorldArchitect's frozen plans, their world-time strings as microseconds by the option calendar."

WORLD_TIME_SESSION = MigrationStep(
    contract=PLANNING_SESSION.name,
    reads=0,
    writes=1,
    name="WorldArchitect world-time strings",
    recognizes=_old_session,
    upgrade=_upgrade_session,
    options=dict([_CALENDAR]),
)
"A planning session whose frozen plans hold world-time strings: upgraded as those are."

MIGRATIONS = {
    FROZEN_PLANS.name: (WORLD_TIME_FROZEN_PLANS,),
    PLANNING_SESSION.name: (WORLD_TIME_SESSION,),
}
