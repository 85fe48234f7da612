"""How many examples a property test draws: the tier's count, or fewer where each is slow.

The tiers' hypothesis profiles (conftest.py) set the count: 1,000 in the full
tier, tens in the fast one (`--fast`). A test whose examples are slow (a
process each, a whole simulated session) draws at most its own cap, which the
full tier reaches and the fast tier stays under: no test pins a count that
ignores the tier.
"""

from __future__ import annotations

from hypothesis import settings


def examples_at_most(cap: int) -> int:
    """The tier's count of examples, at most `cap`: for `settings(max_examples=...)`.

    Read when a test module is imported, after the tier's profile is loaded.
    """
    return min(settings().max_examples, cap)
