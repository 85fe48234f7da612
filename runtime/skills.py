"""Skill discovery, and resolution of a plan's `toolPath` to a declared script.

A skills folder holds one folder per skill: `<folder>/<name>/skill.json` (a
`skill-manifest`), the prompt file it names (`prompt.md` by default), and the
scripts it declares. A plan runs a script as `skills/<name>/<script path>`.

Discovery never fails on a bad skill: it skips the skill (or only the broken
script, when the manifest does not mark it `required`) and records why in
`SkillSet.problems`, which the CLI prints as warnings.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

from plancontracts.generated.tool_plans import RetryPolicy, SkillManifest, SkillScript
from plancontracts.runtime.errors import ContractError
from plancontracts.runtime.jsontext import MalformedJSON
from plancontracts.runtime.validation import decode

__all__ = ["Script", "Skill", "SkillSet", "UnusableScript", "bundled_skills", "discover_skills"]

MAX_MANIFEST_BYTES = 1 << 20
MAX_PROMPT_BYTES = 64 << 10


@dataclass(frozen=True)
class Script:
    """One declared script of a discovered skill, ready to run."""

    skill: str
    tool_path: str
    "How plans name it: `skills/<skill>/<path>`."
    file: Path
    "The script file, resolved; it lies inside the skill folder."
    skill_folder: Path
    "The skill folder, resolved: the script's working directory."
    declaration: SkillScript
    input_validator: Validator | None = field(compare=False)
    "Checks a call's input against the script's input schema, when the manifest names one."
    retry_policy: RetryPolicy | None
    "The skill manifest's retry policy, for calls that set none."


@dataclass(frozen=True)
class Skill:
    name: str
    folder: Path
    manifest: SkillManifest
    prompt: str
    "The text of the skill's prompt file; empty when it has none."
    scripts: Mapping[str, Script]
    "The usable scripts, by tool path."


@dataclass(frozen=True)
class SkillSet:
    """The skills found in some folders, and why others were skipped."""

    skills: Mapping[str, Skill] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def resolve(self, tool_path: str, disabled: Iterable[str] = ()) -> Script:
        """The script a plan's `toolPath` names.

        Raises UnusableScript, naming what is wrong: a path outside `skills/`,
        an unknown or disabled skill, or a script its manifest does not declare.
        """
        parts = tool_path.split("/", 2)
        if len(parts) < 3 or parts[0] != "skills":
            raise UnusableScript(
                tool_path, "a script path is written skills/<skill name>/<script path>"
            )
        skill = self.skills.get(parts[1])
        if skill is None:
            known = ", ".join(sorted(self.skills)) or "none"
            raise UnusableScript(tool_path, f"no skill named {parts[1]!r} (skills: {known})")
        if skill.name in set(disabled):
            raise UnusableScript(tool_path, f"the skill {skill.name!r} is disabled for this plan")
        script = skill.scripts.get(tool_path)
        if script is None:
            declared = ", ".join(sorted(skill.scripts)) or "none"
            raise UnusableScript(
                tool_path,
                f"the skill {skill.name!r} declares no such script (declared: {declared})",
            )
        return script


class UnusableScript(LookupError):
    """A `toolPath` that names no usable script."""

    def __init__(self, tool_path: str, reason: str) -> None:
        super().__init__(f"{tool_path}: {reason}")
        self.tool_path = tool_path
        self.reason = reason


def discover_skills(folders: Iterable[Path | str]) -> SkillSet:
    """Find the skills in each folder of skill folders, in the order given.

    A skill name found twice keeps its first folder. A missing folder, an
    invalid manifest, a manifest whose name differs from its folder, a
    required script that is missing, and a skill that depends on a skill not
    found are problems: the skill is skipped and the problem recorded.
    """
    skills: dict[str, Skill] = {}
    problems: list[str] = []
    for folder in map(Path, folders):
        if not folder.is_dir():
            problems.append(f"{folder}: not a folder of skills")
            continue
        for candidate in sorted(folder.iterdir()):
            if not (candidate / "skill.json").is_file():
                continue
            skill = _load_skill(candidate, problems)
            if skill is None:
                continue
            if skill.name in skills:
                problems.append(
                    f"{candidate}: skipped, the skill {skill.name!r} was already found in "
                    f"{skills[skill.name].folder}"
                )
                continue
            skills[skill.name] = skill
    # A skill is usable only if the skills it depends on are; drop until stable.
    changed = True
    while changed:
        changed = False
        for skill in list(skills.values()):
            missing = [name for name in skill.manifest.dependencies if name not in skills]
            if missing:
                del skills[skill.name]
                problems.append(
                    f"{skill.folder}: skipped, it depends on skills not found: {', '.join(missing)}"
                )
                changed = True
    return SkillSet(skills, tuple(problems))


@cache
def bundled_skills() -> SkillSet:
    """The example skills that ship with plancontracts, discovered once per process."""
    from plancontracts.skills import BUNDLED_SKILLS

    return discover_skills([BUNDLED_SKILLS])


def _load_skill(folder: Path, problems: list[str]) -> Skill | None:
    where = folder / "skill.json"
    try:
        if where.stat().st_size > MAX_MANIFEST_BYTES:
            raise ValueError(f"larger than {MAX_MANIFEST_BYTES} bytes")
        manifest: SkillManifest = decode("skill-manifest", where.read_bytes())
    except (OSError, ValueError, MalformedJSON, ContractError) as error:
        problems.append(f"{where}: skipped, {error}")
        return None
    if manifest.name != folder.name:
        problems.append(
            f"{where}: skipped, the manifest names the skill {manifest.name!r} "
            f"but its folder is {folder.name!r}"
        )
        return None
    root = folder.resolve()
    prompt = ""
    prompt_file = _inside(root, manifest.prompt)
    if prompt_file is None:
        problems.append(f"{where}: the prompt file {manifest.prompt} leaves the skill folder")
    elif prompt_file.is_file():
        try:
            if prompt_file.stat().st_size > MAX_PROMPT_BYTES:
                raise ValueError(f"larger than {MAX_PROMPT_BYTES} bytes")
            prompt = prompt_file.read_text(encoding="utf-8")
        except (OSError, ValueError) as error:
            problems.append(f"{prompt_file}: prompt not used, {error}")
    scripts: dict[str, Script] = {}
    for declaration in manifest.scripts:
        try:
            script = _load_script(manifest, root, declaration)
        except _ScriptProblem as problem:
            if declaration.required:
                problems.append(f"{where}: skipped, its required script {problem}")
                return None
            problems.append(f"{where}: script not usable, {problem}")
            continue
        scripts[script.tool_path] = script
    return Skill(manifest.name, root, manifest, prompt, scripts)


class _ScriptProblem(Exception):
    pass


def _load_script(manifest: SkillManifest, root: Path, declaration: SkillScript) -> Script:
    file = _inside(root, declaration.path)
    if file is None:
        raise _ScriptProblem(f"{declaration.path} leaves the skill folder")
    if not file.is_file():
        raise _ScriptProblem(f"{declaration.path} is not a file")
    if file.suffix != ".py" and not os.access(file, os.X_OK):
        raise _ScriptProblem(f"{declaration.path} is not executable (and not a .py file)")
    input_validator = None
    if declaration.input_schema:
        schema_file = _inside(root, declaration.input_schema)
        if schema_file is None:
            raise _ScriptProblem(f"{declaration.input_schema} leaves the skill folder")
        try:
            input_schema = json.loads(schema_file.read_bytes())
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError

            Draft202012Validator.check_schema(input_schema)
            input_validator = Draft202012Validator(input_schema)
        except (OSError, ValueError, SchemaError) as error:
            reason = getattr(error, "message", error)
            raise _ScriptProblem(
                f"{declaration.path}: its input schema {declaration.input_schema} is unusable: "
                f"{reason}"
            ) from None
    tool_path = f"skills/{manifest.name}/{declaration.path}"
    retry_policy = manifest.retry_policy or None
    return Script(manifest.name, tool_path, file, root, declaration, input_validator, retry_policy)


def _inside(root: Path, relative: str) -> Path | None:
    """`root / relative` resolved, or None if it leaves `root` (through a symbolic link)."""
    path = (root / relative).resolve()
    return path if path.is_relative_to(root) else None
