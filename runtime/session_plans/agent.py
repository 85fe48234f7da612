"""The local model keeping a session plan: it calls the planning tools, one call at a time.

    driver = Driver(load_writer(ModelChoice(), needs="a drive needs one"))  # once
    drive = await driver.drive("Triage the open bug reports", max_calls=8)
    drive.calls                                          # every call and its result
    drive.session.latest                                 # the plan at the end

Each call is written under `profiles.call_profile`, a decoding schema derived from the
tools' parameter contracts and the plan as it stands: a call names one of the
tools and its arguments pass that tool's contract and rules, by
construction. The plan's state can still refuse a call (no plan yet, a
completed one); the error goes back to the model as the tool's result, as
it would to any agent, and the model tries again. A drive ends when the plan
is completed or after `max_calls` calls.

The model reads the planning section, the objective, its last calls with
their results, and the plan as it stands (`prompts.drive_messages`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...generated.session_plans import SessionPlan
from ..core.errors import ContractError, ProfileBug
from ..core.sessions import ToolCall
from ..core.validation import convert
from ..model.writer import Writer, say_on_stderr
from .profiles import call_profile, checked_objective
from .prompts import PlanningStrategy, drive_messages
from .session import PlanSession
from .tools import TOOLS

__all__ = ["Drive", "Driver", "checked_objective"]

CALL_TOKENS = 400
"Enough for the longest call the profile allows."


@dataclass
class Drive:
    """A drive so far: the session the model keeps, and every call it made, in order."""

    objective: str
    session: PlanSession = field(default_factory=PlanSession)
    calls: list[ToolCall[SessionPlan | None]] = field(default_factory=list)

    @property
    def completed(self) -> bool:
        """Whether the plan is completed: the drive is over."""
        plan = self.session.latest
        return plan is not None and plan.status == "completed"


@dataclass
class Driver:
    """Keeps session plans with one loaded model."""

    writer: Writer
    say: Callable[[str], None] = say_on_stderr

    async def drive(
        self,
        objective: str,
        *,
        max_calls: int,
        strategy: PlanningStrategy = PlanningStrategy.REACT,
        seed: int | None = None,
        on_call: Callable[[ToolCall[SessionPlan | None]], None] | None = None,
        drive: Drive | None = None,
    ) -> Drive:
        """Let the model work toward `objective` with the tools, for at most `max_calls` calls.

        `on_call` is told of each call as soon as it is made. Pass `drive`
        to see the calls made so far if this raises. The model writes in a
        worker thread: cancelling stops it at its next token. Raises
        ValueError, before the model writes, for an objective the setup
        contract refuses (`checked_objective`: empty, too long, not printable
        ASCII) or `max_calls` below 1; GenerationFailed when the model writes no
        call that is accepted, after one re-ask with its violations (the
        prompt outgrew the model's context, say).
        """
        # Here, not at the top: every command imports the agents, and the loop brings trio.
        from ..model.writing import write_under_profile

        objective = checked_objective(objective)
        if max_calls < 1:
            raise ValueError(f"a drive makes at least 1 call, not {max_calls}")
        drive = drive if drive is not None else Drive(objective)
        while len(drive.calls) < max_calls and not drive.completed:
            plan = drive.session.latest
            messages = drive_messages(objective, drive.calls, plan, strategy)
            written = await write_under_profile(
                self.writer,
                messages,
                call_profile(plan, objective),
                answer="Tool call JSON",
                max_tokens=CALL_TOKENS,
                seed=seed,
                accept=_well_formed,
                say=self.say,
                who="drive",
            )
            call = _made(drive.session, written["tool"], written["arguments"])
            drive.calls.append(call)
            if on_call is not None:
                on_call(call)
        return drive


def _well_formed(written: dict[str, Any]) -> dict[str, Any]:
    """A call as written, once its arguments pass its tool's contract (ContractError if not)."""
    convert(TOOLS.named(written["tool"]).parameters, written["arguments"])
    return written


def _made(
    session: PlanSession, name: str, arguments: dict[str, Any]
) -> ToolCall[SessionPlan | None]:
    """Apply the call the model wrote, first checking that the profile kept it well formed."""
    tool = TOOLS.named(name)
    try:
        convert(tool.parameters, arguments)
    except ContractError as error:
        raise ProfileBug(f"a {name} call broke its contract: {error}") from None
    return ToolCall(name, arguments, session.call(name, arguments))
