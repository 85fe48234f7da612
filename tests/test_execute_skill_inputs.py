"""`plancontracts execute` with skills whose scripts or input schemas are broken or hostile.

Each case runs the command as a user does (in the test's process), and expects a
warning or a rejection naming the problem: never a traceback, a hang, a
network request or a file read outside the skill folder. The last ones make
the same checks from Python, through `check_plan` and `execute_plan`.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio
from commands import cli
from fields import error_of
from local_servers import http_server, silent_server

from plancontracts.generated.tool_plans import Plan, ToolInvocation
from plancontracts.runtime.core.errors import MalformedJSON
from plancontracts.runtime.core.jsontext import parse
from plancontracts.runtime.engine.checks import check_plan
from plancontracts.runtime.engine.executor import execute_plan
from plancontracts.runtime.engine.limits import Limits
from plancontracts.runtime.engine.skills import discover_skills

PLAN_ID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
# Generous: these commands end in about a second, and within their --timeout
# of 3 s whatever happens; a hang is what the limit is there to catch.
LIMIT = 60
OK_SCRIPT = 'print(\'{"version": "0", "type": "done", "ok": true, "summary": "ran"}\')\n'


def skill(root: Path, scripts: dict[str, Any], **files: Any) -> Path:
    """Skill `typed` in `root`: one script per entry of `scripts` (its path: its input schema
    or None), each required: false, and `files` (JSON values) beside them."""
    folder = root / "typed"
    folder.mkdir(parents=True)
    declared = []
    for path, schema in scripts.items():
        (folder / path).write_text(OK_SCRIPT)
        declaration = {"name": path.removesuffix(".py"), "path": path, "required": False}
        declared.append(declaration | ({"inputSchema": schema} if schema else {}))
    manifest = {"name": "typed", "version": "1.0.0", "description": "Typed.", "scripts": declared}
    (folder / "skill.json").write_text(json.dumps(manifest))
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content))
    return folder


class Text(str):
    """An input given as JSON text, for values the json module will not write."""


def execute(
    tmp_path: Path, skills: Path, tool: str, value: Any = None, *options: str
) -> subprocess.CompletedProcess[str]:
    """`plancontracts execute` of a plan of one call of `skills/typed/<tool>` with input `value`."""
    call = {"toolId": "t", "toolPath": f"skills/typed/{tool}", "required": False}
    if value is not None:
        call["input"] = "<input>" if isinstance(value, Text) else value
    plan = json.dumps({"requestId": PLAN_ID, "tools": [call]})
    if isinstance(value, Text):
        plan = plan.replace('"<input>"', value)
    (tmp_path / "plan.json").write_text(plan)
    plan_file, data = str(tmp_path / "plan.json"), str(tmp_path / "data")
    done = cli(
        "execute", plan_file, "--skills", str(skills), "--data", data, *options, timeout=LIMIT
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def rejected(done: subprocess.CompletedProcess[str]) -> str:
    """The reason a rejected plan's readable result gives, after checking it was rejected."""
    assert done.returncode == 2, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    prefix = f"plan {PLAN_ID} rejected before execution: "
    assert first.startswith(prefix), first
    return first.removeprefix(prefix)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda f: None, "no such file or directory"),
        (lambda f: f.write_text("{"), "malformed JSON: "),
        (Path.mkdir, "not a regular file (a folder)"),
        (os.mkfifo, "not a regular file (a FIFO)"),
    ],
)
def test_a_broken_input_schema_is_a_warning_and_its_script_is_refused(
    tmp_path: Path, damage: Any, reason: str
) -> None:
    skills = tmp_path / "skills"
    folder = skill(skills, {"fine.py": None, "broken.py": "in.json"})
    damage(folder / "in.json")
    done = execute(tmp_path, skills, "fine.py")
    assert done.returncode == 0, done.stdout + done.stderr
    (warning,) = done.stderr.splitlines()
    assert warning.startswith("plancontracts: warning: ")
    assert "script not usable, broken.py: its input schema in.json is unusable: " in warning
    assert f"in.json is unusable: {reason}" in warning
    done = execute(tmp_path, skills, "broken.py")
    assert rejected(done).startswith(
        "invalid_plan: tool 't': skills/typed/broken.py: the skill 'typed' declares this script "
        f"but it is not usable: broken.py: its input schema in.json is unusable: {reason}"
    )


def test_an_input_schema_is_never_fetched_over_the_network(tmp_path: Path) -> None:
    with http_server() as (address, requests), silent_server() as (silent, listener):
        refs = {"answers.py": f"http://{address}/s.json", "silent.py": f"http://{silent}/s.json"}
        skill(
            tmp_path / "skills",
            {tool: f"{tool}.json" for tool in refs},
            **{f"{tool}.json": {"$ref": ref} for tool, ref in refs.items()},
        )
        for tool, ref in refs.items():
            done = execute(tmp_path, tmp_path / "skills", tool, {}, "--timeout", "3")
            assert rejected(done).startswith(f"invalid_plan: tool 't': skills/typed/{tool}: ")
            assert f"$ref {ref!r}: only files of the skill folder can be referred to" in done.stderr
        assert requests == []
        with pytest.raises(BlockingIOError):
            listener.accept()


