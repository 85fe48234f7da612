"""`session drive`: the local model keeping a session plan through the planning tools.

The profile tests draw calls from the decoding schema and check each against
the tool's contract and rules: a call the model writes is well formed by
construction. The model tests use the packaged model, as CI does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trio
from commands import cli, without_a_model
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from packaged_model import model_file
from schema_strategies import valid_documents

from plancontracts import SESSION_PLAN, SESSION_SETUP_PLAN, decode
from plancontracts.generated.session_plans import SessionPlan
from plancontracts.pytest_plugin import PromptSnapshot
from plancontracts.runtime.core.errors import ContractError, GenerationFailed
from plancontracts.runtime.core.sessions import ToolCall
from plancontracts.runtime.core.validation import convert
from plancontracts.runtime.model.chat import render_chat
from plancontracts.runtime.model.local import LocalModel
from plancontracts.runtime.session_plans import (
    MAX_OBJECTIVE,
    TOOLS,
    Drive,
    Driver,
    PlanSession,
    call_profile,
    checked_objective,
    drive_messages,
    open_tools,
)
from plancontracts.runtime.session_plans.prompts import RECENT_CALLS

OBJECTIVE = "Triage the open bug reports"


def a_session(*calls: tuple[str, dict[str, Any]]) -> PlanSession:
    session = PlanSession()
    for tool, arguments in calls:
        assert session.call(tool, arguments).ok
    return session


SET_UP = ("planning_setup_plan", {"objective": OBJECTIVE, "initial_steps": [{"title": "List"}]})
STATES = {
    "no plan": a_session(),
    "active": a_session(SET_UP, ("planning_add_step", {"steps": [{"title": "Label"}]})),
    "completed": a_session(SET_UP, ("planning_mark_step", {"step_id": "S001", "status": "done"})),
    "abandoned": a_session(SET_UP, ("planning_clear_plan", {})),
}


def names(state: str) -> list[str]:
    return [tool.name for tool in open_tools(STATES[state].latest)]


def test_a_drive_offers_the_tools_the_plan_does_not_refuse() -> None:
    assert names("no plan") == ["planning_setup_plan"]
    assert names("abandoned") == ["planning_setup_plan"]
    assert names("active") == [
        "planning_add_step",
        "planning_update_step",
        "planning_mark_step",
        "planning_clear_plan",
    ]
    # A completed plan takes no new steps and no updates, but can be marked back or cleared.
    assert names("completed") == ["planning_mark_step", "planning_clear_plan"]
    # Reading is never offered: the plan is in the prompt before every call.
    assert all("planning_read_plan" not in names(state) for state in STATES)


@pytest.mark.parametrize("state", list(STATES))
@given(data=st.data())
def test_every_call_the_profile_allows_passes_its_tools_contract(
    state: str, data: st.DataObject
) -> None:
    plan = STATES[state].latest
    profile = call_profile(plan, OBJECTIVE)
    call = data.draw(valid_documents(profile), label="call")
    assert Draft202012Validator(profile).is_valid(call)
    tool = TOOLS.named(call["tool"])
    convert(tool.parameters, call["arguments"])  # the contract and its rules: raises if not
    if tool.name == "planning_setup_plan":
        assert call["arguments"]["objective"] == OBJECTIVE
        assert call["arguments"]["initial_steps"]
    ids = {step.step_id for step in plan.steps} if plan else set()
    if "step_id" in call["arguments"] and ids:
        assert call["arguments"]["step_id"] in ids


def test_the_profile_fixes_the_objective_as_given_never_writes_one() -> None:
    setup = call_profile(None, f"  {OBJECTIVE}\t")["anyOf"][0]["properties"]["arguments"]
    assert setup["properties"]["objective"] == {"const": OBJECTIVE}  # trimmed as the tool trims


@pytest.mark.parametrize("objective", ["Ship the caf\u00e9 release", "\u00a0Ship it", "Ship\nit"])
def test_the_profile_refuses_an_objective_the_contract_cannot_hold(objective: str) -> None:
    # Left to the model, such an objective was replaced by one it wrote ("Triage" for "Triage é").
    with pytest.raises(ContractError):
        convert(SESSION_SETUP_PLAN, {"objective": objective.strip(" \t\n")})
    with pytest.raises(ValueError, match=r"^the objective holds .* not allowed: A plan objective"):
        call_profile(None, objective)


def test_an_update_in_the_profile_always_changes_something() -> None:
    profile = call_profile(STATES["active"].latest, OBJECTIVE)
    validator = Draft202012Validator(profile)
    empty = {"tool": "planning_update_step", "arguments": {"step_id": "S001"}}
    nulls = {"tool": "planning_update_step", "arguments": {"step_id": "S001", "title": None}}
    assert not validator.is_valid(empty)
    assert not validator.is_valid(nulls)
    titled = {"tool": "planning_update_step", "arguments": {"step_id": "S002", "title": "Tag"}}
    assert validator.is_valid(titled)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("   ", "the objective is empty"),
        ("x" * (MAX_OBJECTIVE + 1), f"at most {MAX_OBJECTIVE} allowed"),
        ("Ship the caf\u00e9 release", 'holds "\u00e9" (U+00E9) at character 13, not allowed'),
        ("\u00a0Ship it", "holds U+00A0 at character 1, not allowed"),
    ],
)
def test_an_objective_is_one_the_plan_can_hold(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        checked_objective(text)
    assert checked_objective(f"  {OBJECTIVE}\n") == OBJECTIVE


# The prompt ---------------------------------------------------------------------------------


def made(
    session: PlanSession, tool: str, arguments: dict[str, Any]
) -> ToolCall[SessionPlan | None]:
    return ToolCall(tool, arguments, session.call(tool, arguments))


def test_the_drive_prompt(prompt_snapshot: PromptSnapshot) -> None:
    session = PlanSession()
    calls = [
        made(session, "planning_add_step", {"steps": [{"title": "List"}]}),
        made(session, *SET_UP),
        made(session, "planning_mark_step", {"step_id": "S001", "status": "in_progress"}),
    ]
    messages = drive_messages(OBJECTIVE, calls, session.latest)
    assert render_chat(messages, None, answer="Tool call JSON") == prompt_snapshot


def test_the_prompt_keeps_only_the_last_calls() -> None:
    session = a_session(SET_UP)
    calls = [
        made(session, "planning_update_step", {"step_id": "S001", "title": f"List {number}"})
        for number in range(RECENT_CALLS + 3)
    ]
    messages = drive_messages(OBJECTIVE, calls, session.latest)
    assert len(messages) == 2 + 2 * RECENT_CALLS
    assert '"List 3"' in messages[2]["content"]  # the first three are left out
    assert messages[-1]["content"].endswith(f"- S001 (pending): List {RECENT_CALLS + 2}")


# With the packaged model --------------------------------------------------------------------


@pytest.fixture
def driver(packaged_model: LocalModel) -> Driver:
    return Driver(packaged_model, say=lambda line: None)


def test_the_model_keeps_a_plan_with_calls_that_are_all_well_formed(driver: Driver) -> None:
    seen: list[ToolCall[SessionPlan | None]] = []
    drive = trio.run(lambda: driver.drive(OBJECTIVE, max_calls=4, seed=3, on_call=seen.append))
    assert drive.calls == seen
    assert 1 <= len(drive.calls) <= 4
    assert len(drive.calls) == 4 or drive.completed
    first = drive.calls[0]
    assert (first.tool, first.result.ok) == ("planning_setup_plan", True)
    for call in drive.calls:  # each passed its contract before it was applied (or ProfileBug)
        convert(TOOLS.named(call.tool).parameters, call.arguments)
    plan = drive.session.latest
    assert plan is not None
    assert plan.objective == OBJECTIVE
    decode(SESSION_PLAN, msgspec.json.encode(plan))  # the schema and the plan's rules


def test_a_drive_goes_on_from_the_calls_it_is_given(driver: Driver) -> None:
    drive = Drive(OBJECTIVE)
    trio.run(lambda: driver.drive(OBJECTIVE, max_calls=1, seed=1, drive=drive))
    assert len(drive.calls) == 1
    trio.run(lambda: driver.drive(OBJECTIVE, max_calls=2, seed=1, drive=drive))
    assert len(drive.calls) == 2  # max_calls counts the calls made before too
    with pytest.raises(ValueError, match="at least 1 call, not 0"):
        trio.run(lambda: driver.drive(OBJECTIVE, max_calls=0))


@pytest.mark.model
def test_a_prompt_the_context_cannot_hold_stops_the_drive_with_its_calls_kept() -> None:
    small = LocalModel.load(model_file(), context=512)  # less than the planning section
    drive = Drive(OBJECTIVE)
    with pytest.raises(GenerationFailed):
        trio.run(lambda: Driver(small).drive(OBJECTIVE, max_calls=3, drive=drive))
    assert drive.calls == []


@pytest.mark.usefixtures("shared_model")
def test_the_drive_command_prints_each_call_then_the_plan() -> None:
    done = cli("session", "drive", OBJECTIVE, "--max-calls", "2", "--seed", "4")
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    calls, last = lines[:-1], lines[-1]
    assert [call["call"] for call in calls] == list(range(1, len(calls) + 1))
    assert 1 <= len(calls) <= 2
    assert calls[0]["tool"] == "planning_setup_plan"
    assert calls[0]["ok"]
    assert calls[0]["arguments"]["objective"] == OBJECTIVE
    for call in calls:
        assert call.keys() >= {"tool", "ok", "arguments"}
        assert ("message" in call) == call["ok"]
        assert ("error" in call) != call["ok"]
    assert list(last) == ["plan"]
    decode(SESSION_PLAN, json.dumps(last["plan"]))
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["  "], "the objective is empty"),
        ([OBJECTIVE, "--max-calls", "0"], "argument --max-calls: must be 1 to 50: 0"),
        ([OBJECTIVE, "--strategy", "guess"], "argument --strategy: invalid choice: 'guess'"),
    ],
)
def test_the_drive_command_refuses_a_bad_command_line(arguments: list[str], message: str) -> None:
    done = cli("session", "drive", *arguments)
    assert (done.returncode, done.stdout) == (2, "")
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert "model:" not in done.stderr  # refused before any model is looked for


def test_the_drive_command_refuses_an_objective_a_plan_cannot_hold_in_one_line() -> None:
    # Where the model was left to write it, "Triage \u00e9" became the plan's "Triage".
    done = cli("session", "drive", "Ship the caf\u00e9 release", "--no-download")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1  # one line: no traceback, no model looked for
    assert 'the objective holds "\u00e9" (U+00E9) at character 13, not allowed' in done.stderr


def test_without_a_model_the_drive_command_says_so(tmp_path: Path) -> None:
    done = without_a_model("session", "drive", OBJECTIVE, "--no-download", hub_cache=tmp_path)
    assert done.returncode == 1
    assert done.stdout == ""
    assert "no model could be loaded, and a drive needs one" in done.stderr
    assert "Traceback" not in done.stderr
