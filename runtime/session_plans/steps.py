"""Step ids (`S001`...) and the plan's limits, read from the `session-plan` schema.

A plan's steps are numbered from 1 in the order they were added, and no step
is ever removed from a plan, so the highest id a plan can reach is its most
steps (`steps.maxItems`): ids are as wide as that number is long.
"""

from __future__ import annotations

import re
from functools import cache

from ...generated import SESSION_PLAN
from ...generated.session_plans import PlanStep, SessionPlan
from ..core.contracts import contract_schema, field_bound

__all__ = ["MAX_NOTES", "MAX_OBJECTIVE", "MAX_STEPS", "id_pattern", "step_id", "step_number"]

MAX_STEPS = field_bound(SessionPlan, "steps", "max_length")
"Most steps in a plan, and so the highest step number: 999, S999."
MAX_NOTES = field_bound(PlanStep, "notes", "max_length")
"Most notes a step keeps."
MAX_OBJECTIVE = field_bound(SessionPlan, "objective", "max_length")
"Most characters in a plan's objective."
_DIGITS = len(str(MAX_STEPS))


def step_id(number: int) -> str:
    """The id of step `number` (1 to `MAX_STEPS`): `S001` for 1. Raises ValueError past them."""
    if not 1 <= number <= MAX_STEPS:
        raise ValueError(f"step numbers run from 1 to {MAX_STEPS}, not {number}")
    return f"S{number:0{_DIGITS}d}"


def step_number(text: str) -> int | None:
    """The number of the step id `text` (`S004` -> 4), or None when it is not a step id."""
    if not id_pattern().fullmatch(text):
        return None
    return int(text[1:])


@cache
def id_pattern() -> re.Pattern[str]:
    """The pattern of step ids, as the `session-plan` schema gives it."""
    pattern: str = contract_schema(SESSION_PLAN)["$defs"]["step-id"]["pattern"]
    return re.compile(pattern)
