"""Planning blocks written by the local model, valid and rule-conforming by construction.

    thinker = Thinker(load_writer(ModelChoice(), needs="planning blocks need one"))  # once
    thought = await thinker.think("THINK: the guard blocks the bridge")
    thought.block                                                # a typed PlanningBlock
    told = await thinker.narrate("the guard dozes off")          # Story mode, whole response
    told.response                                                # a typed StoryResponse

The model writes under the planning-block profile of the mode
(`planning_blocks.profiles.block_profile`), after the planning protocol prompt
(`prompts.planning_messages`). In Think mode it first sets the planning check
(ability, DC and why); code rolls it (d20 plus the ability's modifier) and
the model then writes the block knowing how well the check went; the roll
fills `plan_quality`. Every answer is checked against the profile and every
block against the contract in its mode before it is returned; one refused (a
server that does not hold the profile, or a bug in it) is asked again once
with its violations (`runtime.model.writing.write_under_profile`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import msgspec

from ...generated.planning_blocks import FrozenPlan, PlanningBlock, StoryResponse
from ..model.writer import Writer, say_on_stderr
from .mechanics import (
    ABILITIES,
    AVERAGE_SCORE,
    Mode,
    RolledCheck,
    mode_of,
    roll_check,
)
from .profiles import block_profile, response_profile
from .prompts import planning_messages, story_messages

__all__ = ["Narration", "Thinker", "Thought"]

BLOCK_TOKENS = 0
"""As many tokens as the context leaves after the prompt: no fixed budget fits every block.

The longest block the Think-mode profile allows holds 39 texts of up to 120
characters, about 4,700 characters, and a base model's texts can take a
token for every one or two of them (1,536 tokens were once seen to cut a
valid block short). The constraint ends the block as soon as it is whole.
"""
CHECK_TOKENS = 160


@dataclass(frozen=True)
class Thought:
    """A planning block written for one situation."""

    block: PlanningBlock
    mode: Mode
    check: RolledCheck | None
    "Think mode: the planning check code rolled."
    situation: str
    "The situation, without its `THINK:` prefix."


@dataclass
class Thinker:
    """Writes planning blocks with one loaded model."""

    writer: Writer
    say: Callable[[str], None] = say_on_stderr

    async def think(
        self,
        situation: str,
        mode: Mode | None = None,
        *,
        abilities: Mapping[str, int] | None = None,
        seed: int | None = None,
    ) -> Thought:
        """A planning block for `situation`, in `mode` or as its `THINK:` prefix says.

        `abilities` are the character's scores (default 10 in Intelligence
        and Wisdom); `seed` makes the sampling and the planning roll
        repeatable. The model writes in a worker thread: cancelling the call
        stops it at its next token. Raises GenerationFailed when the model
        writes no document that is accepted, after one re-ask; ValueError
        for an empty situation or a score out of bounds.
        """
        # Here, not at the top: every command imports the agents, and the loop brings trio.
        from ..model.writing import write_under_profile

        mode, text = mode_of(situation, mode)
        if not text:
            raise ValueError("the situation is empty")
        scores = dict(abilities or dict.fromkeys(ABILITIES, AVERAGE_SCORE))
        profile = block_profile(mode, abilities=scores)
        decided = check = None
        if profile.check_schema is not None:
            decided = await write_under_profile(
                self.writer,
                planning_messages(text, mode),
                profile.check_schema,
                answer="Planning check JSON",
                max_tokens=CHECK_TOKENS,
                seed=seed,
                accept=_as_it_is,
                say=self.say,
                who="think",
            )
            rng = random.Random(seed)
            # The profile holds dc an integer, which a server's JSON may write as 12.0.
            dc = int(decided["dc"])
            check = roll_check(decided["stat_used"], scores[decided["stat_used"]], dc, rng)
            self.say(f"think: {check.describe()}")
        block = await write_under_profile(
            self.writer,
            planning_messages(text, mode, check=check),
            profile.schema,
            answer="Planning block JSON",
            max_tokens=BLOCK_TOKENS,
            seed=seed,
            accept=partial(profile.to_block, decided=decided, check=check),
            say=self.say,
            who="think",
        )
        return Thought(block, mode, check, text)

    async def narrate(
        self,
        situation: str,
        *,
        seed: int | None = None,
        frozen_plans: Mapping[str, FrozenPlan] | None = None,
    ) -> Narration:
        """A whole story response to `situation`: the narrative, then a Story-mode block.

        `frozen_plans` (the session's, after the turn) become the response's
        `state_updates`; `seed` makes the sampling repeatable. Raises
        GenerationFailed when the model writes no response that is accepted,
        after one re-ask; ValueError for an empty situation or a `THINK:`
        one (Think mode answers with a block alone).
        """
        from ..model.writing import write_under_profile

        mode, text = mode_of(situation, "story")
        if mode != "story":
            raise ValueError(
                "a story response is Story mode's: a THINK: situation asks for a block"
            )
        if not text:
            raise ValueError("the situation is empty")
        profile = response_profile()
        builtins = None if frozen_plans is None else msgspec.to_builtins(dict(frozen_plans))
        response = await write_under_profile(
            self.writer,
            story_messages(text),
            profile.schema,
            answer="Story response JSON",
            max_tokens=BLOCK_TOKENS,
            seed=seed,
            accept=partial(profile.to_response, frozen_plans=builtins),
            say=self.say,
            who="think",
            explain=profile.explain,
        )
        return Narration(response, text)


@dataclass(frozen=True)
class Narration:
    """A story response written for one situation: Story mode, so no planning check."""

    response: StoryResponse
    situation: str

    def as_thought(self) -> Thought:
        """The response's block as a Story-mode `Thought`, for the session's steps."""
        return Thought(self.response.planning_block, "story", None, self.situation)


def _as_it_is(document: dict[str, Any]) -> dict[str, Any]:
    """An answer the profile accepted, taken as it is: the profile is all its contract."""
    return document
