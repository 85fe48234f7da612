"""The decoding profile of planning blocks, in a shape that makes the protocol hold.

`block_profile` derives, from the `planning-block` contract, a shape of its
own (see `BlockProfile`) in which the protocol's rules hold by construction:
the parallel option comes last, after two or three situational choices; the
recommended choice is one of them; every text is free of markup; what code
decides (the roll of the planning check, the coordination DC, the keys) is
never written by the model. `response_profile` wraps it in a story response,
the narrative written first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from ...generated import STORY_RESPONSE
from ...generated.planning_blocks import PlanningBlock, StoryResponse
from ..core.contracts import contract_schema
from ..core.errors import ProfileBug, Violation, Violations
from ..core.profiles import WHITESPACE, Bounds, Deriver, closed, every_field_written, without
from ..core.validation import convert, violations
from .mechanics import (
    ABILITIES,
    MAX_DC,
    MIN_DC,
    Mode,
    RolledCheck,
    coordination_dc,
    is_parallel,
    snake_case,
)
from .repairs import normalize_block
from .rules import PLANNING_BLOCK, rules_in

__all__ = ["BlockProfile", "ResponseProfile", "block_profile", "choice_keys", "response_profile"]

BLOCK_BOUNDS = Bounds(string=120, items=2, integer=40)
"Short texts and two items a list: a small model writes a whole block in seconds."
_TEXT = r'[^<{"\x00-\x1f\x7f-\x9f]'
"A character of prose: no `<` (markup starts there), no `{` (nor JSON), no control, no quote."
_QUOTED = r'"[ "]*[^<{"\s:\x00-\x1f\x7f-\x9f]'
"Quotes (and spaces) and the character after them, which is no colon: no JSON key."
PLAIN_TEXT = rf'^(?:[^<{{"\s\x00-\x1f\x7f-\x9f]|{_QUOTED})(?:{_TEXT}|{_QUOTED})*(?:"[ "]*)?$'
"""A text of prose: it starts with no space, holds no markup, no control character, and no JSON.

