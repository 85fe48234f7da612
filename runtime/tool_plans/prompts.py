"""The narrator's prompt, from `templates/narrator.md` beside this module.

The system message lists every enabled skill: its name, description, its
scripts (tool path and description) and the text of its prompt file; then
the disabled skills and the session state. The user message is the input.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from importlib.resources import files
from string import Template
from typing import Any

from ..engine.skills import SkillSet
from ..model.chat import Message

__all__ = ["narrator_messages"]


def _template(name: str) -> Template:
    return Template(files(__package__).joinpath("templates", name).read_text("utf-8"))


def narrator_messages(
    player_input: str,
    skills: SkillSet,
    *,
    disabled: Iterable[str] = (),
    state: Mapping[str, Any] | None = None,
) -> list[Message]:
    """The narrator's system and user messages for one player input.

    The system message lists every enabled skill: its name, description, its
    scripts (tool path and description) and the text of its prompt file.
    """
    off = sorted(set(disabled))
    sections = []
    for skill in skills.skills.values():
        if skill.name in off or not skill.scripts:
            continue
        lines = [f"## {skill.name}", "", skill.manifest.description.strip(), ""]
        for script in skill.scripts.values():
            description = script.declaration.description or "no description"
            lines.append(f"- `{script.tool_path}`: {description}")
        if skill.prompt.strip():
            lines += ["", skill.prompt.strip()]
        sections.append("\n".join(lines))
    system = _template("narrator.md").substitute(
        skills="\n\n".join(sections) or "(none: narrate only)",
        disabled=", ".join(off) or "none",
        state=json.dumps(dict(state or {}), ensure_ascii=False, sort_keys=True),
    )
    return [
        {"role": "system", "content": system.strip()},
        {"role": "user", "content": player_input.strip()},
    ]
