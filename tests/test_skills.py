"""Skill discovery: what is found, what is skipped and why, and how plans name scripts."""

from __future__ import annotations

import json
import math
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from local_servers import http_server

from plancontracts.runtime.core.errors import UnusableScript
from plancontracts.runtime.engine.input_schemas import MAX_INPUT_SCHEMA_BYTES
from plancontracts.runtime.engine.skills import (
    MAX_PROMPT_BYTES,
    SkillSet,
    bundled_skills,
    discover_skills,
)

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
    with pytest.raises(UnusableScript, match=r"declares this script but it is not usable: run\.py"):
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


# Files that are not what they should be ---------------------------------------------


def discover_within(folders: list[Path], seconds: float = 60) -> SkillSet:
    """`discover_skills(folders)`, failing the test if it has not returned after `seconds`.

    A discovery that opened a FIFO for reading would wait for a writer forever;
    the thread is a daemon, so such a failure does not hang the test run too.
    """
    found: list[SkillSet] = []
    thread = threading.Thread(target=lambda: found.append(discover_skills(folders)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert found, f"discovery did not return within {seconds} s"
    return found[0]


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


def make_socket(path: Path) -> None:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.close()  # the socket file stays


SPECIAL_FILES: dict[str, Callable[[Path], object]] = {
    "a FIFO": make_fifo,
    "a socket": make_socket,
    "a folder": Path.mkdir,
}


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda f: None, "no such file or directory"),
        (lambda f: f.write_text('{"type": "object",'), "malformed JSON"),
        (lambda f: f.write_text('{"type": "object", "type": "array"}'), "duplicate key"),
        (lambda f: f.write_bytes(b" " * (MAX_INPUT_SCHEMA_BYTES + 1)), "hold more than"),
        (lambda f: f.symlink_to(f), "symbolic links"),
        *[(make, f"not a regular file ({kind})") for kind, make in SPECIAL_FILES.items()],
    ],
)
@pytest.mark.parametrize("required", [False, True])
def test_an_unreadable_input_schema_drops_its_script_with_a_warning(
    tmp_path: Path, damage: Any, reason: str, required: bool
) -> None:
    scripts = [
        {"name": "run", "path": "run.py"},
        {"name": "typed", "path": "typed.py", "inputSchema": "in.json", "required": required},
    ]
    damage(make_skill(tmp_path, "typed", scripts=scripts) / "in.json")
    found = discover_within([tmp_path])
    (problem,) = found.problems
    assert "typed.py: its input schema in.json is unusable: " in problem
    assert reason in problem
    assert "\n" not in problem
    if required:
        assert found.skills == {}
        assert "skipped, its required script" in problem
    else:
        assert list(found.skills["typed"].scripts) == ["skills/typed/run.py"]
        assert "script not usable" in problem
        with pytest.raises(
            UnusableScript, match=r"declares this script but it is not usable: typed\.py: its input"
        ):
            found.resolve("skills/typed/typed.py")


@pytest.mark.parametrize("kind", SPECIAL_FILES)
def test_a_manifest_that_is_no_regular_file_skips_the_skill_unopened(
    tmp_path: Path, kind: str
) -> None:
    folder = make_skill(tmp_path, "odd")
    (folder / "skill.json").unlink()
    SPECIAL_FILES[kind](folder / "skill.json")
    found = discover_within([tmp_path])
    assert found.skills == {}
    assert found.problems == (f"{folder / 'skill.json'}: skipped, not a regular file ({kind})",)


@pytest.mark.parametrize("kind", SPECIAL_FILES)
def test_a_prompt_that_is_no_regular_file_is_not_used(tmp_path: Path, kind: str) -> None:
    folder = make_skill(tmp_path, "odd")
    SPECIAL_FILES[kind](folder / "prompt.md")
    found = discover_within([tmp_path])
    assert found.skills["odd"].prompt == ""
    prompt = (folder / "prompt.md").resolve()
    assert found.problems == (f"{prompt}: prompt not used, not a regular file ({kind})",)


def test_a_fifo_that_replaces_a_file_after_its_check_is_refused_without_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = make_skill(
        tmp_path, "typed", scripts=[{"name": "run", "path": "run.py", "inputSchema": "in.json"}]
    )
    os.mkfifo(folder / "in.json")
    # As if the FIFO took the place of a regular file between the check and the opening.
    real_stat = os.stat
    fifo = str((folder / "in.json").resolve())
    monkeypatch.setattr(
        os,
        "stat",
        lambda path, **k: real_stat(folder / "run.py" if str(path) == fifo else path, **k),
    )
    (problem,) = discover_within([tmp_path]).problems
    assert problem.endswith("its input schema in.json is unusable: not a regular file (a FIFO)")


