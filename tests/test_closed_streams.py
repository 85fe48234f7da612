"""Every command with standard input closed, standard output closed, or output to a full disk.

Each runs as a user would start it from a shell (`<&-`, `>&-`, `>/dev/full`),
and must end with one line on standard error and exit status 1, never a
traceback. Commands that load a model run with the packaged one hidden, so
they plan with patterns or say that there is no model, at once.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from commands import _WITHOUT_A_MODEL

from plancontracts import contract_schema

# The process is the subject: its standard streams, as the shell leaves them.
pytestmark = pytest.mark.process

PLAN = contract_schema("plan")["examples"][0]
BLOCK = contract_schema("planning-block")["examples"][0]

# Each command, with `-` for standard input where it reads any (play always does).
COMMANDS = {
    "validate": ["validate", "plan", "-"],
    "normalize": ["normalize", "planning-block", "-"],
    "execute": ["execute", "-"],
    "plan": ["plan", "-"],
    "think": ["think", "-"],
    "play": ["play"],
    "schema": ["schema", "plan"],
    "contracts": ["contracts"],
    "examples": ["examples"],
    "goals simulate": ["goals", "simulate", "-", "--fallback"],
    "goals plan": ["goals", "plan", "Have food", "--fallback"],
}
READERS = ["validate", "normalize", "execute", "plan", "think", "play", "goals simulate"]
GOAL = {"event": "goal", "description": "Have food", "horizon": "short"}


def shell(
    arguments: list[str], redirection: str, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """The command started from a shell with `redirection`, in a fresh folder for its data."""
    program = [sys.executable, "-c", _WITHOUT_A_MODEL, *arguments]
    script = f"exec {shlex.join(program)} {redirection}"
    return subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=tmp_path,
    )


def with_files(name: str, tmp_path: Path) -> list[str]:
    """The command's arguments, reading a file in place of standard input."""
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    (tmp_path / "block.json").write_text(json.dumps(BLOCK))
    (tmp_path / "events.ndjson").write_text(json.dumps(GOAL) + "\n")
    files = {
        "validate": "plan.json",
        "normalize": "block.json",
        "execute": "plan.json",
        "goals simulate": "events.ndjson",
    }
    arguments = COMMANDS[name]
    if name in files:
        arguments = [files[name] if a == "-" else a for a in arguments]
    if name in ("plan", "think"):
        arguments = [name, "I light the torch"]
    if name == "execute":
        arguments += ["--data", str(tmp_path / "data")]
    return arguments


def assert_one_line_and_exit_1(done: subprocess.CompletedProcess[str], message: str) -> None:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "Exception ignored" not in done.stderr
    # Commands that look for a model say what they found first; the error is the last line.
    assert done.stderr.splitlines()[-1].startswith(f"plancontracts: error: {message}"), done.stderr


@pytest.mark.parametrize("name", READERS)
def test_a_closed_standard_input_is_one_line_and_exit_1(name: str, tmp_path: Path) -> None:
    done = shell(COMMANDS[name], "<&-", tmp_path)
    assert_one_line_and_exit_1(done, "standard input is closed")
    assert done.stdout == ""  # said before any work, the model's loading included
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_closed_standard_output_is_one_line_and_exit_1(name: str, tmp_path: Path) -> None:
    done = shell(with_files(name, tmp_path), "</dev/null >&-", tmp_path)
    assert_one_line_and_exit_1(done, "standard output is closed")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize("name", [name for name in COMMANDS if name != "think"])
def test_output_to_a_full_disk_is_one_line_and_exit_1(name: str, tmp_path: Path) -> None:
    done = shell(with_files(name, tmp_path), "</dev/null >/dev/full", tmp_path)
    assert_one_line_and_exit_1(done, "cannot write to standard output: no space left on device")
