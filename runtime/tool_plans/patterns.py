"""The planner that always works: regular expressions from player input to a plan.

It is the narrator's last resort (seed 003, FR-005), used when no model is
available or a model's attempts have failed. Each intent it knows (light or
put out a torch, examine a door, look around, roll dice, recall a memory,
check a reputation) becomes one call of a bundled skill's script, in the order
the player wrote them, each after the one before; the storyteller then
narrates the lot; past the tools a model's plan holds (`profiles.MAX_TOOLS`)
the rest are left out. Input it does not understand gets a narration-only plan.
Intents whose skill is missing or disabled are left out, so every plan it
returns passes `check_plan` against the skills it was given.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ...generated.tool_plans import Plan, PlanMetadata, ToolInvocation
from ..core.keys import snake_case
from ..core.plain_text import one_line
from ..engine.skills import Script, SkillSet, bundled_skills
from .choosing import Choice, Chosen, skill_names, usable
from .profiles import MAX_TOOLS

__all__ = ["pattern_plan"]

MAX_ECHO = 200
INPUT_CHECK_SECONDS = 1.0
"How long the patterns wait for a script's schema to judge an input they made."
_ARTICLES = frozenset({"a", "an", "the", "that", "this", "my", "your"})
STORYTELLER = "skills/storyteller/narrate.py"
_NAME_LENGTH = 40
"Longest key made of a name the player wrote: with `_door` after it, an id stays short."


@dataclass(frozen=True)
class _Intent:
    pattern: re.Pattern[str]
    tool_path: str
    make_input: Callable[[re.Match[str]], dict[str, Any] | None]
    narrative: str


def _door(match: re.Match[str]) -> dict[str, Any]:
    adjective = snake_case(match["adjective"] or "", _NAME_LENGTH)
    named = adjective[:1].isalpha() and adjective not in _ARTICLES
    return {"target": f"{adjective}_door" if named else "door"}


def _dice(match: re.Match[str]) -> dict[str, Any]:
    return {"formula": (match["formula"] or "1d20").lower()}


def _recall(match: re.Match[str]) -> dict[str, Any] | None:
    query = match["query"].strip(" .!?")[:MAX_ECHO]
    return {"query": query} if re.search(r"\w", query) else None


def _standing(match: re.Match[str]) -> dict[str, Any] | None:
    faction = snake_case(match["faction"], _NAME_LENGTH)
    return {"faction": faction} if faction[:1].isalpha() else None


_I = re.IGNORECASE
_INTENTS = (
    _Intent(
        re.compile(r"\b(?:light|ignite|kindle)s?\b[^.;]*?\btorch\b", _I),
        "skills/torch-lighter/light.py",
        lambda _: {"action": "light"},
        "You bring a flame to the torch.",
    ),
    _Intent(
        re.compile(r"\b(?:extinguish|douse|snuff|put out)\b[^.;]*?\btorch\b", _I),
        "skills/torch-lighter/light.py",
        lambda _: {"action": "extinguish"},
        "You smother the torch.",
    ),
    _Intent(
        re.compile(
            r"\b(?:examine|inspect|study|check|look at)\b[^.;]*?"
            r"(?:\b(?P<adjective>[a-z]+)\s+)?\bdoor\b",
            _I,
        ),
        "skills/door-examiner/examine.py",
        _door,
        "You step closer to the door.",
    ),
    _Intent(
        re.compile(r"\blook(?:s|ing)?\s+around\b|\bsurroundings\b", _I),
        STORYTELLER,
        lambda _: {"style": "vivid", "subject": "the surroundings"},
        "You take in your surroundings.",
    ),
    _Intent(
        re.compile(
            r"\broll(?:s)?\b(?:[^.;]*?\b(?P<formula>[0-9]{0,3}d[0-9]{1,4}(?:[+-][0-9]{1,4})?)\b)?",
            _I,
        ),
        "skills/dice-roller/roll.py",
        _dice,
        "The dice tumble.",
    ),
    _Intent(
        re.compile(r"\b(?:recall|remember|what do i know about)\b(?P<query>[^.;]*)", _I),
        "skills/memory/recall.py",
        _recall,
        "You search your memory.",
    ),
    _Intent(
        re.compile(
            r"\b(?:reputation|standing)\b[^.;]*?\bwith\s+(?:the\s+)?(?P<faction>[a-z][a-z ]{0,38}?)"
            r"(?=\s*(?:[.;,!?]|$|\band\b))",
            _I,
        ),
        "skills/reputation/standing.py",
        _standing,
        "You weigh how you are regarded.",
    ),
)


def pattern_plan(
    player_input: str,
    *,
    skills: SkillSet | None = None,
    disabled: Iterable[str] = (),
    generation: int = 1,
    parent_plan_id: str | None = None,
    request_id: str | None = None,
) -> Plan:
    """A plan for `player_input` from fixed patterns, using only enabled `skills`.

    `skills` defaults to the bundled skills; `disabled` names skills the plan
    must not use (the replan loop's `disabledSkills`). `generation` and
    `parent_plan_id` fill `metadata`; `request_id` defaults to a fresh UUID.
    """
    skills = bundled_skills() if skills is None else skills
    disabled = sorted(skill_names(disabled))
    tools: list[ToolInvocation] = []
    narrative: list[str] = []
    chosen: list[Chosen] = []
    for intent, match in _matches(player_input):
        if len(tools) == MAX_TOOLS - 1:
            break  # as many as a model's plan holds, the narration last
        script = usable(skills, intent.tool_path, disabled)
        made = intent.make_input(match)
        if script is None or made is None or not _accepts(script, made):
            continue
        if intent.tool_path != STORYTELLER:
            chosen.append(Chosen((script,), f'a pattern matched "{one_line(match[0], 120)}"'))
        previous = [tools[-1].tool_id] if tools else []
        tools.append(
            ToolInvocation(
                tool_id=f"t{len(tools) + 1}",
                tool_path=intent.tool_path,
                input=made,
                dependencies=previous,
            )
        )
        narrative.append(intent.narrative)
    storyteller = usable(skills, STORYTELLER, disabled)
    if tools and storyteller is not None and tools[-1].tool_path != STORYTELLER:
        tools.append(
            ToolInvocation(
                tool_id=f"t{len(tools) + 1}",
                tool_path=STORYTELLER,
                input={"style": "vivid"},
                dependencies=[tool.tool_id for tool in tools],
                required=False,
            )
        )
    if not narrative:
        narrative.append(echo_narrative(player_input))
    return Plan(
        request_id=request_id or str(uuid.uuid4()),
        narrative=" ".join(narrative)[:4000],
        tools=tools,
        disabled_skills=disabled,
        metadata=PlanMetadata(
            generation_attempt=generation,
            parent_plan_id=parent_plan_id,
            choice=Choice("patterns", tuple(chosen)).record(),
        ),
    )


def echo_narrative(player_input: str) -> str:
    """The narration of an input nothing was called for: the input told back, on one line."""
    echo = " ".join(player_input.split())[:MAX_ECHO].rstrip(".!?") or "wait"
    echo = echo.removeprefix("I ").removeprefix("i ")
    return f"You {echo[:1].lower()}{echo[1:]}. The world waits."


def _matches(text: str) -> list[tuple[_Intent, re.Match[str]]]:
    found = [
        (match.start(), index, intent, match)
        for index, intent in enumerate(_INTENTS)
        for match in intent.pattern.finditer(text)
    ]
    return [(intent, match) for _, _, intent, match in sorted(found, key=lambda f: f[:2])]


def _accepts(script: Script, value: dict[str, Any]) -> bool:
    # A skill's schema is the user's: a pattern that backtracks badly must not
    # hang the fallback that always works, so an input it cannot judge in time
    # is not used.
    return script.check_input(value, seconds=INPUT_CHECK_SECONDS) is None