def test_a_prompt_larger_than_the_limit_is_not_used(tmp_path: Path) -> None:
    folder = make_skill(tmp_path, "wordy")
    (folder / "prompt.md").write_text("x" * (MAX_PROMPT_BYTES + 1))
    found = discover_within([tmp_path])
    assert found.skills["wordy"].prompt == ""
    prompt = (folder / "prompt.md").resolve()
    assert found.problems == (f"{prompt}: prompt not used, larger than {MAX_PROMPT_BYTES} bytes",)


# What an input schema may refer to ---------------------------------------------------


def typed_skill(root: Path, schema: Any, **files: Any) -> Path:
    """A skill `typed` whose one script takes `schema` as input schema, beside `files`."""
    folder = make_skill(
        root, "typed", scripts=[{"name": "run", "path": "run.py", "inputSchema": "in.json"}]
    )
    (folder / "in.json").write_text(json.dumps(schema))
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content))
    return folder


def the_problem(root: Path) -> str:
    found = discover_within([root])
    assert found.skills["typed"].scripts == {}
    (problem,) = found.problems
    assert "\n" not in problem
    assert problem.count("run.py: its input schema in.json is unusable: ") == 1
    return problem


def test_references_to_files_of_the_skill_folder_resolve(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {
            "size": {"$ref": "sizes.json#/$defs/size"},
            "colour": {"$ref": "colour.json"},
            "shade": {"$ref": "#/$defs/shade"},
        },
        "$defs": {"shade": {"enum": ["light", "dark"]}},
    }
    folder = typed_skill(
        tmp_path,
        schema,
        **{
            "sizes.json": {"$defs": {"size": {"type": "integer", "maximum": 9}}},
            "colour.json": {"$ref": "more/colour.json"},
        },
    )
    (folder / "more").mkdir()
    (folder / "more" / "colour.json").write_text('{"$ref": "../names.json"}')
    (folder / "names.json").write_text('{"enum": ["red", "green"]}')
    found = discover_within([tmp_path])
    assert found.problems == ()
    script = found.resolve("skills/typed/run.py")
    assert script.check_input({"size": 3, "colour": "red", "shade": "dark"}, seconds=60) is None
    problem = script.check_input({"size": 30, "colour": "blue"}, seconds=60)
    assert problem is not None
    assert problem.code == "invalid_input"
    # Files are read at discovery only: checking inputs reads nothing.
    (folder / "names.json").write_text('{"enum": ["blue"]}')
    assert script.check_input({"colour": "red"}, seconds=60) is None


def test_a_file_uri_inside_the_skill_folder_resolves(tmp_path: Path) -> None:
    uri = (tmp_path / "typed" / "names.json").as_uri()
    typed_skill(tmp_path, {"$ref": uri}, **{"names.json": {"enum": ["red"]}})
    found = discover_within([tmp_path])
    assert found.problems == ()
    assert found.resolve("skills/typed/run.py").check_input("red", seconds=60) is None


@pytest.mark.parametrize(
    ("ref", "reason"),
    [
        ("#/$defs/missing", "$ref '#/$defs/missing' points to nothing"),
        ("#nowhere", "$ref '#nowhere' points to nothing"),
        ("none.json", "$ref 'none.json': no such file or directory"),
        ("../secret.json", "$ref '../secret.json': it leaves the skill folder"),
        ("https://json-schema.org/draft/2020-12/schema", "only files of the skill folder"),
        ("ftp://example.com/schema.json", "only files of the skill folder"),
        ("urn:example:thing", "only files of the skill folder"),
        ("file://otherhost/schema.json", "only files of the skill folder"),
        ("broken.json", "$ref 'broken.json': malformed JSON"),
        ("notaschema.json", "$ref 'notaschema.json': 12 is not of type"),
        ("sizes.json#/x", "$ref 'sizes.json#/x': 'nonsense' is not valid"),
        ("http://[::1/x.json", "$ref 'http://[::1/x.json': Invalid IPv6 URL"),
        ("draft7.json", "$schema 'http://json-schema.org/draft-07/schema#' is not supported"),
    ],
)
def test_a_broken_or_refused_reference_makes_the_script_unusable(
    tmp_path: Path, ref: str, reason: str
) -> None:
    typed_skill(
        tmp_path / "skills",
        {"type": "object", "properties": {"a": {"$ref": ref}}},
        **{
            "notaschema.json": 12,
            "sizes.json": {"x": {"type": "nonsense"}},
            "draft7.json": {"$schema": "http://json-schema.org/draft-07/schema#"},
        },
    )
    (tmp_path / "skills" / "typed" / "broken.json").write_text("{")
    (tmp_path / "skills" / "secret.json").write_text("{}")
    assert reason in the_problem(tmp_path / "skills")


