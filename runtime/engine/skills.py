"""Skill discovery, and resolution of a plan's `toolPath` to a declared script.

A skills folder holds one folder per skill: `<folder>/<name>/skill.json` (a
`skill-manifest`), the prompt file it names (`prompt.md` by default), and the
scripts it declares. A plan runs a script as `skills/<name>/<script path>`.

Discovery never fails on a bad skill: it skips the skill (or only the broken
script, when the manifest does not mark it `required`) and records why in
`SkillSet.problems`, which the CLI prints as warnings.

Every file discovery reads (a manifest, a prompt, an input schema and the
files it refers to) must be a regular file within a size limit (see
`skill_files`). An input schema resolves its `$ref`s only to files of its
skill folder, all read and checked at discovery; checking an input later
reads nothing and stops at the deadline it is given (see `input_schemas`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

from msgspec import UnsetType

from ...generated import SKILL_MANIFEST
from ...generated.tool_plans import RetryPolicy, SkillManifest, SkillScript
from ..core.errors import ContractError, UnusableScript
from ..core.validation import decode
from .input_schemas import InputProblem, check_input, input_validator
from .skill_files import inside, read_regular_file, reason

__all__ = [
    "Script",
    "Skill",
    "SkillSet",
    "UnusableScript",
    "bundled_skills",
    "discover_skills",
]

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

    def check_input(self, value: Any, *, seconds: float) -> InputProblem | None:
        """Why `value` is not a valid input for this script, or None when it is.

        A script without an input schema takes any input. Checking stops
        after about `seconds` (the time left before the plan's deadline):
        every pattern is matched with what is left of it, and every `$ref`
        followed checks it, so no schema and input can take longer. An input
        nested deeper than Python's recursion allows is a problem too.
        Raises nothing else.
        """
        schema = self.declaration.input_schema
        if self.input_validator is None or isinstance(schema, UnsetType):
            return None
        return check_input(
            self.input_validator, schema, value, seconds=seconds, until="the plan's deadline"
        )


@dataclass(frozen=True)
class Skill:
    name: str
    folder: Path
    manifest: SkillManifest
    prompt: str
    "The text of the skill's prompt file; empty when it has none."
    scripts: Mapping[str, Script]
    "The usable scripts, by tool path."
    unusable: Mapping[str, str] = field(default_factory=dict)
    "Why each declared script that is not usable is not, by tool path."


@dataclass(frozen=True)
class SkillSet:
    """The skills found in some folders, and why others were skipped."""

    skills: Mapping[str, Skill] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    def resolve(self, tool_path: str, disabled: Iterable[str] = ()) -> Script:
        """The script a plan's `toolPath` names.

        Raises UnusableScript, naming what is wrong: a path outside `skills/`,
        an unknown or disabled skill, a script its manifest does not declare,
        or one it declares that discovery found unusable (and why).
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
        if tool_path in skill.unusable:
            raise UnusableScript(
                tool_path,
                f"the skill {skill.name!r} declares this script but it is not usable: "
                f"{skill.unusable[tool_path]}",
            )
        script = skill.scripts.get(tool_path)
        if script is None:
            declared = ", ".join(sorted(skill.scripts)) or "none"
            raise UnusableScript(
                tool_path,
                f"the skill {skill.name!r} declares no such script (declared: {declared})",
            )
        return script


def discover_skills(folders: Iterable[Path | str]) -> SkillSet:
    """Find the skills in each folder of skill folders, in the order given.

    A skill name found twice keeps its first folder. A missing folder, an
    invalid manifest (or one that is no regular file), a manifest whose name
    differs from its folder, a required script that is unusable, and a skill
    that depends on a skill not found are problems: the skill is skipped and
    the problem recorded. A script that is not required and unusable (missing,
    leaving the skill folder, or with an unusable input schema) is left out,
    with its problem recorded and kept in `Skill.unusable`; a prompt file
    that cannot be read is not used. Each problem is one line.
    """
    skills: dict[str, Skill] = {}
    problems: list[str] = []
    for folder in map(Path, folders):
        if not folder.is_dir():
            problems.append(f"{folder}: not a folder of skills")
            continue
        for candidate in sorted(folder.iterdir()):
            # Whatever is there is judged, a manifest that is no file included.
            if not os.path.lexists(candidate / "skill.json"):
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
    from ...skills import BUNDLED_SKILLS

    return discover_skills([BUNDLED_SKILLS])


def _load_skill(folder: Path, problems: list[str]) -> Skill | None:
    where = folder / "skill.json"
    try:
        manifest: SkillManifest = decode(
            SKILL_MANIFEST, read_regular_file(where, MAX_MANIFEST_BYTES)
        )
    except (OSError, ValueError, ContractError) as error:
        problems.append(f"{where}: skipped, {reason(error)}")
        return None
    if manifest.name != folder.name:
        problems.append(
            f"{where}: skipped, the manifest names the skill {manifest.name!r} "
            f"but its folder is {folder.name!r}"
        )
        return None
    root = folder.resolve()
    prompt = ""
    try:
        prompt_file = inside(root, manifest.prompt)
    except ValueError as error:
        problems.append(f"{where}: the prompt file {manifest.prompt} {error}")
    else:
        # A skill may have no prompt; one that is there must be readable.
        if os.path.lexists(prompt_file):
            try:
                prompt = read_regular_file(prompt_file, MAX_PROMPT_BYTES).decode("utf-8")
            except (OSError, ValueError) as error:
                problems.append(f"{prompt_file}: prompt not used, {reason(error)}")
    scripts: dict[str, Script] = {}
    unusable: dict[str, str] = {}
    for declaration in manifest.scripts:
        try:
            script = _load_script(manifest, root, declaration)
        except _ScriptProblem as problem:
            if declaration.required:
                problems.append(f"{where}: skipped, its required script {problem}")
                return None
            problems.append(f"{where}: script not usable, {problem}")
            unusable[_tool_path(manifest, declaration)] = str(problem)
            continue
        scripts[script.tool_path] = script
    return Skill(manifest.name, root, manifest, prompt, scripts, unusable)


class _ScriptProblem(Exception):
    pass


def _load_script(manifest: SkillManifest, root: Path, declaration: SkillScript) -> Script:
    try:
        file = inside(root, declaration.path)
    except ValueError as error:
        raise _ScriptProblem(f"{declaration.path} {error}") from None
    if not file.is_file():
        raise _ScriptProblem(f"{declaration.path} is not a file")
    if file.suffix != ".py" and not os.access(file, os.X_OK):
        raise _ScriptProblem(f"{declaration.path} is not executable (and not a .py file)")
    validator = None
    if declaration.input_schema:
        try:
            validator = input_validator(root, declaration.input_schema)
        except (OSError, ValueError) as error:
            raise _ScriptProblem(
                f"{declaration.path}: its input schema {declaration.input_schema} is unusable: "
                f"{reason(error)}"
            ) from None
    retry_policy = manifest.retry_policy or None
    return Script(
        manifest.name,
        _tool_path(manifest, declaration),
        file,
        root,
        declaration,
        validator,
        retry_policy,
    )


def _tool_path(manifest: SkillManifest, declaration: SkillScript) -> str:
    return f"skills/{manifest.name}/{declaration.path}"