No markup begins without `<`, no JSON object without `{`, and no JSON key
without a quote followed by a colon; quotes for speech are prose.
"""
PLANNING_DCS = (2, 25)
"The planning DCs a model may set: 2 to 20 in ordinary play, a little more for epic scope."
PARALLEL_KEY = "parallel_execution"


@dataclass(frozen=True)
class BlockProfile:
    """The decoding schemas of a planning block in one mode, and the way back to a block.

    The model writes `schema`: the block's texts, the recommended choice, one
    or two alternatives, and the parallel option, in that order. In Think
    mode it first writes `check_schema`: the ability, DC and reasons of the
    planning check, which code then rolls; `plan_quality` is filled from the
    roll. Keys come from each choice's text, `recommended_approach` names the
    first choice, and the coordination DC follows from the parallel option's
    base DC, the number of situational choices and their complexity.
    """

    mode: Mode
    schema: dict[str, Any]
    check_schema: dict[str, Any] | None
    "Think mode only: what the model decides before the roll."

    def to_block(
        self,
        decoded: dict[str, Any],
        *,
        decided: dict[str, Any] | None = None,
        check: RolledCheck | None = None,
    ) -> PlanningBlock:
        """The planning block a decoded document stands for (with, in Think mode, its check).

        `decided` is the document written under `check_schema`, `check` the
        roll made from it. Raises ProfileBug when the block breaks the
        contract in this mode or would need a repair: the profile should have
        made both impossible. Raises ValueError when Think mode lacks its check.
        """
        situational = [decoded["recommended"], *decoded["alternatives"]]
        keys = choice_keys([choice["text"] for choice in situational])
        choices: dict[str, Any] = dict(zip(keys, situational, strict=True))
        analysis = dict(decoded["parallel"]["analysis"])
        analysis["coordination_dc"] = coordination_dc(
            analysis["base_dc"], len(keys), analysis["complexity"]
        )
        choices[PARALLEL_KEY] = {**decoded["parallel"], "analysis": analysis}
        block = {
            **without(decoded, "recommended", "alternatives", "parallel"),
            "choices": choices,
            "analysis": {"recommended_approach": keys[0], **decoded["analysis"]},
        }
        if self.mode == "think":
            if decided is None or check is None:
                raise ValueError("a Think-mode block needs its decided and rolled planning check")
            block["plan_quality"] = {
                **decided,
                **decoded["plan_quality"],
                "stat_value": check.stat_value,
                "modifier": check.modifier,
                "roll_result": check.roll_result,
                "success": check.outcome.success,
                "margin": check.outcome.margin,
                "quality_tier": check.outcome.quality_tier,
            }
        judged = normalize_block(block, self.mode)
        if judged.repairs:
            raise ProfileBug(f"a block decoded under the profile needed repairs: {judged.repairs}")
        if judged.violations:
            listed = "; ".join(map(str, judged.violations))
            raise ProfileBug(f"a block decoded under the profile is invalid: {listed}")
        # The contracts' one conversion: a server's JSON may write an integer as 12.0,
        # which the schema holds and msgspec alone refuses.
        typed: PlanningBlock = convert(PLANNING_BLOCK, block, rules=rules_in(self.mode))
        return typed


def block_profile(
    mode: Mode,
    *,
    abilities: Iterable[str] = ABILITIES,
    max_situational: int = 3,
    bounds: Bounds = BLOCK_BOUNDS,
) -> BlockProfile:
    """The decoding profile of planning blocks in `mode`, derived from the contract.

    `abilities` are the ones the planning check may use (Think mode);
    `max_situational` (2 or more) bounds the situational choices.
    """
    if max_situational < 2:
        raise ValueError("a block with a parallel option has 2 or more situational choices")
    contract = contract_schema(PLANNING_BLOCK)
    definitions = contract["$defs"]
    deriver = Deriver(definitions, bounds, text_pattern=PLAIN_TEXT)
    choice = deriver.derive(definitions["Choice"])
    situational = every_field_written(
        {**choice, "properties": without(choice["properties"], "analysis")}
    )
    # The parallel option's base DC leaves room for every coordination addition.
    most = coordination_dc(0, max_situational, "complex")
    base_dc = {"type": "integer", "minimum": MIN_DC, "maximum": MAX_DC - most}
    analysis = deriver.derive(definitions["ParallelAnalysis"])
    analysis["properties"]["base_dc"] = base_dc
    parallel = every_field_written(
        {
            **choice,
            "properties": {**choice["properties"], "analysis": every_field_written(analysis)},
        }
    )
    recommendation = deriver.derive(definitions["Analysis"])
    properties: dict[str, Any] = {}
    check_schema = None
    if mode == "think":
        quality = definitions["PlanQuality"]["properties"]
        derived = deriver.derive(definitions["PlanQuality"])["properties"]
        before = {
            name: derived[name] for name, field in quality.items() if "x-decoding" not in field
        }
        before["stat_used"] = {"enum": list(abilities)}
        before["dc"] = {"type": "integer", "minimum": PLANNING_DCS[0], "maximum": PLANNING_DCS[1]}
        check_schema = closed(before)
        after = {
            name: derived[name]
            for name, field in quality.items()
            if field.get("x-decoding") == "after-roll"
        }
        properties["plan_quality"] = closed(after)
    root = contract["properties"]
    properties["thinking"] = deriver.derive(root["thinking"])
    properties["context"] = deriver.derive(root["context"])
    if mode == "think":
        assessment = every_field_written(deriver.derive(root["situation_assessment"]))
        properties["situation_assessment"] = assessment
    properties["recommended"] = situational
    properties["alternatives"] = {
        "type": "array",
        "items": situational,
        "minItems": 1,
        "maxItems": max_situational - 1,
    }
    properties["parallel"] = parallel
    properties["analysis"] = closed(without(recommendation["properties"], "recommended_approach"))
    if check_schema is not None:
        check_schema["x-guidance"] = WHITESPACE
    return BlockProfile(mode, {**closed(properties), "x-guidance": WHITESPACE}, check_schema)


def choice_keys(texts: Iterable[str]) -> list[str]:
    """Choice keys made from choice labels, one each, distinct and never the parallel option's.

    `"Bribe the guard"` gives `bribe_the_guard`. A label without Latin
    letters gives `choice_<n>`; a key that would start with a digit or with
    `parallel` gets `choice_` or `option_` in front; a repeated key gets `_2`,
    `_3`, ...
    """
    keys: list[str] = []
    for number, text in enumerate(texts, 1):
        key = snake_case(text, max_length=40) or f"choice_{number}"
        if not key[0].isalpha():
            key = f"choice_{key}"
        if is_parallel(key):
            key = f"option_{key}"
        unique, count = key, 1
        while unique in keys:
            count += 1
            unique = f"{key}_{count}"
        keys.append(unique)
    return keys


# Story responses -----------------------------------------------------------------

NARRATIVE_CHARACTERS = 800
"""The longest narrative the model writes: a few paragraphs, in seconds on a small model.

