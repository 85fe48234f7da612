"""The tool-plan family's rules beyond its contracts' schemas.

One contract has them: a `plan-attempt` record says why its plan was
rejected exactly when it was (`rejection` with outcome `rejected`, and no
failed tools then, since nothing ran). Plans themselves are judged by their
schema here; what only the executor can tell (cycles, unknown
dependencies, scripts) it tells as the result's `error`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...generated import PLAN_ATTEMPT
from ..core.errors import Violation, shown
from ..core.rules import Rules

__all__ = ["PLAN_ATTEMPT_RULES", "RULES"]


def _plan_attempt(value: Any) -> Iterator[Violation]:
    if not isinstance(value, dict):
        return  # the schema says what it should have been
    outcome = value.get("outcome")
    if not isinstance(outcome, str):
        return
    if outcome == "rejected":
        if "rejection" not in value:
            yield Violation("", 'missing "rejection", which a rejected plan\'s record holds')
        failures = value.get("failures")
        if isinstance(failures, list) and failures:
            yield Violation("/failures", "a rejected plan ran nothing, so no tool of it failed")
    elif "rejection" in value:
        yield Violation(
            "/rejection",
            "only a rejected plan's record says why it was rejected; "
            f"this one's outcome is {shown(outcome)}",
        )


PLAN_ATTEMPT_RULES = Rules(PLAN_ATTEMPT.name, "the plan attempt's rules", _plan_attempt)
RULES = {PLAN_ATTEMPT.name: PLAN_ATTEMPT_RULES}
