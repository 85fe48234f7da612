"""The local model building a story package through the eight tools, one call at a time.

    builder = Builder(load_writer(ModelChoice(), needs="a build needs one"))  # once
    build = await builder.build("A keeper finds ...", acts=1)  # a whole package
    build.calls                                                # every call and its result
    build.package                                              # the package, or None

The pipeline is strict, so the code sequences it (`profiles.steps`): the premise,
one character (two when there is more than one act), then per act its
outline, its node web, the encounters of each location and the finalizing
of each location, and last `finalizePackage`. The model writes each call's
arguments under a decoding profile (`profiles.Step.profile`) derived from the tool's
input contract with tight bounds (`BUILD_BOUNDS`), and narrowed by the
draft so that the package holds together by construction:

- the code fills every id (characters `char_1`, acts `act_1`, locations
  `loc_1`, encounters `act_1_loc_1_1`), the premise's text, the key of a
  location's background (its id), the package's title (the premise's) and
  a music prompt's weight; and leaves empty the lists the contract lets be
  empty and nothing here needs (motifs, hidden truths);
- the model writes every other required field, and of the optional ones
  only those the package's rules rest on (`NEEDED`): an act's progress
  tracker, an encounter's progression, flags and prerequisites, and the
  characters required;
- references are enums of what exists: the characters proposed so far,
  and as prerequisites the flags that encounters drafted by earlier calls
  set (none while there are none);
- location i connects to location i + 1, and the last to the first, so
  every location is reachable from the act's first and leads back to it;
  one other connection at most is the model's choice;
- the package's shape is the caller's (`profiles.Shape`: acts, locations
  an act, encounters a location, each within its schema's bounds); each
  encounter gives 1 to `MAX_PROGRESSION`, and the act's required progress
  is at most one less than the number of its encounters: the act can be
  completed without any one of them, so by more than one path, and no
  encounter is a dead end.

A call whose every field the code fills (`finalizePackage`) is made without
the model. Each call the model writes is checked against its tool's
contract before it is made; one that breaks it is a `ProfileBug`. A call the
draft still refuses is made again, its refusal in the prompt; a package
`finalizePackage` refuses sends its report to the model, which makes one
repair call (`updateElement`, or new encounters for a location) before the
package is finalized again. Every call counts toward `max_calls`: when they
run out, the build stops where it is, without a package, and the draft
keeps every call that succeeded.

A `Driver` is the model as the seed's co-author: it chooses which tool to
call next, and every argument, under `profiles.drive_profile` (the tools
the draft's state leaves open, each its whole input contract within
`DRIVE_BOUNDS`). Nothing is sequenced or filled by the code but the
premise's text: the draft's handlers judge each call, and what they say,
the result or the refusal with its violations, is what the model reads
before its next call (`prompts.drive_messages`). A drive ends when the
package is finalized or after `max_calls` calls; given a session that a
store keeps, it goes on from the draft saved there.

    driver = Driver(load_writer(ModelChoice(), needs="a drive needs one"))
    drive = await driver.drive(Drive.started("A keeper finds ..."), max_calls=12)
    drive.calls, drive.package
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ...generated import (
    STORY_FINALIZE_PACKAGE,
)
from ...generated.story_packages import StoryDraft, StoryPackage, StoryPremise
from ..core.contracts import field_bound
from ..core.errors import ContractError, ProfileBug, Violation, Violations, shown
from ..core.plain_text import given_text
from ..core.sessions import CallResult, ToolCall
from ..core.validation import convert
from ..model.writer import Writer, say_on_stderr
from .profiles import (
    Shape,
    Step,
    drive_profile,
    drive_tools,
    pipeline_length,
    repair_step,
    steps,
)
from .prompts import (
    build_messages,
    drive_messages,
)
from .session import DraftSession
from .tools import TOOLS

__all__ = [
    "DRIVE_CALLS",
    "MAX_DRIVE_CALLS",
    "SPARE_CALLS",
    "Build",
    "Builder",
    "Drive",
    "Driver",
    "checked_premise",
]

CALL_TOKENS = 800
"Enough for the longest call a profile allows."
SPARE_CALLS = 4
"Calls a build has beyond its pipeline by default, for refusals and repairs."
DRIVE_CALLS = pipeline_length(Shape()) + SPARE_CALLS
"The calls a drive makes by default: a build's of the default shape, and spares for refusals."
MAX_DRIVE_CALLS = 100
"""The most calls one drive may be given, as a build's `--max-calls`: a three-act story.

