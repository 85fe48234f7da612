"""The suites that judge documents, again with the native fast path off, as a core install runs.

The rest of the suite runs with it on (`python3 dev.py setup` installs
native/), and the agreement suite judges each document it draws both ways in
one process. Here the suites that judge documents (agreement, validation,
depth, hostile documents, patterns) run in a pytest process of their own, where
`PLANCONTRACTS_NATIVE=0` keeps the extension from loading at all, with the fast
tier's number of examples.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
SUITES = (
    "test_agreement.py",
    "test_validation.py",
    "test_depth.py",
    "test_hostile_documents.py",
    "test_typed_patterns.py",
)
OFF = {**os.environ, "PLANCONTRACTS_NATIVE": "0"}

pytestmark = [pytest.mark.process, pytest.mark.slow]


def test_the_switch_keeps_the_extension_from_loading() -> None:
    probe = "import sys, plancontracts; print('plancontracts_fast' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", "from plancontracts import decode;" + probe],
        env=OFF,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "False\n"


def test_the_document_suites_pass_with_the_fast_path_off() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--fast",
            "-m",
            "not model",
            "-q",
            *(str(TESTS / suite) for suite in SUITES),
        ],
        env=OFF,
        cwd=TESTS.parent,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert " passed" in done.stdout.splitlines()[-1], done.stdout[-2000:]
