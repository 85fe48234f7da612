"""The planner's prompts, from `templates/` beside this module: blocks and story responses.

The prompt is a list of chat messages (see `runtime.model.chat`). Nothing the
template shows about the contract is typed into it: schemas, enum values and
the rules' numbers are injected from the schema files and from
`runtime.planning_blocks.mechanics`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import cache
from typing import Any

from ...generated import STORY_RESPONSE
from ..core.contracts import AnyContract, contract_schema
from ..core.schema_text import schema_sections
from ..core.templates import template
from ..model.chat import Message
from . import mechanics as rules
from .mechanics import Mode, RolledCheck
from .profiles import response_profile
from .rules import PLANNING_BLOCK

__all__ = ["planning_messages", "story_messages"]


def planning_messages(
    situation: str, mode: Mode, *, check: RolledCheck | None = None
) -> list[Message]:
    """The planner's system and user messages for one situation.

    The system message is the planning protocol (`templates/planning.md`),
    with the planning-block contract's schema text, its choice types, its
    enum values and the mechanics injected. In Think mode the user message
    first asks for the planning check (`check` None); once code has rolled
    it, it asks for the block and gives the roll (`check`).
    """
    lines = [f"{mode.capitalize()} mode.", f"Situation: {situation.strip()}"]
    if mode == "think" and check is None:
        lines.append(
            "Before planning, set the planning check: the ability the character plans with, "
            "how hard this is to plan (the DC) and why."
        )
    elif check is not None:
        lines.append(f"The planning check was rolled: {check.describe()}.")
        lines.append(
            f"Write a {check.outcome.quality_tier} plan: {_TIER_PLANS[check.outcome.quality_tier]}"
        )
    else:
        lines.append("Write the planning block for the character's next move.")
    return [
        {"role": "system", "content": _planning_protocol()},
        {"role": "user", "content": "\n".join(lines)},
    ]


def story_messages(situation: str) -> list[Message]:
    """The system and user messages asking for a whole story response to one situation.

    The system message is the planning protocol, then the story response
    (`templates/story-response.md`, with the story-response contract's
    descriptions and the narrative's length as the model writes it injected;
    the block's schema text is the protocol's already).
    """
    lines = [
        "Story mode.",
        f"Situation: {situation.strip()}",
        "Write the story response: the narrative of what happens next, then the planning "
        "block for the character's next move.",
    ]
    return [
        {"role": "system", "content": _story_protocol()},
        {"role": "user", "content": "\n".join(lines)},
    ]


@cache
def _story_protocol() -> str:
    """The system message of story responses: the protocol, then the response's own part."""
    schema = contract_schema(STORY_RESPONSE)
    fields = schema["properties"]
    narrative = response_profile().schema["properties"]["narrative"]
    response = template(__package__, "story-response.md").substitute(
        response_about=schema["description"],
        narrative_length=narrative["maxLength"],  # the profile's, within the contract's
        narrative=fields["narrative"]["description"],
        planning_block=fields["planning_block"]["description"],
        state_updates=fields["state_updates"]["description"],
    )
    return f"{_planning_protocol()}\n\n{response.strip()}"


@cache
def _planning_protocol() -> str:
    """The planner's system message: the same for every situation and mode, so built once."""
    sections = schema_sections(PLANNING_BLOCK)
    choice_group = _referenced(PLANNING_BLOCK, "Choice")
    schema = contract_schema(PLANNING_BLOCK)["$defs"]
    return (
        template(__package__, "planning.md")
        .substitute(
            # The value types close the choice part: every "see ... below" points down.
            block_schema=_join(text for name, text in sections[:-1] if name not in choice_group),
            choice_schema=_join(text for name, text in sections if name in choice_group),
            value_types=sections[-1][1].strip(),
            risk_levels=_listed(schema["risk-level"]["enum"]),
            confidence_levels=_listed(schema["confidence"]["enum"]),
            quality_tiers=_listed(schema["quality-tier"]["enum"]),
            mechanics=_mechanics(),
        )
        .strip()
    )


