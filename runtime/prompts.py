"""The prompts the project renders for a model, from templates in `runtime/templates/`.

Each prompt is a list of chat messages; `render_chat` turns them into the
model's own text format when its GGUF file carries a chat template, and into
plain labelled text when it does not (base models such as the packaged one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from importlib.resources import files
from string import Template
from typing import Any

from plancontracts.runtime.skills import SkillSet

__all__ = ["Message", "narrator_messages", "render_chat"]

Message = dict[str, str]


def _template(name: str) -> Template:
    return Template(files("plancontracts.runtime").joinpath("templates", name).read_text("utf-8"))


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


def render_chat(
    messages: list[Message], chat_template: str | None, eos: str = "", bos: str = ""
) -> str:
    """`messages` as the model reads them, ending where the model's answer starts.

    With a chat template (from the GGUF metadata `tokenizer.chat_template`),
    it is rendered with a generation prompt; without one, each message is a
    labelled paragraph and the text ends with `Plan JSON: `.
    """
    if chat_template:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        return environment.from_string(chat_template).render(
            messages=messages, add_generation_prompt=True, eos_token=eos, bos_token=bos
        )
    parts = [f"{message['role'].capitalize()}:\n{message['content']}" for message in messages]
    return "\n\n".join(parts) + "\n\nPlan JSON: "
