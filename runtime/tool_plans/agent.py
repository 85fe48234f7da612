"""The narrator's planner: a local model under a decoding profile, or the patterns.

    planner = Planner(load_first_writer(ModelChoice()))  # a model loaded once, or None
    plan = await planner.plan("I light the torch")      # a checked Plan, always

Without a writer (no model loads: `load_first_writer` answers None) it plans
with patterns. With one, it plans in two steps (seed 003, FR-003): it first
chooses the scripts the input calls for (`choosing`: by the scripts' cues,
and by the model among skills that have none), then the model writes their
inputs under a profile that makes exactly those tools required, with the
narration skill last. `choosing="model"` has the model choose among every
skill; `choosing="plan"` skips the step (the model chooses while it writes
the whole plan, as before there was one). The plan's `metadata.choice` says
what was chosen and why. Each plan from the model is checked against the
contract and the executor's checks. A generation that fails is reported and
answered by the pattern planner, so `plan` always returns a plan.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import msgspec

from ...generated.tool_plans import Plan, ToolInvocation
from ..core.errors import GenerationFailed, MalformedJSON, ProfileBug
from ..core.typed_patterns import conforming
from ..engine.skills import SkillSet, bundled_skills
from ..model.writer import Writer, say_on_stderr
from .choosing import (
    CUE_STEPS,
    Choice,
    Chosen,
    choose_by_cues,
    choose_by_model,
    narration_scripts,
    offered_scripts,
    skill_names,
)
from .patterns import pattern_plan
from .profiles import MAX_TOOLS, PlanProfile, plan_profile
from .prompts import narrator_messages

__all__ = ["Choosing", "Planner"]

PLAN_TOKENS = 512
"Most tokens the model writes for a plan: the longest plan the profile allows fits."


Choosing = Literal["cues", "model", "plan"]
"How the planner chooses the skills a plan calls (see the module's documentation)."


@dataclass
class Planner:
    """Plans player input with one loaded model, or with patterns when there is none.

    `skills` are those plans may use (default: the bundled skills); `say`
    reports each step taken in one line (default: on standard error);
    `choosing` is how the skills are chosen before the model writes the
    plan (default: by cues, then the model among skills without cues).
    """

    writer: Writer | None
    skills: SkillSet = field(default_factory=bundled_skills)
    say: Callable[[str], None] = say_on_stderr
    choosing: Choosing = "cues"

    def __post_init__(self) -> None:
        if self.choosing not in get_args(Choosing):
            allowed = ", ".join(get_args(Choosing))
            raise ValueError(f"choosing is one of {allowed}, not {self.choosing!r}")
        if self.writer is None:
            self.say("planner: no model; planning with patterns")

    async def plan(
        self,
        player_input: str,
        *,
        disabled: Iterable[str] = (),
        state: Mapping[str, Any] | None = None,
        generation: int = 1,
        parent_plan_id: str | None = None,
        seed: int | None = None,
        failures: Sequence[str] = (),
        on_entry: Callable[[ToolInvocation], Awaitable[None]] | None = None,
        request_id: str | None = None,
    ) -> Plan:
        """A plan for `player_input` that passes the contract and the executor's checks.

        A replan gives the skills to leave out (`disabled`), its generation,
        the plan it replaces and what went wrong with that plan (`failures`,
        lines of `prompts.what_failed`), which the model's prompt shows. The
        model writes in a worker thread; cancelling the call stops it. A
        model's plan that fails, or that the contract refuses, is said in one
        line and answered by the patterns. Raises TypeError when `disabled`
        is one string.

        `on_entry` is awaited with each tool of the model's first answer as
        soon as its entry is written whole, before the plan ends (what
        `narrator.play_turn` starts tools with); the plan returned may still
        be another (a refused answer's replacement, or the patterns'), so
        the caller compares. `request_id` is the plan's, when the caller
        chose it beforehand.
        """
        off = sorted(skill_names(disabled))
        if self.writer is not None:
            try:
                return await self._write(
                    self.writer,
                    player_input,
                    off,
                    state,
                    generation,
                    parent_plan_id,
                    seed,
                    failures,
                    on_entry,
                    request_id,
                )
            except GenerationFailed as failure:
                self.say(f"planner: the model failed ({failure}); planning with patterns")
            except ProfileBug as bug:
                # A skill's input schema the decoder reads otherwise than
                # jsonschema (`oneOf` held as `anyOf`): the plan is refused, never run.
                self.say(f"planner: the model's plan was refused ({bug}); planning with patterns")
        return pattern_plan(
            player_input,
            skills=self.skills,
            disabled=off,
            generation=generation,
            parent_plan_id=parent_plan_id,
        )

    async def choose(
        self, player_input: str, *, disabled: Iterable[str] = (), seed: int | None = None
    ) -> Choice | None:
        """The scripts this planner's choosing step picks for `player_input`, with why.

        None when the planner has no choosing step (`choosing="plan"`). Raises
        GenerationFailed when the model was asked and wrote no choice.
        """
        off = sorted(skill_names(disabled))
        if self.choosing == "plan":
            return None
        if self.choosing == "model":
            if self.writer is None:
                raise GenerationFailed("no model to choose the skills")
            return await choose_by_model(self.writer, player_input, self.skills, off, seed=seed)
        choice = choose_by_cues(player_input, self.skills, off)
        if choice.untried:
            self.say(
                f"planner: the cues of {choice.untried} scripts were not tried: matching them "
                f"against this input takes more than {CUE_STEPS:,} steps"
            )
        uncued = [
            script.skill
            for script in offered_scripts(self.skills, off)
            if not script.declaration.cues
        ]
        if not uncued or self.writer is None:
            return choice
        more = await choose_by_model(
            self.writer, player_input, self.skills, off, among=uncued, seed=seed
        )
        return Choice("cues", choice.chosen + more.chosen)

    async def _write(
        self,
        writer: Writer,
        player_input: str,
        off: list[str],
        state: Mapping[str, Any] | None,
        generation: int,
        parent_plan_id: str | None,
        seed: int | None,
        failures: Sequence[str],
        on_entry: Callable[[ToolInvocation], Awaitable[None]] | None,
        request_id: str | None,
    ) -> Plan:
        # Here, not at the top: every command imports the agents, and the loop brings trio.
        from ..model.writing import write_under_profile

        choice = await self.choose(player_input, disabled=off, seed=seed)
        narrators = {script.tool_path for script in narration_scripts(self.skills, off)}
        chosen: list[Chosen] | None = None
        scripts: set[str] | None = None
        if choice is not None:
            room = MAX_TOOLS - bool(narrators)
            chosen = list(choice.chosen[:room])
            if len(choice.chosen) > room:
                dropped = ", ".join(c.skill for c in choice.chosen[room:])
                self.say(f"planner: a plan calls at most {room} chosen tools; left out {dropped}")
                choice = Choice(choice.by, tuple(chosen))
            scripts = {s.tool_path for c in chosen for s in c.scripts}
            scripts |= narrators if chosen else set()
        profile = plan_profile(
            self.skills,
            disabled=off,
            chosen=None if chosen is None else [c.scripts for c in chosen],
        )
        messages = narrator_messages(
            player_input, self.skills, disabled=off, state=state, failures=failures, scripts=scripts
        )

        def accept(document: dict[str, Any]) -> Plan:
            chose = choice
            if chose is None:
                called = [call["toolPath"] for call in document.get("tools", [])]
                chose = Choice(
                    "plan",
                    tuple(
                        Chosen((self.skills.resolve(path, off),), "the model called it in the plan")
                        for path in dict.fromkeys(called)
                        if path not in narrators
                    ),
                )
            return profile.to_plan(
                document,
                generation=generation,
                parent_plan_id=parent_plan_id,
                request_id=request_id,
                choice=chose.record(),
            )

        # A plan the profile or the contract refuses (a server that dropped a pattern)
        # is asked again once with its violations, before the patterns answer.
        return await write_under_profile(
            writer,
            messages,
            profile.schema,
            answer="Plan JSON",
            max_tokens=PLAN_TOKENS,
            seed=seed,
            accept=accept,
            say=self.say,
            who="planner",
            on_text=None if on_entry is None else _entries_as_written(profile, on_entry),
        )


def _entries_as_written(
    profile: PlanProfile, on_entry: Callable[[ToolInvocation], Awaitable[None]]
) -> Callable[[str, int, int], Awaitable[None]]:
    """What reads the first answer as it is written, handing each whole tool to `on_entry`.

    Only the first answer: the tools of a refused one may already run, and
    its replacement is the caller's to compare. An entry is handed over once
    it is closed (`PartialJSON.complete`), as the plan's tool it stands for.
    """
    from ..core.partial import PartialJSON

    parser = PartialJSON()
    handed = 0
    broken = False

    async def on_text(text: str, tokens: int, attempt: int) -> None:
        nonlocal handed, broken
        if attempt != 1 or broken:
            return
        try:
            parser.feed(text)
        except MalformedJSON:
            broken = True  # judged, and refused, when the answer ends
            return
        written = parser.value
        while isinstance(written, dict) and parser.complete(("tools", handed)):
            entry = profile.entry(handed + 1, written["tools"][handed])
            handed += 1
            try:
                tool = conforming(entry, ToolInvocation)
            except msgspec.ValidationError:
                broken = True  # the whole answer is refused at its end
                return
            await on_entry(tool)

    return on_text