def test_file_uris_and_links_that_leave_the_skill_folder_are_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.json").write_text("{}")
    uri = (tmp_path / "secret.json").as_uri()
    folder = typed_skill(tmp_path / "skills", {"anyOf": [{"$ref": "link.json"}]})
    (folder / "link.json").symlink_to(tmp_path / "secret.json")
    assert "$ref 'link.json': it leaves the skill folder" in the_problem(tmp_path / "skills")
    (folder / "in.json").write_text(json.dumps({"$ref": uri}))
    assert f"$ref '{uri}': it leaves the skill folder" in the_problem(tmp_path / "skills")


def test_a_reference_is_refused_without_a_request(tmp_path: Path) -> None:
    with http_server() as (address, requests):
        typed_skill(tmp_path, {"$ref": f"http://{address}/schema.json"})
        assert "only files of the skill folder" in the_problem(tmp_path)
    assert requests == []


def test_the_files_an_input_schema_reaches_share_its_size_limit(tmp_path: Path) -> None:
    half = {"enum": ["x" * (MAX_INPUT_SCHEMA_BYTES // 2)]}
    typed_skill(
        tmp_path,
        {"anyOf": [{"$ref": "a.json"}, {"$ref": "b.json"}]},
        **{"a.json": half, "b.json": half},
    )
    assert f"hold more than {MAX_INPUT_SCHEMA_BYTES} bytes" in the_problem(tmp_path)


def test_a_schema_that_nests_too_deeply_is_refused(tmp_path: Path) -> None:
    schema: dict[str, Any] = {"type": "array"}
    for _ in range(600):
        schema = {"type": "array", "items": schema}
    typed_skill(tmp_path, schema)
    assert "nests too deeply" in the_problem(tmp_path)


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"patternProperties": {"^a": {}}}, "patternProperties is not supported"),
        ({"properties": {"a": {"patternProperties": {}}}}, "patternProperties is not supported"),
        ({"pattern": "(unclosed"}, "'(unclosed' is not a 'regex'"),
    ],
)
def test_pattern_keywords_that_cannot_be_checked_in_bounded_time_are_refused(
    tmp_path: Path, schema: Any, reason: str
) -> None:
    typed_skill(tmp_path, schema)
    assert reason in the_problem(tmp_path)


# Checking an input --------------------------------------------------------------------


def nested(depth: int, inner: Any = ()) -> Any:
    """`depth` arrays, one inside the other, around the items `inner`."""
    value: Any = list(inner)
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [400, 990])
def test_an_input_too_deep_for_its_recursive_schema_is_a_clear_problem(
    tmp_path: Path, depth: int
) -> None:
    typed_skill(tmp_path, {"type": "array", "items": {"$ref": "#"}})
    script = discover_within([tmp_path]).resolve("skills/typed/run.py")
    assert script.check_input(nested(20), seconds=60) is None
    problem = script.check_input(nested(depth), seconds=60)
    assert problem is not None
    assert (problem.code, problem.pointer) == ("input_too_deep", None)
    assert problem.message == "input nests too deeply to be checked against in.json"


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": "^(a|aa)+$"},
        # A subschema that names its dialect keeps the time limit.
        {
            "$ref": "#/$defs/name",
            "$defs": {
                "name": {
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "pattern": "^(a|aa)+$",
                }
            },
        },
    ],
)
def test_a_pattern_that_backtracks_is_stopped_when_time_is_up(
    tmp_path: Path, schema: dict[str, Any]
) -> None:
    # `regex` sees through ^(a+)+$, which takes Python's `re` forever; not through this one.
    typed_skill(tmp_path, schema)
    script = discover_within([tmp_path]).resolve("skills/typed/run.py")
    assert script.check_input("aaaa", seconds=60) is None
    assert script.check_input("aaaa", seconds=math.inf) is None  # a plan without a deadline
    problem = script.check_input("a" * 64 + "!", seconds=0.5)
    assert problem is not None
    assert (problem.code, problem.pointer) == ("input_check_timeout", None)
    assert problem.message == (
        "checking the input against in.json ran out of time before the plan's deadline "
        "(matching the pattern '^(a|aa)+$')"
    )


def test_recursion_that_multiplies_work_is_stopped_when_time_is_up(tmp_path: Path) -> None:
    # Each level checks the level below twice, without any pattern: 2^depth steps. Naming
    # its dialect, the schema must not make jsonschema switch to its own validator at "#".
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "array",
        "items": {"anyOf": [{"$ref": "#"}, {"$ref": "#"}]},
    }
    typed_skill(tmp_path, schema)
    script = discover_within([tmp_path]).resolve("skills/typed/run.py")
    problem = script.check_input(nested(60, inner=[1]), seconds=0.5)
    assert problem is not None
    assert problem.code == "input_check_timeout"
    assert problem.message.endswith("ran out of time before the plan's deadline")
