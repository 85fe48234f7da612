"""The decoding profile a goal's steps are written under, derived from `goal-plan-output`.

2 to 6 steps, strings within `PLAN_BOUNDS`, cycles 1 to 5: every answer
written under it is a valid output by construction.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ...generated import GOAL_PLAN_OUTPUT
from ..core.profiles import Bounds, contract_profile

__all__ = ["PLAN_BOUNDS", "output_profile"]

PLAN_BOUNDS = Bounds(string=100, items=6)
"Steps of at most 100 characters per text: a small model writes a plan in seconds."


@cache
def _profile() -> dict[str, Any]:
    return contract_profile(GOAL_PLAN_OUTPUT, PLAN_BOUNDS)


def output_profile() -> dict[str, Any]:
    """The decoding schema of the model's steps, derived from the `goal-plan-output` contract."""
    return _profile()
