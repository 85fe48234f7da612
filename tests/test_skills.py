"""Skill discovery: what is found, what is skipped and why, and how plans name scripts."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from plancontracts.runtime.skills import UnusableScript, bundled_skills, discover_skills

SCRIPT = "print('hello')\n"


def make_skill(root: Path, name: str, **manifest: Any) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    scripts = manifest.setdefault("scripts", [{"name": "run", "path": "run.py"}])
    for script in scripts:
        path = folder / script["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(SCRIPT)
    document = {"name": name, "version": "1.0.0", "description": f"The {name} skill."}
    (folder / "skill.json").write_text(json.dumps({**document, **manifest}))
    return folder


def test_a_valid_skill_is_found_with_its_prompt_and_scripts(tmp_path: Path) -> None:
    folder = make_skill(tmp_path, "lantern", scripts=[{"name": "lit", "path": "bin/lit.py"}])
    (folder / "prompt.md").write_text("Call the lantern when it is dark.\n")
    found = discover_skills([tmp_path])
    assert found.problems == ()
    skill = found.skills["lantern"]
    assert skill.prompt == "Call the lantern when it is dark.\n"
    script = found.resolve("skills/lantern/bin/lit.py")
    assert (script.skill, script.file) == ("lantern", (folder / "bin/lit.py").resolve())
    assert script.skill_folder == folder.resolve()


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda f: (f / "skill.json").write_text("{not json"), "malformed JSON"),
        (lambda f: (f / "skill.json").write_text('{"name": "broken"}'), "missing required"),
        (
            lambda f: (f / "skill.json").write_text(
                json.dumps({"name": "other", "version": "1.0.0", "description": "x"})
            ),
            "but its folder is 'broken'",
        ),
    ],
)
def test_an_invalid_manifest_skips_the_skill_with_a_reason(
    tmp_path: Path, damage: Any, problem: str
) -> None:
    damage(make_skill(tmp_path, "broken"))
    make_skill(tmp_path, "fine")
    found = discover_skills([tmp_path])
    assert list(found.skills) == ["fine"]
    (reported,) = found.problems
    assert "broken" in reported
    assert "skipped" in reported
    assert problem in reported


def test_a_missing_script_drops_the_script_or_the_skill_when_required(tmp_path: Path) -> None:
    scripts = [
        {"name": "main", "path": "main.py"},
        {"name": "extra", "path": "extra.py"},
    ]
    folder = make_skill(tmp_path, "optional", scripts=scripts)
    (folder / "extra.py").unlink()
    folder = make_skill(tmp_path, "strict", scripts=[{**s, "required": True} for s in scripts])
    (folder / "extra.py").unlink()
    found = discover_skills([tmp_path])
    assert list(found.skills) == ["optional"]
    assert list(found.skills["optional"].scripts) == ["skills/optional/main.py"]
    assert any("script not usable, extra.py is not a file" in p for p in found.problems)
    assert any("strict" in p and "skipped, its required script" in p for p in found.problems)


def test_a_script_that_leaves_its_folder_through_a_link_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.py"
    outside.write_text(SCRIPT)
    folder = make_skill(tmp_path / "skills", "sneaky", scripts=[{"name": "run", "path": "run.py"}])
    (folder / "run.py").unlink()
    (folder / "run.py").symlink_to(outside)
    found = discover_skills([tmp_path / "skills"])
    assert found.skills["sneaky"].scripts == {}
    assert any("run.py leaves the skill folder" in p for p in found.problems)
    with pytest.raises(UnusableScript, match="declares no such script"):
        found.resolve("skills/sneaky/run.py")


def test_a_script_that_is_neither_python_nor_executable_is_refused(tmp_path: Path) -> None:
    folder = make_skill(tmp_path, "shell", scripts=[{"name": "go", "path": "go.sh"}])
    os.chmod(folder / "go.sh", 0o644)
    found = discover_skills([tmp_path])
    assert any("go.sh is not executable" in p for p in found.problems)
    os.chmod(folder / "go.sh", 0o755)
    assert discover_skills([tmp_path]).problems == ()


def test_an_unusable_input_schema_is_reported(tmp_path: Path) -> None:
    folder = make_skill(
        tmp_path, "typed", scripts=[{"name": "run", "path": "run.py", "inputSchema": "in.json"}]
    )
    (folder / "in.json").write_text('{"type": "no such type"}')
    found = discover_skills([tmp_path])
    assert any("its input schema in.json is unusable" in p for p in found.problems)


def test_first_folder_wins_and_missing_dependencies_skip_a_skill(tmp_path: Path) -> None:
    make_skill(tmp_path / "a", "twin")
    make_skill(tmp_path / "b", "twin")
    make_skill(tmp_path / "b", "needy", dependencies=["ghost"])
    found = discover_skills([tmp_path / "a", tmp_path / "b", tmp_path / "nowhere"])
    assert list(found.skills) == ["twin"]
    assert found.skills["twin"].folder == (tmp_path / "a" / "twin").resolve()
    assert len(found.problems) == 3
    assert any("depends on skills not found: ghost" in p for p in found.problems)
    assert any("nowhere: not a folder of skills" in p for p in found.problems)


@pytest.mark.parametrize(
    ("tool_path", "reason"),
    [
        ("skills/twin", "a script path is written skills/<skill name>/<script path>"),
        ("bin/twin/run.py", "a script path is written"),
        ("skills/ghost/run.py", "no skill named 'ghost' (skills: twin)"),
        (
            "skills/twin/skill.json",
            "the skill 'twin' declares no such script (declared: skills/twin/run.py)",
        ),
        ("skills/twin/run.py", "the skill 'twin' is disabled for this plan"),
    ],
)
def test_resolution_names_what_is_wrong(tmp_path: Path, tool_path: str, reason: str) -> None:
    make_skill(tmp_path, "twin")
    skills = discover_skills([tmp_path])
    disabled = ["twin"] if "disabled" in reason else []
    with pytest.raises(UnusableScript) as raised:
        skills.resolve(tool_path, disabled=disabled)
    assert raised.value.reason.startswith(reason)


def test_the_bundled_skills_are_all_usable() -> None:
    skills = bundled_skills()
    assert skills.problems == ()
    assert set(skills.skills) == {
        "dice-roller",
        "door-examiner",
        "memory",
        "reputation",
        "storyteller",
        "torch-lighter",
    }
    for skill in skills.skills.values():
        assert skill.prompt.strip(), skill.name
        assert skill.scripts, skill.name
        for script in skill.scripts.values():
            assert script.input_validator is not None, script.tool_path