The contract allows more (its `narrative` maxLength); the profile asks for less.
"""
_NARRATIVE_TEXT = r'[^<{"`~\x00-\x09\x0b-\x1f\x7f-\x9f]'
"A character of narrative: prose as in a block's texts, a line break, and no backtick or tilde."
NARRATIVE_TEXT = (
    rf'^(?:[^<{{"`~\s\x00-\x1f\x7f-\x9f]|{_QUOTED})(?:{_NARRATIVE_TEXT}|{_QUOTED})*(?:"[ "]*)?$'
)
"""A narrative: paragraphs of prose, with no markup, no JSON and no code fence.

As `PLAIN_TEXT`, and line breaks besides; no backtick nor tilde, so no fence.
"""


@dataclass(frozen=True)
class ResponseProfile:
    """The decoding schema of a story response, and the way back to one.

    The model writes the narrative first, then the Story-mode block under
    its profile (`block_profile("story")`); `to_response` maps the block
    back as that profile does.
    """

    schema: dict[str, Any]
    block: BlockProfile

    def to_response(
        self, decoded: dict[str, Any], *, frozen_plans: dict[str, Any] | None = None
    ) -> StoryResponse:
        """The story response a decoded document stands for.

        `frozen_plans`, the session's after the turn (a `frozen-plans`
        value), become its `state_updates`. Raises ProfileBug when the
        response breaks its contract: the profile should have made that
        impossible.
        """
        block = self.block.to_block(decoded["planning_block"])
        response: dict[str, Any] = {
            "narrative": decoded["narrative"],
            "planning_block": msgspec.to_builtins(block),
        }
        if frozen_plans is not None:
            response["state_updates"] = {"frozen_plans": frozen_plans}
        problems = violations(STORY_RESPONSE, response)
        if problems:
            listed = "; ".join(map(str, problems))
            raise ProfileBug(f"a response decoded under the profile is invalid: {listed}")
        typed: StoryResponse = convert(STORY_RESPONSE, response)
        return typed

    def explain(self, document: Any, refused: Violations) -> Violations:
        """`refused` (why the profile refused `document`) with the narrative's said in words.

        The profile's pattern can only say that the narrative does not match
        it, as a regular expression; the contract's rules say what it holds
        (planning-block JSON, control characters, markup) and where that
        goes, and are put in its place. A narrative the rules allow but the
        pattern does not (a backtick, say) is said as the prose it is not.
        Everything else refused is kept as it is.
        """
        narrative = document.get("narrative") if isinstance(document, dict) else None
        if not isinstance(narrative, str) or not any(
            problem.pointer == _NARRATIVE and problem.keyword == "pattern" for problem in refused
        ):
            return refused
        said = [
            problem
            for problem in violations(STORY_RESPONSE, {"narrative": narrative})
            if problem.pointer == _NARRATIVE
        ] or [Violation(_NARRATIVE, _NOT_PROSE, "pattern")]
        rest = [
            problem
            for problem in refused
            if not (problem.pointer == _NARRATIVE and problem.keyword == "pattern")
        ]
        return Violations([*said, *rest], complete=refused.complete)


_NARRATIVE = "/narrative"
_NOT_PROSE = (
    "is not the plain prose a narrative is written in: no JSON, markup, backtick, tilde "
    "or control character, and it starts with a word"
)


def response_profile(*, max_situational: int = 3, bounds: Bounds = BLOCK_BOUNDS) -> ResponseProfile:
    """The decoding profile of story responses, derived from the contract.

    The narrative is at most NARRATIVE_CHARACTERS (or the contract's
    maxLength, if less) of NARRATIVE_TEXT; the block is the Story-mode
    block profile's, with `max_situational` and `bounds` as there.
    """
    block = block_profile("story", max_situational=max_situational, bounds=bounds)
    narrative = contract_schema(STORY_RESPONSE)["properties"]["narrative"]
    written = {
        "type": "string",
        "minLength": narrative["minLength"],
        "maxLength": min(narrative["maxLength"], NARRATIVE_CHARACTERS),
        "pattern": NARRATIVE_TEXT,
    }
    properties = {"narrative": written, "planning_block": without(block.schema, "x-guidance")}
    return ResponseProfile({**closed(properties), "x-guidance": WHITESPACE}, block)