def test_file_references_resolve_inside_the_skill_folder_only(tmp_path: Path) -> None:
    (tmp_path / "secret.json").write_text('{"type": "string"}')
    inside = (tmp_path / "skills" / "typed" / "colour.json").as_uri()
    outside = (tmp_path / "secret.json").as_uri()
    schemas = {
        tool: {"properties": {"colour": {"$ref": ref}}}
        for tool, ref in [
            ("inside.py", inside),
            ("outside.py", outside),
            ("missing.py", "#/$defs/missing"),
        ]
    }
    skill(
        tmp_path / "skills",
        {tool: f"{tool}.json" for tool in schemas},
        **{f"{tool}.json": schema for tool, schema in schemas.items()},
        **{"colour.json": {"enum": ["red"]}},
    )
    done = execute(tmp_path, tmp_path / "skills", "inside.py", {"colour": "red"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"$ref {outside!r}: it leaves the skill folder" in done.stderr
    assert "$ref '#/$defs/missing' points to nothing" in done.stderr
    done = execute(tmp_path, tmp_path / "skills", "inside.py", {"colour": "blue"})
    assert rejected(done) == "invalid_plan: tool 't': input /colour: 'blue' is not one of ['red']"
    for tool in ("outside.py", "missing.py"):
        done = execute(tmp_path, tmp_path / "skills", tool, {"colour": "red"})
        assert "it is not usable" in rejected(done)


def deep_input(depth: int) -> Text:
    return Text('{"a": ' + "[" * depth + "]" * depth + "}")


def deepest_parsed() -> int:
    """The deepest `deep_input` a plan can hold: the parser's limit less the plan's own levels."""
    call = {"toolId": "t", "toolPath": "skills/typed/run.py", "input": "<input>"}
    plan = json.dumps({"requestId": PLAN_ID, "tools": [call]})
    depth = 0
    while True:
        try:
            parse(plan.replace('"<input>"', deep_input(depth + 1)).encode())
        except MalformedJSON:
            return depth
        depth += 1


@pytest.mark.parametrize("depth", [400, 700, deepest_parsed()])
def test_an_input_too_deep_for_its_recursive_schema_is_rejected(tmp_path: Path, depth: int) -> None:
    schema: dict[str, Any] = {"properties": {"a": {"$ref": "#/$defs/list"}}}
    schema["$defs"] = {"list": {"items": {"$ref": "#/$defs/list"}}}
    skill(tmp_path / "skills", {"run.py": "in.json"}, **{"in.json": schema})
    done = execute(tmp_path, tmp_path / "skills", "run.py", deep_input(depth), "--timeout", "3")
    assert rejected(done) == (
        "invalid_plan: tool 't': input nests too deeply to be checked against in.json"
    )
    done = execute(tmp_path, tmp_path / "skills", "run.py", deep_input(depth), "--json")
    assert json.loads(done.stdout)["error"] == {
        "category": "invalid_plan",
        "code": "input_too_deep",
        "message": "tool 't': input nests too deeply to be checked against in.json",
        "details": {"toolId": "t"},
    }


@pytest.mark.parametrize(
    ("pattern", "code", "message"),
    [
        # Python's `re` backtracks on this one for ever; `regex` sees through it.
        ("^(a+)+$", "invalid_input", "tool 't': input /name: 'aaaa...' does not match '^(a+)+$'"),
        pytest.param(
            "^(a|aa)+$",
            "input_check_timeout",
            "tool 't': checking the input against in.json ran out of time before the plan's "
            "deadline (matching the pattern '^(a|aa)+$')",
            marks=pytest.mark.slow,  # it waits for the plan's deadline, 3 s
        ),
    ],
)
def test_a_pattern_that_backtracks_is_stopped_at_the_plan_deadline(
    tmp_path: Path, pattern: str, code: str, message: str
) -> None:
    schema = {"properties": {"name": {"pattern": pattern}}}
    skill(tmp_path / "skills", {"run.py": "in.json"}, **{"in.json": schema})
    name = "a" * 64 + "!"
    done = execute(
        tmp_path, tmp_path / "skills", "run.py", {"name": name}, "--timeout", "3", "--json"
    )
    assert done.returncode == 2, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert (error["category"], error["code"]) == ("invalid_plan", code)
    assert error["message"] == message.replace("aaaa...", name)


# The same checks from Python ----------------------------------------------------------


def test_check_plan_rejects_what_execute_rejects_without_an_event_loop(tmp_path: Path) -> None:
    schema: dict[str, Any] = {"properties": {"a": {"$ref": "#/$defs/list"}}}
    schema["$defs"] = {"list": {"items": {"$ref": "#/$defs/list"}}}
    folder = skill(tmp_path, {"deep.py": "deep.json", "broken.py": "none.json"})
    (folder / "deep.json").write_text(json.dumps(schema))
    skills = discover_skills([tmp_path])
    plan = Plan(
        request_id=PLAN_ID,
        tools=[
            ToolInvocation(
                tool_id="t", tool_path="skills/typed/deep.py", input=json.loads(deep_input(400))
            )
        ],
    )
    error = check_plan(plan, skills=skills)
    assert error is not None
    assert (error.category, error.code) == ("invalid_plan", "input_too_deep")
    plan.tools[0] = ToolInvocation(tool_id="t", tool_path="skills/typed/broken.py", required=False)
    error = check_plan(plan, skills=skills)
    assert error is not None
    assert (error.category, error.code) == ("invalid_plan", "unusable_script")
    assert "declares this script but it is not usable" in error.message


def test_a_pattern_check_stops_at_the_deadline_of_execute_plan(tmp_path: Path) -> None:
    folder = skill(tmp_path, {"run.py": "in.json"})
    (folder / "in.json").write_text('{"properties": {"name": {"pattern": "^(a|aa)+$"}}}')
    call = ToolInvocation(
        tool_id="t", tool_path="skills/typed/run.py", input={"name": "a" * 64 + "!"}
    )
    plan = Plan(request_id=PLAN_ID, tools=[call])
    limits = Limits(plan_timeout=1)
    result = trio.run(
        partial(execute_plan, plan, skills=discover_skills([tmp_path]), limits=limits)
    )
    error = error_of(result)
    assert (error.category, error.code) == ("invalid_plan", "input_check_timeout")
    assert result.tool_results == []
