"""The typed API: a contract's handle types what `decode` and `convert` return.

The tests below run as any test does, and mypy --strict checks this very file
(`test_mypy_strict_accepts_this_file_and_refuses_misuse`): `assert_type` is a
type error wherever the inferred type differs, so the typing is proven, not
only the values.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, assert_type

import pytest

import plancontracts
from plancontracts import (
    PLAN,
    PLANNING_BLOCK,
    TOOL_EVENT,
    Contract,
    contract_schema,
    convert,
    decode,
    root_type,
    violations,
)
from plancontracts.generated import CONTRACTS
from plancontracts.generated.planning_blocks import PlanningBlock
from plancontracts.generated.tool_plans import DoneEvent, Plan, ToolEvent
from plancontracts.runtime.core.schema_tree import constant_name

ROOT = Path(__file__).resolve().parent.parent
PLAN_TEXT = json.dumps(contract_schema(PLAN)["examples"][0])


def test_a_handle_types_the_document_decoded() -> None:
    plan = decode(PLAN, PLAN_TEXT)
    assert_type(plan, Plan)
    assert isinstance(plan, Plan)
    typed: Plan = decode(PLAN, PLAN_TEXT.encode())
    assert typed == plan


def test_a_contract_whose_documents_are_a_union_is_typed_as_the_union() -> None:
    event = decode(TOOL_EVENT, '{"version": "0", "type": "done", "ok": true}')
    assert_type(event, ToolEvent)
    assert isinstance(event, DoneEvent)


def test_convert_is_typed_as_decode_is() -> None:
    block = convert(PLANNING_BLOCK, contract_schema(PLANNING_BLOCK)["examples"][0])
    assert_type(block, PlanningBlock)
    assert isinstance(block, PlanningBlock)


def test_a_name_still_works_and_is_typed_any() -> None:
    plan = decode("plan", PLAN_TEXT)
    assert_type(plan, Any)
    assert plan == decode(PLAN, PLAN_TEXT)
    assert violations("plan", {}) == violations(PLAN, {})
    assert root_type(PLAN) is root_type("plan") is Plan


def test_every_handle_is_exported_from_the_public_front() -> None:
    exported = {
        name: getattr(plancontracts, name)
        for name in plancontracts.__all__
        if isinstance(getattr(plancontracts, name), Contract)
    }
    assert exported == {constant_name(name): handle for name, handle in CONTRACTS.items()}


@dataclass(frozen=True)
class _Lookalike:
    """A handle as another generated package defines it: its contracts are not plancontracts'."""

    name: str
    type: Any


def test_a_handle_of_another_package_is_refused() -> None:
    with pytest.raises(TypeError, match=r"its name or a handle"):
        # Not a Contract, on purpose: mypy refuses it as decode does.
        decode(_Lookalike("plan", Plan), PLAN_TEXT)  # type: ignore[call-overload]


# What mypy must refuse, each with the line and the error code it must give.
MISUSE = """\
from plancontracts import PLAN, TOOL_EVENT, decode
from plancontracts.generated.tool_plans import Plan


def misuse(data: bytes) -> None:
    plan: Plan = decode(TOOL_EVENT, data)
    print(decode(PLAN, data).no_such_field)
"""
REFUSED = {(6, "assignment"), (7, "attr-defined")}


@pytest.mark.process  # mypy, as a user runs it on their code
def test_mypy_strict_accepts_this_file_and_refuses_misuse(tmp_path: Path) -> None:
    # mypy reads the package as installed, through the view `dev.py test` checks it in.
    spec = importlib.util.spec_from_file_location("dev", ROOT / "dev.py")
    assert spec is not None
    assert spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    view: Path = dev.type_check_view()
    misuse = tmp_path / "misuse.py"
    misuse.write_text(MISUSE, encoding="utf-8")
    here = Path(__file__).resolve()
    command = [sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache")]
    done = subprocess.run(
        [*command, "--strict", "--no-error-summary", str(here), str(misuse)],
        cwd=view,  # its pyproject.toml is the project's: strict, with the same overrides
        env={**os.environ, "MYPYPATH": f"{view}{os.pathsep}{here.parent}"},
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    errors = re.findall(r"^(.+?):(\d+): error: .*\[([a-z-]+)\]$", done.stdout, flags=re.M)
    assert done.stderr == ""
    assert {(Path(path).name, int(line), code) for path, line, code in errors} == {
        ("misuse.py", line, code) for line, code in REFUSED
    }, done.stdout
