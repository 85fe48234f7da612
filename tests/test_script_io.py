"""`run_script` checks a script's input by the rules skill discovery applies, whoever starts it.

Each script here runs as a real process, started directly (not by the
executor), with one tool request on standard input.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from local_servers import http_server

from plancontracts.generated.tool_plans import DoneEvent, ErrorEvent, ToolEvent
from plancontracts.runtime.core.validation import decode

SCRIPT = """\
from pathlib import Path

from plancontracts.runtime.engine.script_io import run_script

run_script(lambda request, reply: "ran", input_schema=Path(__file__).parent / {schema!r})
"""


def skill(root: Path, schema: Any, schema_path: str = "in.json", **files: Any) -> Path:
    """A skill folder with one script, `run.py`, checking its input against `schema`."""
    folder = root / "checked"
    folder.mkdir()
    (folder / "skill.json").write_text(json.dumps({"name": "checked", "version": "1.0.0"}))
    (folder / schema_path).parent.mkdir(parents=True, exist_ok=True)
    (folder / schema_path).write_text(json.dumps(schema))
    (folder / "run.py").write_text(SCRIPT.format(schema=schema_path))
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content))
    return folder / "run.py"


def run(script: Path, tool_input: Any) -> tuple[int, list[ToolEvent], str]:
    """The script's exit status, its events and its standard error."""
    request = {
        "version": "0",
        "requestId": "r",
        "toolId": "t",
        "toolPath": "skills/checked/run.py",
        "attempt": 1,
        "input": tool_input,
        "dependencies": {},
        "dataDir": str(script.parent),
    }
    done = subprocess.run(
        [sys.executable, script.name],
        input=json.dumps(request).encode(),
        cwd=script.parent,
        capture_output=True,
        env={"PATH": os.defpath},
        timeout=60,
        check=False,
    )
    events = [decode("tool-event", line) for line in done.stdout.splitlines()]
    return done.returncode, events, done.stderr.decode()


def outcome(events: list[ToolEvent]) -> tuple[bool | None, list[str], str]:
    """Whether `done` said ok (None without one), the error codes, and the last error's message."""
    done = next((event.ok for event in events if isinstance(event, DoneEvent)), None)
    errors = [event for event in events if isinstance(event, ErrorEvent)]
    return done, [error.error_code for error in errors], errors[-1].error_message if errors else ""


def test_a_remote_reference_is_refused_without_a_request(tmp_path: Path) -> None:
    with http_server() as (address, requests):
        script = skill(tmp_path, {"$ref": f"http://{address}/schema.json"})
        status, events, stderr = run(script, {"x": 1})
    assert requests == []
    assert status == 1
    ok, codes, message = outcome(events)
    assert (ok, codes) == (None, ["unusable_input_schema"])
    assert message.endswith("only files of the skill folder can be referred to")
    assert message in stderr
    assert "Traceback" not in stderr


def test_a_reference_to_a_file_outside_the_skill_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"type": "string"}))
    script = skill(tmp_path, {"$ref": outside.as_uri()})
    status, events, _ = run(script, {"x": 1})
    assert status == 1
    assert outcome(events)[1] == ["unusable_input_schema"]
    assert "leaves the skill folder" in outcome(events)[2]


def test_pattern_properties_are_refused_as_discovery_refuses_them(tmp_path: Path) -> None:
    script = skill(tmp_path, {"type": "object", "patternProperties": {"^a": {"type": "string"}}})
    status, events, _ = run(script, {"abc": "x"})
    assert status == 1
    assert "patternProperties is not supported" in outcome(events)[2]


def test_references_reach_the_files_of_the_skill_folder(tmp_path: Path) -> None:
    # A schema in a subfolder refers to a file beside the manifest.
    common = {"type": "object", "properties": {"size": {"type": "integer", "maximum": 9}}}
    script = skill(
        tmp_path, {"$ref": "../common.json"}, "schemas/in.json", **{"common.json": common}
    )
    assert outcome(run(script, {"size": 3})[1]) == (True, [], "")
    status, events, _ = run(script, {"size": 30})
    assert status == 0
    assert outcome(events) == (
        False,
        ["bad_input"],
        "input /size: 30 is greater than the maximum of 9",
    )
