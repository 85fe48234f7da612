"""The narrator's prompt, from `templates/narrator.md` beside this module.

The system message lists every enabled skill: its name, description, its
scripts (tool path and description) and the text of its prompt file; then
the disabled skills, the session state and, for a replan, what went wrong
with the last plan (`what_failed`). The user message is the input.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ...generated.tool_plans import PlanAttempt, ToolError
from ..core.plain_text import one_line
from ..core.templates import template
from ..engine.skills import Skill, SkillSet
from ..model.chat import Message

__all__ = ["FAILURES_SHOWN", "choice_messages", "narrator_messages", "what_failed"]

FAILURES_SHOWN = 5
"The most failed tools a replan prompt describes; more are counted, not described."
_MESSAGE_SHOWN = 200
"The most characters of a failure's message a replan prompt quotes."


def narrator_messages(
    player_input: str,
    skills: SkillSet,
    *,
    disabled: Iterable[str] = (),
    state: Mapping[str, Any] | None = None,
    failures: Sequence[str] = (),
    scripts: Collection[str] | None = None,
) -> list[Message]:
    """The narrator's system and user messages for one player input.

    The system message lists every enabled skill: its name, description, its
    scripts (tool path and description) and the text of its prompt file;
    given `scripts` (tool paths: those a choosing step picked), only those
    scripts and their skills. `failures` are the lines of `what_failed` for
    the last plan of a replan; each is put on one line of its own.
    """
    off = sorted(set(disabled))
    sections = []
    for skill in skills.skills.values():
        listed = [
            script
            for script in skill.scripts.values()
            if scripts is None or script.tool_path in scripts
        ]
        if skill.name in off or not listed:
            continue
        lines = [f"## {skill.name}", "", skill.manifest.description.strip(), ""]
        for script in listed:
            description = script.declaration.description or "no description"
            lines.append(f"- `{script.tool_path}`: {description}")
        if skill.prompt.strip():
            lines += ["", skill.prompt.strip()]
        sections.append("\n".join(lines))
    system = template(__package__, "narrator.md").substitute(
        skills="\n\n".join(sections) or "(none: narrate only)",
        disabled=", ".join(off) or "none",
        state=json.dumps(dict(state or {}), ensure_ascii=False, sort_keys=True),
        failures=template(__package__, "replan.md").substitute(
            failures="\n".join(f"- {one_line(line)}" for line in failures)
        )
        if failures
        else "",
    )
    return [
        {"role": "system", "content": system.strip()},
        {"role": "user", "content": player_input.strip()},
    ]


def choice_messages(player_input: str, offered: Sequence[Skill]) -> list[Message]:
    """The messages of the model's choice among the `offered` skills (`choosing.choose_by_model`).

    The system message describes each offered skill on one line: its name,
    its description and its capabilities. The user message is the input.
    """
    lines = []
    for skill in offered:
        capabilities = ", ".join(skill.manifest.capabilities)
        tags = f" ({capabilities})" if capabilities else ""
        lines.append(f"- {skill.name}: {one_line(skill.manifest.description)}{tags}")
    system = template(__package__, "choose.md").substitute(skills="\n".join(lines) or "(none)")
    return [
        {"role": "system", "content": system.strip()},
        {"role": "user", "content": player_input.strip()},
    ]


def what_failed(record: PlanAttempt) -> list[str]:
    """What went wrong in an attempt, one line each, for the next plan's prompt (FR-012).

    `record` is the attempt's `plan-attempt` record (`narrator.attempt_record`).
    A plan rejected before it ran gives one line, the reason (a cycle, an
    unknown dependency, an unusable script). Otherwise each tool that failed
    or timed out gives one, in the order they ended: its id, path, state,
    retries and error, its message cut to `_MESSAGE_SHOWN` characters; past
    `FAILURES_SHOWN` tools the rest are counted. Empty for a plan with no
    failure. Messages come from tools and are quoted as they are, on one
    line: a hostile one can say anything, but in one bounded line.
    """
    if record.rejection:
        return [f"the plan was rejected before it ran: {_error(record.rejection)}"]
    lines = []
    for failure in record.failures[:FAILURES_SHOWN]:
        count = failure.retry_count
        retries = f"{count} retr{'y' if count == 1 else 'ies'}"
        lines.append(
            f"`{failure.tool_id}` ({failure.tool_path}) {failure.state} after {retries}: "
            f"{_error(failure.error)}"
        )
    more = len(record.failures) - FAILURES_SHOWN
    if more > 0:
        lines.append(f"and {more} more failed tool{'s' if more > 1 else ''}")
    return lines


def _error(error: ToolError) -> str:
    code = f" {error.code}" if error.code else ""
    return f"{error.category}{code}: {one_line(error.message, _MESSAGE_SHOWN)}"