_TIER_PLANS = {
    "Masterful": "every option, risk and opening is seen, and the best one is clear.",
    "Brilliant": "the options are sharp and the main risks are weighed well.",
    "Sharp": "a clear analysis with good options.",
    "Competent": "sound options, though some details are missed.",
    "Incomplete": "a couple of good options are missed and some risks underestimated.",
    "Muddled": "the options are unclear and important risks are overlooked.",
    "Confused": "the situation is misread; the options rest on wrong assumptions.",
}


def _referenced(contract: AnyContract, name: str) -> set[str]:
    """`name` and every object type its fields reach, by `$ref`, in `contract`."""
    definitions = contract_schema(contract)["$defs"]
    found: set[str] = set()
    waiting = [name]
    while waiting:
        current = waiting.pop()
        if current in found or "properties" not in definitions[current]:
            continue
        found.add(current)
        text = json.dumps(definitions[current])
        waiting += [ref.removeprefix("#/$defs/") for ref in _REFS.findall(text)]
    return found


_REFS = re.compile(r'"\$ref": "(#/\$defs/[^"]+)"')


def _mechanics() -> str:
    """The protocol's numbers, as `runtime.planning_blocks.mechanics` applies them."""
    modifiers = "; ".join(f"{m.reason} {m.change:+d}" for m in rules.DC_MODIFIERS)
    parallel = rules.parallel_dc_modifier
    complexity = ", ".join(f"{name} +{extra}" for name, extra in rules.COMPLEXITY_DC.items())
    success = ", ".join(f"{tier} from {low:+d}" for low, tier in rules.SUCCESS_TIERS)
    failure = ", ".join(f"{tier} from {high:+d}" for high, tier in rules.FAILURE_TIERS[::-1])
    risks = ", ".join(f"{risk} x{float(x):g}" for risk, x in rules.RISK_REWARD.items())
    tiers = ", ".join(f"{tier} x{float(x):g}" for tier, x in rules.TIER_REWARD.items())
    low = 1
    bands = []
    for high, hours in rules.FREEZE_BANDS:
        bands.append(f"DC {low}-{high}: {hours} h")
        low = high + 1
    return "\n".join(
        [
            "- The planning check: d20 plus the ability modifier against the DC. It succeeds "
            "when it reaches the DC; the margin is the roll minus the DC. Success tiers: "
            f"{success}. Failure tiers: {failure}.",
            "- The DC of carrying out a choice starts from the situation's DC and moves by: "
            f"{modifiers}; choosing the parallel option {parallel(2):+d} for two simple tasks, "
            f"{parallel(3):+d} for three tasks or moderate complexity, {parallel(4):+d} for four "
            f"or more or complex tasks. Together they move it by at most "
            f"{rules.MAX_DC_ADJUSTMENT} either way, and the DC stays within {rules.MIN_DC} to "
            f"{rules.MAX_DC}.",
            "- The parallel option's coordination DC: the main task's DC, "
            f"+{rules.COORDINATION_PER_TASK} for each task beyond the first, and for complexity "
            f"{complexity}.",
            f"- XP on success is multiplied by the risk ({risks}), the plan's tier ({tiers}; "
            f"others x1) and, for the parallel option, x{float(rules.PARALLEL_REWARD):g}; the "
            "multipliers multiply.",
            "- A failed planning check freezes its topic for some game hours, by its DC: "
            f"{'; '.join(bands)}. Until then the character cannot plan that topic again, unless "
            "new information arrives, a materially different approach is taken, someone helps, "
            "or the game master lifts the freeze.",
        ]
    )


def _join(texts: Iterable[str]) -> str:
    return "\n".join(texts).strip()


def _listed(values: list[Any]) -> str:
    quoted = [f"`{value}`" for value in values]
    return ", ".join(quoted[:-1]) + f" and {quoted[-1]}"
