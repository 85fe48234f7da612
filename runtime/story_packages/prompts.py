"""What the model reads before each call of a build: chat messages.

The system message describes the pipeline, each tool by the first sentence
of its contract's description (`templates/build.md`); the user message
gives the premise, the story so far, the call to write with its fields, each
described by its contract, and the refusal of the last call, if any
(`templates/build-call.md`).

A drive's model (the co-author) reads the tools, each by the same first
sentence (`templates/drive.md`), the premise (`templates/drive-premise.md`),
its last `RECENT_CALLS` calls each with what it read back, and the story so
far, summarised from the draft (`templates/drive-story.md`): a drive going
on with a stored draft reads its earlier calls as that summary.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from ...generated.story_packages import Progression, StoryDraft
from ..core.contracts import contract_schema
from ..core.errors import Violation
from ..core.sessions import CallResult, ToolCall
from ..core.templates import template
from ..core.tools import Tool
from ..model.chat import Message
from .profiles import (
    Step,
    flags_set,
)
from .tools import TOOLS

__all__ = ["RECENT_CALLS", "VIOLATIONS_SHOWN", "build_messages", "drive_messages", "read_back"]

VIOLATIONS_SHOWN = 5
"Violations of a refused package the model reads, at most."


_SENTENCE = re.compile(r"^(.*?[.!?])(?:\s|$)")


def _gist(tool: Tool) -> str:
    """The first sentence of the tool's description, from its contract."""
    found = _SENTENCE.match(tool.description)
    return found[1] if found else tool.description


@cache
def _pipeline() -> str:
    return "\n".join(
        f"{number}. `{tool.name}`: {_gist(tool)}" for number, tool in enumerate(TOOLS, 1)
    )


def _resolved(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """`node` with its local reference followed, its own keywords first."""
    while "$ref" in node:
        target = schema["$defs"][node["$ref"].removeprefix("#/$defs/")]
        node = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
    return node


def _fields(tool: Tool, profile: dict[str, Any]) -> list[str]:
    """A line per field the model writes, with its description from the tool's contract."""
    schema = contract_schema(tool.parameters)
    lines: list[str] = []

    def walk(written: dict[str, Any], contract: dict[str, Any], prefix: str) -> None:
        for name, node in written.get("properties", {}).items():
            inner = _resolved(schema, contract["properties"][name])
            lines.append(f"- `{prefix}{name}`: {inner.get('description', '')}".rstrip())
            if node.get("type") == "object" and node.get("properties"):
                walk(node, inner, f"{prefix}{name}.")
            elif node.get("type") == "array":
                items = node.get("prefixItems", [node.get("items")])[0]
                if isinstance(items, dict) and items.get("type") == "object":
                    walk(items, _resolved(schema, inner["items"]), f"{prefix}{name}[].")

    walk(profile, schema, "")
    return lines


def _story(draft: StoryDraft) -> str:
    """The draft in a few lines: the premise's title, the characters, each act and its locations."""
    premise = draft.premise
    if premise is None:
        return "Nothing yet."
    lines = [f'- "{premise.title}", {premise.genre}']
    lines += [f'- {each.id} ({each.role}): "{each.name}"' for each in draft.characters]
    for act in draft.acts:
        tracker = act.outline.global_progression
        needs = (
            f", needs progress {tracker.required_value}" if isinstance(tracker, Progression) else ""
        )
        lines.append(f'- {act.outline.id}: "{act.outline.title}"{needs}')
        for location in act.locations:
            if location.web is None:
                lines.append(f"  - {location.id}: not wired yet")
                continue
            state = f"{len(location.encounters)} encounters"
            state += ", finalized" if location.finalized is not None else ""
            to = ", ".join(location.web.connections) or "nowhere"
            lines.append(f'  - {location.id} "{location.web.title}", to {to}: {state}')
    flags = flags_set(draft)
    if flags:
        lines.append(f"- flags set so far: {', '.join(flags)}")
    return "\n".join(lines)


def _refusal(call: CallResult[StoryDraft]) -> str:
    """What the model reads of the refused call: its error, and a refused package's problems."""
    if call.error is None:
        return ""
    head = f"The last call, {call.tool}, was refused: {call.message}"
    return "\n".join([head, *_violation_lines(call.error.violations, "the package")])


def _violation_lines(violations: Sequence[Violation], whole: str) -> list[str]:
    """A refusal's first VIOLATIONS_SHOWN violations, one line each, then how many more."""
    shown = violations[:VIOLATIONS_SHOWN]
    lines = [f"- {each.pointer or whole}: {each.message}" for each in shown]
    if len(violations) > len(shown):
        lines.append(f"- and {len(violations) - len(shown)} more")
    return lines


def build_messages(
    premise: str, step: Step, draft: StoryDraft, refused: CallResult[StoryDraft] | None
) -> list[Message]:
    """What the model reads before it writes `step`'s call: chat messages.

    The system message describes the pipeline, each tool by the first
    sentence of its contract's description; the user message gives the
    premise, the story so far, the call to write and its fields (each
    described by its contract), and the refusal of the last call, if any.
    """
    if len(step.choices) == 1:
        choice = step.choices[0]
        call = f"`{choice.tool.name}` for {step.about}. Write its arguments as JSON:"
        fields = "\n".join(_fields(choice.tool, choice.profile))
    else:
        names = " or ".join(f"`{choice.tool.name}`" for choice in step.choices[:2])
        call = (
            f"a repair of {step.about}: {names}, then the package is finalized again. "
            'Write the call as JSON, {"tool": NAME, "arguments": {...}}.'
        )
        fields = ""
    user = template(__package__, "build-call.md").substitute(
        premise=premise,
        story=_story(draft),
        call=call,
        fields=fields,
        refusal=_refusal(refused) if refused is not None else "",
    )
    system = template(__package__, "build.md").substitute(pipeline=_pipeline())
    return [
        {"role": "system", "content": system.strip()},
        {"role": "user", "content": re.sub(r"\n{3,}", "\n\n", user).strip()},
    ]


RECENT_CALLS = 6
"How many of its last calls, with what it read back, a drive's model reads: a bounded prompt."


def read_back(result: CallResult[StoryDraft]) -> str:
    """What a drive's model reads after a call: the tool's message, and a refusal's violations."""
    if result.error is None:
        return f"Result (ok): {result.message}"
    head = f"Result (refused): {result.message}"
    return "\n".join([head, *_violation_lines(result.error.violations, "the arguments")])


def drive_messages(
    premise: str, draft: StoryDraft, calls: Iterable[ToolCall[StoryDraft]]
) -> list[Message]:
    """What a drive's model reads before its next call: chat messages.

    The system message lists the tools, each by the first sentence of its
    contract's description; the user message gives `premise`. Then come the
    last `RECENT_CALLS` of `calls`, each the model's call (as its JSON) and
    what it read back (`read_back`), and last the story so far, from
    `draft`: the calls before those, or before this run, are in it.
    """
    system = template(__package__, "drive.md").substitute(tools=_pipeline())
    opening = template(__package__, "drive-premise.md").substitute(premise=premise)
    messages: list[Message] = [
        {"role": "system", "content": system.strip()},
        {"role": "user", "content": opening.strip()},
    ]
    for call in list(calls)[-RECENT_CALLS:]:
        written = json.dumps({"tool": call.tool, "arguments": call.arguments}, ensure_ascii=False)
        messages.append({"role": "assistant", "content": written})
        messages.append({"role": "user", "content": read_back(call.result)})
    story = template(__package__, "drive-story.md").substitute(story=_story(draft)).strip()
    messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{story}"}
    return messages
