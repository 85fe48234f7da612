"""The narrator's planner: a local model under a decoding profile, or the patterns.

    planner = Planner(load_first_writer(ModelChoice()))  # a model loaded once, or None
    plan = await planner.plan("I light the torch")      # a checked Plan, always

Without a writer (no model loads: `load_first_writer` answers None) it plans
with patterns. Each plan from the model is decoded under the plan profile for the enabled skills,
then checked against the contract and the executor's checks. A generation
that fails is reported and answered by the pattern planner, so `plan` always
returns a plan.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...generated.tool_plans import Plan
from ..core.errors import GenerationFailed
from ..engine.skills import SkillSet, bundled_skills
from ..model.writer import Writer, say_on_stderr
from .patterns import pattern_plan
from .profiles import plan_profile
from .prompts import narrator_messages

__all__ = ["Planner"]

PLAN_TOKENS = 512
"Most tokens the model writes for a plan: the longest plan the profile allows fits."


@dataclass
class Planner:
    """Plans player input with one loaded model, or with patterns when there is none.

    `skills` are those plans may use (default: the bundled skills); `say`
    reports each step taken in one line (default: on standard error).
    """

    writer: Writer | None
    skills: SkillSet = field(default_factory=bundled_skills)
    say: Callable[[str], None] = say_on_stderr

    def __post_init__(self) -> None:
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
    ) -> Plan:
        """A plan for `player_input` that passes the contract and the executor's checks.

        A replan gives the skills to leave out (`disabled`), its generation,
        the plan it replaces and what went wrong with that plan (`failures`,
        lines of `prompts.what_failed`), which the model's prompt shows. The
        model writes in a worker thread; cancelling the call stops it.
        """
        off = sorted(set(disabled))
        if self.writer is not None:
            profile = plan_profile(self.skills, disabled=off)
            messages = narrator_messages(
                player_input, self.skills, disabled=off, state=state, failures=failures
            )
            try:
                document = await self.writer.write_chat(
                    messages, profile.schema, answer="Plan JSON", max_tokens=PLAN_TOKENS, seed=seed
                )
            except GenerationFailed as failure:
                self.say(f"planner: the model failed ({failure}); planning with patterns")
            else:
                return profile.to_plan(
                    document, generation=generation, parent_plan_id=parent_plan_id
                )
        return pattern_plan(
            player_input,
            skills=self.skills,
            disabled=off,
            generation=generation,
            parent_plan_id=parent_plan_id,
        )
