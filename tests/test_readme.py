"""README.md: its quick start, command-line and Python examples run as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, flags=re.DOTALL)
QUICK_START = BLOCKS[0][1]
SHELL_EXAMPLES = [
    (index, body) for index, (kind, body) in enumerate(BLOCKS) if kind == "sh" and index > 0
]


def test_the_quick_start_is_exactly_two_commands_and_ci_runs_the_second() -> None:
    assert README.index("## Quick start") < README.index("```sh")
    assert QUICK_START.splitlines() == ["python3 dev.py demo", "python3 dev.py test"]
    ci = (ROOT / ".ci/run").read_text(encoding="utf-8")
    assert [line for line in ci.splitlines() if "dev.py" in line] == ["python3 dev.py test"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One folder for every example, as for a reader who follows the README in order."""
    return tmp_path_factory.mktemp("readme")


@pytest.mark.parametrize(("index", "script"), SHELL_EXAMPLES, ids=lambda v: str(v)[:40])
def test_shell_examples_run(index: int, script: str, folder: Path) -> None:
    rewrites_the_project = re.search(
        r"plancontracts generate(?! --check)|--snapshot-update", script
    )
    if rewrites_the_project or "dev.py bench" in script:
        pytest.skip("changes the project or times the machine: run by hand")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT if "generate" in script else folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    following = BLOCKS[index + 1] if index + 1 < len(BLOCKS) else ("", "")
    if following[0] == "text":  # the output the README promises
        assert done.stdout == following[1]


@pytest.mark.parametrize(
    "code", [body for kind, body in BLOCKS if kind == "python"], ids=lambda v: v[:40]
)
def test_python_examples_run(code: str) -> None:
    exec(compile(code, "README.md", "exec"), {})
