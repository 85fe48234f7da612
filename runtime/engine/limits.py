"""The bounds of executing plans and replanning them: one home for each.

The numbers a contract sets (how many generations a turn may make, how many
executions a plan may have) are read from the generated types, so the schema
stays their one source; the rest are `Limits`, each execution's own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ...generated.tool_plans import ExecutionResult, PlanMetadata
from ..core.contracts import field_bound

__all__ = ["MAX_ATTEMPT_NUMBER", "MAX_GENERATIONS", "Limits"]

MAX_GENERATIONS = field_bound(PlanMetadata, "generation_attempt", "le")
"Plan generations for one player input: the first plan and its replans (the plan contract's)."
MAX_ATTEMPT_NUMBER = field_bound(ExecutionResult, "attempt_number", "le")
"Executions of one plan (the execution-result contract's `attemptNumber`)."


@dataclass(frozen=True, kw_only=True)
class Limits:
    """Bounds on one execution. Times are in seconds, sizes in bytes."""

    max_concurrency: int = field(default_factory=lambda: os.cpu_count() or 1)
    "Most tools running at once, for plans with `parallel` true."
    tool_timeout: float = 30.0
    "An attempt's deadline when neither the plan nor the skill manifest sets one."
    plan_timeout: float = 60.0
    shutdown_grace: float = 5.0
    "Between SIGTERM and SIGKILL when a script's process group is stopped."
    max_line_bytes: int = 1 << 20
    "Longest line a script may write; a longer one breaks the protocol."
    max_events: int = 1000
    "Most events one attempt may emit; one more breaks the protocol."
    max_stderr_bytes: int = 16 << 10
    "How much of a script's standard error is kept (the end of it) for the report."
    max_kept_event_bytes: int = 16 << 20
    """Most bytes of events one plan keeps in its trace, all tools and attempts
    together, each event counted as its JSON line. `log` and `ui_event` events
    may fill half of it; past that they are counted, not kept. Other events
    are always kept; one that does not fit fails its attempt."""

    def __post_init__(self) -> None:
        names = ("max_concurrency", "max_line_bytes", "max_events", "max_stderr_bytes",
                 "max_kept_event_bytes")  # fmt: skip
        for name in names:
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be at least 1")
        for name in ("tool_timeout", "plan_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be more than 0 seconds")
        if not self.shutdown_grace >= 0:
            raise ValueError("Limits.shutdown_grace must be 0 seconds or more")
