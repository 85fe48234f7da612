"""How the plan contract reads Narratoria's stored plans (see `runtime.core.migrations`).

Narratoria's example plans (seed 003) name a tool `tools/<skill>`: a valid
`toolPath` under the contract, which the executor refuses, since it runs
`skills/<skill>/<script path declared in the skill's manifest>` (see
`runtime.engine.skills`). Such a plan validates, so the step reads valid
documents too (`reads_valid`) and recognizes a plan by a tool whose path
starts with `tools/`. Each such path becomes the path of the script the
skill declares: the only one, or the one named after `tools/<skill>/`.
The skills are the bundled ones, or those of the folders of the option
`skills` (separated by the platform's path separator, `:` on Unix). A skill
not found, or one declaring several scripts when the path does not say
which, is one clear error naming the step: the plan is left as it was.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ...generated import PLAN
from ..core.migrations import MigrationStep
from ..engine.skills import SkillSet, bundled_skills, discover_skills

__all__ = ["MIGRATIONS", "NARRATORIA_TOOLS_PATHS"]

_OLD = "tools/"


def _recognizes(value: Any) -> bool:
    tools = value.get("tools") if isinstance(value, dict) else None
    return isinstance(tools, list) and any(
        isinstance(tool, dict)
        and isinstance(tool.get("toolPath"), str)
        and tool["toolPath"].startswith(_OLD)
        for tool in tools
    )


def _skills(options: Mapping[str, str]) -> SkillSet:
    folders = options.get("skills")
    if not folders:
        return bundled_skills()
    return discover_skills(folder for folder in folders.split(os.pathsep) if folder)


def _script(skills: SkillSet, old: str) -> str:
    """The `skills/...` path the executor runs for Narratoria's `old`, `tools/<skill>[/path]`."""
    name, _, path = old.removeprefix(_OLD).partition("/")
    skill = skills.skills.get(name)
    if skill is None:
        known = ", ".join(sorted(skills.skills)) or "none"
        raise ValueError(
            f"{old}: no skill named {name!r} (skills: {known}); give its folder with the "
            "option skills"
        )
    if path:
        return f"skills/{name}/{path}"
    declared = sorted(skill.scripts)
    if len(declared) != 1:
        raise ValueError(
            f"{old}: the skill {name!r} declares {len(declared)} scripts "
            f"({', '.join(declared) or 'none usable'}): which one it means is not known"
        )
    return declared[0]


def _upgrade(value: Any, options: Mapping[str, str]) -> tuple[Any, Sequence[str]]:
    skills = _skills(options)
    notes: list[str] = []
    tools: list[Any] = []
    for tool in value["tools"]:
        old = tool.get("toolPath") if isinstance(tool, dict) else None
        if isinstance(old, str) and old.startswith(_OLD):
            new = _script(skills, old)
            notes.append(f"tool {tool.get('toolId')!r}: toolPath {old} -> {new}")
            tool = {**tool, "toolPath": new}
        tools.append(tool)
    return {**value, "tools": tools}, notes


NARRATORIA_TOOLS_PATHS = MigrationStep(
    contract=PLAN.name,
    reads=0,
    writes=1,
    name="Narratoria tools/<skill> paths",
    recognizes=_recognizes,
    upgrade=_upgrade,
    reads_valid=True,
    options={
        "skills": "folders of skill folders to find the skills in, separated by the path "
        "separator (default: the bundled skills)",
    },
)
"Narratoria's `tools/<skill>` paths, rewritten to the `skills/<skill>/<script>` the executor runs."

MIGRATIONS = {PLAN.name: (NARRATORIA_TOOLS_PATHS,)}