The model reads only its last calls (`prompts.RECENT_CALLS`), so the bound is
one of time, not of context; a story longer still is driven again with
`--db`, going on from its saved draft."""


@dataclass
class Build:
    """A build so far: the premise, the session it drafts in, and every call it made, in order."""

    premise: str
    session: DraftSession
    calls: list[ToolCall[StoryDraft]] = field(default_factory=list)

    @property
    def package(self) -> StoryPackage | None:
        """The finalized package, or None while there is none."""
        return self.session.package


def checked_premise(text: str) -> str:
    """`text` trimmed, as the premise of a build. Raises ValueError when empty or too long."""
    return given_text(text, "the premise", field_bound(StoryPremise, "premise", "max_length"))


@dataclass
class Builder:
    """Builds story packages with one loaded model (or any `Writer`)."""

    writer: Writer
    say: Callable[[str], None] = say_on_stderr

    async def build(
        self,
        premise: str,
        *,
        acts: int = Shape.acts,
        locations: int = Shape.locations,
        encounters: int = Shape.encounters,
        max_calls: int | None = None,
        seed: int | None = None,
        on_call: Callable[[ToolCall[StoryDraft]], None] | None = None,
        session: DraftSession | None = None,
    ) -> Build:
        """Build a package of `premise`: `acts` acts of `locations` locations of `encounters` each.

        At most `max_calls` calls are made (default: the pipeline's, plus
        `SPARE_CALLS`); `on_call` is told of each as soon as it is made.
        `session` is where the draft is kept (default: a new one that saves
        nothing); it must hold no premise yet. The model writes in a worker
        thread: cancelling stops it at its next token. Raises ValueError for
        an empty or too long premise, a size outside its schema's bounds
        (`Shape.checked`), `max_calls` below 1 or a session that has a
        premise; GenerationFailed when the model writes no
        call that is accepted, after one re-ask with its violations (the
        prompt outgrew the model's context, say).
        """
        premise = checked_premise(premise)
        shape = Shape(acts, locations, encounters).checked()
        calls = max_calls if max_calls is not None else pipeline_length(shape) + SPARE_CALLS
        if calls < 1:
            raise ValueError(f"a build makes at least 1 call, not {calls}")
        session = session if session is not None else DraftSession()
        if session.draft.premise is not None:
            raise ValueError("the session's draft has a premise already: a build starts one")
        build = Build(premise, session)
        refused: CallResult[StoryDraft] | None = None
        for made in steps(premise, shape):
            refused = None
            while True:
                if len(build.calls) >= calls:
                    return build
                step = made(session.draft)
                call = await self._call(build, step, refused, seed, on_call)
                if call.result.ok:
                    break
                refused = call.result
                if call.tool == TOOLS.taking(STORY_FINALIZE_PACKAGE).name:
                    # The package was refused: one repair, then it is finalized again.
                    if len(build.calls) >= calls:
                        return build
                    await self._call(build, repair_step(session.draft), refused, seed, on_call)
        return build

    async def _call(
        self,
        build: Build,
        step: Step,
        refused: CallResult[StoryDraft] | None,
        seed: int | None,
        on_call: Callable[[ToolCall[StoryDraft]], None] | None,
    ) -> ToolCall[StoryDraft]:
        """Write `step`'s call (with the model, unless the code fills it all), check it, make it."""
        written: dict[str, Any] = {}
        if step.written:
            # Here, not at the top: every command imports the agents, and the loop brings trio.
            from ..model.writing import write_under_profile

            messages = build_messages(build.premise, step, build.session.draft, refused)
            answer = "Arguments JSON" if len(step.choices) == 1 else "Tool call JSON"
            written = await write_under_profile(
                self.writer,
                messages,
                step.profile,
                answer=answer,
                max_tokens=CALL_TOKENS,
                seed=seed,
                accept=partial(_well_formed, step),
                say=self.say,
                who="build",
            )
        tool, arguments = step.call(written)
        try:
            convert(tool.parameters, arguments)
        except ContractError as error:
            raise ProfileBug(f"a {tool.name} call broke its contract: {error}") from None
        call = ToolCall(tool.name, arguments, build.session.call(tool.name, arguments))
        build.calls.append(call)
        if on_call is not None:
            on_call(call)
        return call


def _well_formed(step: Step, written: dict[str, Any]) -> dict[str, Any]:
    """A call as written for `step`, once its arguments pass its tool's contract.

    Raises ContractError when they do not: the answer is asked again.
    """
    tool, arguments = step.call(written)
    convert(tool.parameters, arguments)
    return written


@dataclass
class Drive:
    """A drive so far: the premise, the session it drafts in, and every call it made, in order."""

    premise: str
    session: DraftSession
    calls: list[ToolCall[StoryDraft]] = field(default_factory=list)

    @classmethod
    def started(cls, premise: str, session: DraftSession | None = None) -> Drive:
        """A drive of `premise` (trimmed) in `session` (default: a new one saving nothing).

        Raises ValueError for an empty or too long premise, or a session whose
        draft holds another premise or is finalized.
        """
        premise = checked_premise(premise)
        session = session if session is not None else DraftSession()
        held = session.draft.premise
        if held is not None and held.premise != premise:
            raise ValueError("the session's draft has a premise of its own, not this one")
        return cls(premise, _drafting(session))

    @classmethod
    def resumed(cls, session: DraftSession) -> Drive:
        """A drive going on with `session`'s draft, of its premise.

        Raises ValueError when the draft has no premise yet (nothing says what
        the story is) or is finalized (it takes no more calls).
        """
        held = session.draft.premise
        if held is None:
            raise ValueError("the draft has no premise yet: give the premise to drive it")
        return cls(held.premise, _drafting(session))

    @property
    def package(self) -> StoryPackage | None:
        """The finalized package, or None while there is none."""
        return self.session.package

    @property
    def finalized(self) -> bool:
        """Whether the draft is finalized: the drive is over."""
        return self.session.draft.status == "finalized"


def _drafting(session: DraftSession) -> DraftSession:
    """`session`, whose draft takes calls. Raises ValueError when it is finalized."""
    if session.draft.status == "finalized":
        raise ValueError(
            f"the draft {session.draft.package_id} is finalized already: it takes no more calls"
        )
    return session


@dataclass
class Driver:
    """Lets one loaded model (or any `Writer`) co-write story drafts, choosing each call."""

    writer: Writer
    say: Callable[[str], None] = say_on_stderr

    async def drive(
        self,
        drive: Drive,
        *,
        max_calls: int,
        seed: int | None = None,
        on_call: Callable[[ToolCall[StoryDraft]], None] | None = None,
    ) -> Drive:
        """Let the model call the tools on `drive`'s draft until it is finalized, or `max_calls`.

        `max_calls` counts the calls `drive` made before too; `on_call` is
        told of each call as soon as it is made, refused or not. The model
        writes in a worker thread: cancelling stops it at its next token.
        Raises ValueError, before the model writes, for `max_calls` below 1;
        GenerationFailed when the model writes no answer the profile accepts
        (not JSON, a tool that is not offered, arguments past the profile's
        bounds), after one re-ask with its violations: the calls made so far
        stay in `drive`, and a stored draft keeps every one that succeeded.
        """
        # Here, not at the top: every command imports the agents, and the loop brings trio.
        from ..model.writing import write_under_profile

        if max_calls < 1:
            raise ValueError(f"a drive makes at least 1 call, not {max_calls}")
        while len(drive.calls) < max_calls and not drive.finalized:
            draft = drive.session.draft
            written = await write_under_profile(
                self.writer,
                drive_messages(drive.premise, draft, drive.calls),
                drive_profile(draft, drive.premise),
                answer="Tool call JSON",
                max_tokens=CALL_TOKENS,
                seed=seed,
                # The profile judges the answer; the tool's contract and the pipeline
                # are the handlers' to judge, and their refusal is read back.
                accept=lambda document: document,
                say=self.say,
                who="drive",
                explain=partial(_unknown_tool, draft),
            )
            tool, arguments = written["tool"], written["arguments"]
            call = ToolCall(tool, arguments, drive.session.call(tool, arguments))
            drive.calls.append(call)
            if on_call is not None:
                on_call(call)
        return drive


def _unknown_tool(draft: StoryDraft, document: Any, refused: Violations) -> Violations:
    """Why the drive profile refused `document`, said as a tool not offered when it names one.

    Every branch of the profile is one tool: an answer naming no tool
    offered fails them all alike, which the profile can only say as the
    answer (repr and all) matching none of its branches. `refused` is kept
    for an answer whose tool is offered: its arguments are what is wrong.
    """
    if not isinstance(document, dict):
        return refused  # "not a JSON object" says it already
    offered = [tool.name for tool in drive_tools(draft)]
    tool = document.get("tool")
    if isinstance(tool, str) and tool in offered:
        return refused
    named = (
        f"{shown(tool, 80)} is not a tool offered now"
        if tool is not None
        else "the answer names no tool"
    )
    return Violations([Violation("/tool", f"{named}: the tools offered are {', '.join(offered)}")])
