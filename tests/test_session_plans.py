"""Session plans: the six tools through `Session.call`, snapshots, rules and `session run`.

Each decision the schemas record (in their descriptions) has its own test,
through the session as a model meets it: the message it reads, the field the
error points at, and a refused call that leaves the session as it was. Every
limit is read from the schemas. Property tests then run random call
sequences of all six tools, valid or not, and check the invariants after
every call; the command line is run as a user runs it, in this process.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from commands import cli
from hypothesis import given
from hypothesis import strategies as st
from schema_strategies import JSON_VALUES

from plancontracts import (
    SESSION_ADD_STEP,
    SESSION_CLEAR_PLAN,
    SESSION_MARK_STEP,
    SESSION_PLAN,
    SESSION_READ_PLAN,
    SESSION_SETUP_PLAN,
    SESSION_UPDATE_STEP,
    ContractError,
    Violation,
    decode,
    violations,
)
from plancontracts.generated.session_plans import (
    NewPlanStep,
    PlanStep,
    SessionMarkStep,
    SessionPlan,
    SessionSetupPlan,
    SessionUpdateStep,
    StepStatus,
)
from plancontracts.runtime.core.contracts import contract_schema, field_bound
from plancontracts.runtime.core.errors import (
    PlanContractsError,
    ToolValidationError,
    UnknownToolError,
)
from plancontracts.runtime.core.sessions import CallResult
from plancontracts.runtime.session_plans import (
    MAX_NOTES,
    MAX_STEPS,
    RULES,
    TOOLS,
    PlanSession,
    step_id,
    step_number,
)

SETUP = TOOLS.taking(SESSION_SETUP_PLAN).name
ADD = TOOLS.taking(SESSION_ADD_STEP).name
UPDATE = TOOLS.taking(SESSION_UPDATE_STEP).name
MARK = TOOLS.taking(SESSION_MARK_STEP).name
CLEAR = TOOLS.taking(SESSION_CLEAR_PLAN).name
READ = TOOLS.taking(SESSION_READ_PLAN).name
CHANGING = (SETUP, ADD, UPDATE, MARK, CLEAR)
"The tools that make a new plan when they succeed; reading makes none."

OBJECTIVE_MAX = field_bound(SessionPlan, "objective", "max_length")
TITLE_MAX = field_bound(PlanStep, "title", "max_length")
DETAILS_MAX = field_bound(PlanStep, "details", "max_length")
NOTE_MAX = field_bound(SessionMarkStep, "note", "max_length")
DEFINITIONS = contract_schema(SESSION_PLAN)["$defs"]
STEP_STATUSES: list[str] = DEFINITIONS["step-status"]["enum"]
DONE: StepStatus = "done"
assert DONE in STEP_STATUSES
FIRST_STATUS: StepStatus = "pending"
assert FIRST_STATUS in STEP_STATUSES
OPEN_STATUSES = [status for status in STEP_STATUSES if status != DONE]


# Helpers --------------------------------------------------------------------------------


def succeeded(session: PlanSession, tool: str, arguments: Any) -> CallResult[SessionPlan | None]:
    """Call `tool`, which must succeed: one new snapshot if it changes the plan, none otherwise."""
    before = session.history
    done = session.call(tool, arguments)
    assert done.ok, done.message
    assert done.error is None
    assert done.state is session.latest
    if tool == READ:
        assert _same(session.history, before)
        assert done.result is session.latest
    else:
        # One snapshot more: the new latest, after those kept of the ones before.
        assert session.history[-1] is session.latest
        assert all(session.latest is not plan for plan in before)
        kept = len(session.history) - 1
        assert _same(session.history[:-1], before[len(before) - kept :])
    return done


def refused(session: PlanSession, tool: str, arguments: Any) -> ToolValidationError:
    """Call `tool`, which must be refused, and leave the session exactly as it was."""
    latest, history = session.latest, session.history
    done = session.call(tool, arguments)
    assert not done.ok
    assert done.error is not None
    assert done.result is None
    assert done.message == str(done.error)
    assert done.state is latest
    assert session.latest is latest
    assert _same(session.history, history)
    return done.error


def _same(one: tuple[SessionPlan, ...], two: tuple[SessionPlan, ...]) -> bool:
    """Whether the two histories hold the very same snapshots, in the same order."""
    return len(one) == len(two) and all(a is b for a, b in zip(one, two, strict=True))


def new_steps(*titles: str) -> list[dict[str, Any]]:
    return [{"title": title} for title in titles]


def set_up(*titles: str, objective: str = "Triage the open bug reports") -> PlanSession:
    """A session whose plan has a step of each title."""
    session = PlanSession()
    succeeded(session, SETUP, {"objective": objective, "initial_steps": new_steps(*titles)})
    return session


def completed(*titles: str) -> PlanSession:
    """A session whose plan has a step of each title, every one done."""
    session = set_up(*titles)
    for number in range(1, len(titles) + 1):
        succeeded(session, MARK, {"step_id": step_id(number), "status": DONE})
    assert session.latest is not None
    assert session.latest.status == "completed"
    return session


def latest(session: PlanSession) -> SessionPlan:
    assert session.latest is not None
    return session.latest


def ids(plan: SessionPlan) -> list[str]:
    return [step.step_id for step in plan.steps]


def description(definition: str) -> str:
    """The description of a text of the plan's schema, which ends a message about that text."""
    text: str = DEFINITIONS[definition]["description"]
    return text


# The decisions ----------------------------------------------------------------------------


def test_a_step_starts_pending_whether_set_up_or_added() -> None:
    session = set_up("List open reports", "Label duplicates")
    assert [step.status for step in latest(session).steps] == [FIRST_STATUS] * 2
    added = succeeded(session, ADD, {"steps": new_steps("Ask reporters for logs")})
    assert added.message == f"Added {step_id(3)}, {FIRST_STATUS}."
    assert latest(session).steps[-1].status == FIRST_STATUS
    assert latest(session).steps[-1].notes == ()


def test_blank_details_are_no_details() -> None:
    session = PlanSession()
    done = succeeded(
        session,
        SETUP,
        {"objective": "Ship", "initial_steps": [{"title": "Build", "details": " \n\t "}]},
    )
    assert latest(session).steps[0].details is None
    assert done.result == SessionSetupPlan(
        objective="Ship", initial_steps=(NewPlanStep(title="Build", details=None),)
    )
    succeeded(session, ADD, {"steps": [{"title": "Test", "details": ""}]})
    assert latest(session).steps[1].details is None


def test_blank_details_in_an_update_leave_the_details_as_they_were() -> None:
    session = PlanSession()
    succeeded(
        session, SETUP, {"objective": "Ship", "initial_steps": [{"title": "Build", "details": "d"}]}
    )
    done = succeeded(session, UPDATE, {"step_id": step_id(1), "title": "Compile", "details": "  "})
    assert done.message == f"Updated the title of {step_id(1)}."
    assert latest(session).steps[0].title == "Compile"
    assert latest(session).steps[0].details == "d"


def test_a_blank_note_is_no_note() -> None:
    session = set_up("Build")
    done = succeeded(session, MARK, {"step_id": step_id(1), "status": "in_progress", "note": " "})
    assert done.message == f"Marked {step_id(1)} in_progress; the plan is active."
    assert done.result == SessionMarkStep(step_id=step_id(1), status="in_progress", note=None)
    assert latest(session).steps[0].notes == ()


@pytest.mark.parametrize("tool", [UPDATE, MARK])
def test_an_unknown_step_id_is_refused_and_the_known_ones_named(tool: str) -> None:
    arguments = {"step_id": step_id(9), "title": "x", "status": DONE}
    del arguments["status" if tool == UPDATE else "title"]
    session = set_up()
    error = refused(session, tool, arguments)
    assert error.field == "/step_id"
    assert str(error) == f'step_id: no step "{step_id(9)}" in the plan: the plan has no steps'
    succeeded(session, ADD, {"steps": new_steps("One")})
    error = refused(session, tool, arguments)
    assert str(error) == f'step_id: no step "{step_id(9)}" in the plan: its only step is S001'
    succeeded(session, ADD, {"steps": new_steps("Two", "Three")})
    error = refused(session, tool, arguments)
    assert str(error) == f'step_id: no step "{step_id(9)}" in the plan: its steps are S001 to S003'


def test_s000_is_not_a_step_id() -> None:
    session = set_up("Build")
    error = refused(session, MARK, {"step_id": "S000", "status": DONE})
    assert error.field == "/step_id"
    assert str(error) == f'step_id: "S000" is not allowed: {description("step-id")}'


def test_a_completed_plan_takes_no_new_steps_nor_updates() -> None:
    session = completed("Build")
    error = refused(session, ADD, {"steps": new_steps("More")})
    assert error.field is None
    assert str(error) == (
        f"the plan is completed, so it takes no new steps: mark a step back with {MARK} "
        f"first, or set up a new plan with {SETUP}"
    )
    error = refused(session, UPDATE, {"step_id": step_id(1), "title": "Rebuild"})
    assert error.field is None
    assert str(error) == (
        f"the plan is completed, so it takes no updates: mark a step back with {MARK} "
        f"first, or set up a new plan with {SETUP}"
    )


def test_a_completed_plan_can_still_be_marked_with_a_note() -> None:
    session = completed("Build")
    done = succeeded(session, MARK, {"step_id": step_id(1), "status": DONE, "note": "Took 3 min"})
    assert done.message == f"Marked {step_id(1)} done, with a note; the plan is completed."
    assert latest(session).steps[0].notes == ("Took 3 min",)


def test_marking_a_step_back_after_completion_reactivates_the_plan() -> None:
    session = completed("Build", "Test")
    done = succeeded(session, MARK, {"step_id": step_id(2), "status": "blocked"})
    assert done.message == f"Marked {step_id(2)} blocked; the plan is active."
    assert latest(session).status == "active"
    succeeded(
        session, ADD, {"steps": new_steps("Fix the flaky test")}
    )  # active again: it takes steps
    done = succeeded(session, MARK, {"step_id": step_id(2), "status": DONE})
    assert latest(session).status == "active"  # S003 is still pending
    done = succeeded(session, MARK, {"step_id": step_id(3), "status": DONE})
    assert done.message == f"Marked {step_id(3)} done; the plan is completed."


def test_the_plan_completes_only_when_every_step_is_done() -> None:
    session = set_up("Build", "Test")
    for status in OPEN_STATUSES:
        succeeded(session, MARK, {"step_id": step_id(1), "status": status})
        assert latest(session).status == "active"
    succeeded(session, MARK, {"step_id": step_id(1), "status": DONE})
    assert latest(session).status == "active"
    succeeded(session, MARK, {"step_id": step_id(2), "status": DONE})
    assert latest(session).status == "completed"


def test_a_plan_may_be_set_up_with_no_steps_and_get_them_later() -> None:
    session = PlanSession()
    done = succeeded(session, SETUP, {"objective": "Ship"})
    assert done.message == "The plan is set up and active, with no steps yet."
    assert latest(session) == SessionPlan(objective="Ship", status="active", steps=())
    done = succeeded(session, ADD, {"steps": new_steps("Build", "Test")})
    assert done.message == f"Added {step_id(1)} to {step_id(2)}, {FIRST_STATUS}."


def test_clearing_without_a_plan_or_twice_is_refused() -> None:
    session = PlanSession()
    error = refused(session, CLEAR, {})
    assert (error.field, str(error)) == (None, "there is no plan to clear")
    succeeded(session, SETUP, {"objective": "Ship", "initial_steps": new_steps("Build")})
    done = succeeded(session, CLEAR, {})
    assert done.message == "The plan is abandoned; its steps are discarded."
    assert latest(session) == SessionPlan(objective="Ship", status="abandoned", steps=())
    error = refused(session, CLEAR, {})
    assert (error.field, str(error)) == (None, "the plan is already abandoned")


def test_a_completed_plan_can_be_cleared() -> None:
    session = completed("Build")
    succeeded(session, CLEAR, {})
    assert latest(session).status == "abandoned"


def test_reading_an_abandoned_plan_returns_it() -> None:
    session = set_up("Build", objective="Draft the release notes")
    succeeded(session, CLEAR, {})
    done = succeeded(session, READ, {})
    assert done.message == "The plan is abandoned, with 0 steps."
    assert done.result == SessionPlan(
        objective="Draft the release notes", status="abandoned", steps=()
    )


def test_an_abandoned_plan_takes_no_steps_updates_or_marks() -> None:
    session = set_up("Build")
    succeeded(session, CLEAR, {})
    error = refused(session, ADD, {"steps": new_steps("More")})
    assert str(error) == (
        f"the plan was abandoned, so it takes no new steps: set up a new plan with {SETUP}"
    )
    error = refused(session, UPDATE, {"step_id": step_id(1), "title": "Rebuild"})
    assert str(error) == (
        f"the plan was abandoned, so it takes no updates: set up a new plan with {SETUP}"
    )
    error = refused(session, MARK, {"step_id": step_id(1), "status": DONE})
    assert str(error) == (
        f"the plan was abandoned and has no steps: set up a new plan with {SETUP}"
    )
    assert error.field is None


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (READ, {}),
        (ADD, {"steps": [{"title": "Build"}]}),
        (UPDATE, {"step_id": "S001", "title": "Build"}),
        (MARK, {"step_id": "S001", "status": "done"}),
    ],
)
def test_every_tool_but_setup_and_clear_needs_a_plan(tool: str, arguments: Any) -> None:
    error = refused(PlanSession(), tool, arguments)
    assert error.field is None
    assert str(error) == f"there is no plan yet: set one up with {SETUP} first"


def test_ids_end_at_s999() -> None:
    session = set_up(*["Step"] * (MAX_STEPS - 1))
    last = step_id(MAX_STEPS)
    error = refused(session, ADD, {"steps": new_steps("One", "Two")})
    assert error.field == "/steps"
    assert str(error) == (
        f"steps: has 2 steps, but the plan holds {MAX_STEPS - 1} and its ids end at {last}: "
        "at most 1 more can be added"
    )
    done = succeeded(session, ADD, {"steps": new_steps("Last")})
    assert done.message == f"Added {last}, {FIRST_STATUS}."
    error = refused(session, ADD, {"steps": new_steps("One")})
    assert str(error) == (
        f"steps: has 1 step, but the plan holds {MAX_STEPS} and its ids end at {last}: "
        "at most 0 more can be added"
    )


def test_a_setup_past_s999_is_refused_by_the_schema() -> None:
    most = field_bound(SessionSetupPlan, "initial_steps", "max_length")
    assert most == MAX_STEPS
    error = refused(
        PlanSession(), SETUP, {"objective": "Ship", "initial_steps": new_steps(*["S"] * (most + 1))}
    )
    assert error.field == "/initial_steps"
    assert str(error) == f"initial_steps: has {most + 1} items; at most {most} allowed"


def test_a_note_past_the_cap_is_refused_but_marking_without_one_is_not() -> None:
    session = set_up("Build")
    for number in range(MAX_NOTES):
        succeeded(
            session, MARK, {"step_id": step_id(1), "status": "in_progress", "note": f"n{number}"}
        )
    assert len(latest(session).steps[0].notes) == MAX_NOTES
    error = refused(session, MARK, {"step_id": step_id(1), "status": DONE, "note": "one more"})
    assert error.field == "/note"
    assert str(error) == (
        f"note: {step_id(1)} already holds {MAX_NOTES} notes, the most a step keeps: "
        "mark it without a note"
    )
    succeeded(session, MARK, {"step_id": step_id(1), "status": DONE})
    assert latest(session).status == "completed"


def test_ids_continue_within_a_plan_and_restart_with_a_new_one() -> None:
    session = set_up("Build", "Test")
    succeeded(session, UPDATE, {"step_id": step_id(2), "title": "Test it all"})
    succeeded(session, ADD, {"steps": new_steps("Ship")})
    assert ids(latest(session)) == [step_id(1), step_id(2), step_id(3)]
    succeeded(session, CLEAR, {})
    done = succeeded(session, SETUP, {"objective": "Again", "initial_steps": new_steps("A", "B")})
    assert (
        done.message
        == f"The plan is set up and active, with 2 steps, {step_id(1)} to {step_id(2)}."
    )
    assert ids(latest(session)) == [step_id(1), step_id(2)]
    succeeded(session, SETUP, {"objective": "Once more", "initial_steps": new_steps("A")})
    assert ids(latest(session)) == [step_id(1)]


def test_setup_replaces_a_plan_whatever_its_status() -> None:
    session = completed("Build")
    succeeded(session, SETUP, {"objective": "Next"})
    assert latest(session) == SessionPlan(objective="Next", status="active", steps=())


@pytest.mark.parametrize("update", [{}, {"title": None}, {"title": None, "details": None},
                                    {"title": "  ", "details": "\n"}])  # fmt: skip
def test_an_update_that_changes_nothing_is_refused(update: dict[str, Any]) -> None:
    session = set_up("Build")
    error = refused(session, UPDATE, {"step_id": step_id(1), **update})
    assert error.field == ""
    assert str(error) == (
        'arguments: changes nothing: give a new "title" or "details" '
        "(a field omitted or null is left as it is)"
    )


def test_an_update_changes_what_it_names() -> None:
    session = set_up("Build", "Test")
    before = latest(session)
    done = succeeded(session, UPDATE, {"step_id": step_id(2), "details": "All of them"})
    assert done.message == f"Updated the details of {step_id(2)}."
    assert latest(session).steps[1] == PlanStep(
        step_id=step_id(2), title="Test", details="All of them", status=FIRST_STATUS, notes=()
    )
    done = succeeded(session, UPDATE, {"step_id": step_id(2), "title": "Run", "details": "Fast"})
    assert done.message == f"Updated the title and details of {step_id(2)}."
    assert done.result == SessionUpdateStep(step_id=step_id(2), title="Run", details="Fast")
    assert latest(session).steps[0] is before.steps[0]


def test_an_unknown_tool_is_refused_and_the_tools_named() -> None:
    session = set_up("Build")
    error = refused(session, "planning_delete_step", {})
    assert isinstance(error, UnknownToolError)
    assert error.field is None
    known = ", ".join(tool.name for tool in TOOLS)
    assert (
        str(error) == f'no planning tool is called "planning_delete_step"; the tools are: {known}'
    )


@pytest.mark.parametrize("tool", [CLEAR, READ])
def test_the_tools_without_values_refuse_some(tool: str) -> None:
    session = set_up("Build")
    error = refused(session, tool, {"step_id": "S001"})
    assert error.field == "/step_id"
    assert str(error) == 'step_id: unknown field "step_id"'


# Trimming and normalization ----------------------------------------------------------------


def test_surrounding_whitespace_is_trimmed_before_checking() -> None:
    session = PlanSession()
    objective = " " + "o" * OBJECTIVE_MAX + "\n"  # at the limit once trimmed
    done = succeeded(
        session,
        SETUP,
        {
            "objective": objective,
            "initial_steps": [{"title": "\tBuild ", "details": "\n  line one\n  line two \n"}],
        },
    )
    assert latest(session) == SessionPlan(
        objective="o" * OBJECTIVE_MAX,
        status="active",
        steps=(
            PlanStep(
                step_id=step_id(1),
                title="Build",
                details="line one\n  line two",  # lines inside are kept as they are
                status=FIRST_STATUS,
                notes=(),
            ),
        ),
    )
    assert done.result == SessionSetupPlan(
        objective="o" * OBJECTIVE_MAX,
        initial_steps=(NewPlanStep(title="Build", details="line one\n  line two"),),
    )
    succeeded(session, MARK, {"step_id": f" {step_id(1)}\n", "status": DONE, "note": " Built "})
    assert latest(session).steps[0].notes == ("Built",)


@pytest.mark.parametrize(
    ("text", "named"),
    [("\u00a0Build", "U+00A0 at character 1"), ("Build\u3000", "U+3000 at character 6"),
     ("\x1fBuild", "U+001F at character 1")],
)  # fmt: skip
def test_only_ascii_whitespace_is_trimmed_so_other_spaces_are_named(text: str, named: str) -> None:
    error = refused(set_up(), ADD, {"steps": [{"title": text}]})
    assert error.field == "/steps/0/title"
    assert str(error).startswith(f"steps[0].title: holds {named}, not allowed")


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "named", "definition"),
    [
        (SETUP, {"objective": " \t\n "}, "/objective", "objective", "objective"),
        (SETUP, {"objective": "Ship", "initial_steps": [{"title": "A"}, {"title": " "}]},
         "/initial_steps/1/title", "initial_steps[1].title", "title"),
        (ADD, {"steps": [{"title": "", "details": "d"}]}, "/steps/0/title", "steps[0].title",
         "title"),
    ],
)  # fmt: skip
def test_a_blank_required_text_is_refused(
    tool: str, arguments: Any, field: str, named: str, definition: str
) -> None:
    session = set_up()
    error = refused(session, tool, arguments)
    assert error.field == field
    assert str(error) == f"{named}: is empty once trimmed of whitespace: {description(definition)}"


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("Caf\u00e9 menu", '"\u00e9" (U+00E9) at character 4'),
        ("Ring\u0007bell", "U+0007 at character 5"),
        ("Tab\there", "U+0009 at character 4"),
        ("Two\nlines", "U+000A at character 4"),
        ("\u200bHidden", "U+200B at character 1"),
        ("Right \u202eto left", "U+202E at character 7"),
    ],
)
def test_a_character_outside_printable_ascii_is_refused_and_named(text: str, named: str) -> None:
    session = PlanSession()
    error = refused(session, SETUP, {"objective": text})
    assert error.field == "/objective"
    assert str(error) == f"objective: holds {named}, not allowed: {description('objective')}"
    error = refused(session, SETUP, {"objective": "Ship", "initial_steps": [{"title": text}]})
    assert error.field == "/initial_steps/0/title"
    assert str(error) == (
        f"initial_steps[0].title: holds {named}, not allowed: {description('title')}"
    )


def test_details_and_notes_may_span_lines_but_hold_no_other_control_character() -> None:
    session = set_up("Build")
    succeeded(session, MARK, {"step_id": step_id(1), "status": DONE, "note": "one\ntwo"})
    error = refused(session, MARK, {"step_id": step_id(1), "status": DONE, "note": "one\r\ntwo"})
    assert error.field == "/note"
    assert str(error) == f"note: holds U+000D at character 4, not allowed: {description('details')}"


@pytest.mark.parametrize(
    ("tool", "arguments", "field", "limit", "nullable"),
    [
        (SETUP, {"objective": "o" * (OBJECTIVE_MAX + 60)}, "objective", OBJECTIVE_MAX, False),
        (ADD, {"steps": [{"title": "t" * (TITLE_MAX + 1)}]}, "steps[0].title", TITLE_MAX, False),
        (UPDATE, {"step_id": "S001", "details": "d" * (DETAILS_MAX + 1)}, "details", DETAILS_MAX,
         True),
        (MARK, {"step_id": "S001", "status": "done", "note": "n" * (NOTE_MAX + 9)}, "note",
         NOTE_MAX, True),
    ],
)  # fmt: skip
def test_a_text_too_long_is_told_its_length_and_the_limit(
    tool: str, arguments: Any, field: str, limit: int, nullable: bool
) -> None:
    session = set_up("Build")
    text = next(value for value in _strings(arguments) if len(value) > limit)
    error = refused(session, tool, arguments)
    or_null = ", or null" if nullable else ""
    assert (
        str(error) == f"{field}: is {len(text)} characters long; at most {limit} allowed{or_null}"
    )


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for child in value.values():
            yield from _strings(child)
    elif isinstance(value, list):
        for child in value:
            yield from _strings(child)


def test_a_text_too_long_is_told_its_length_before_any_character_it_holds() -> None:
    # Shortening it may drop the character too; and finding the character
    # would mean reading a text of any length, one character at a time.
    objective = "\u00e9" + "o" * OBJECTIVE_MAX
    error = refused(PlanSession(), SETUP, {"objective": objective})
    assert error.field == "/objective"
    assert str(error) == (
        f"objective: is {OBJECTIVE_MAX + 1} characters long; at most {OBJECTIVE_MAX} allowed"
    )


def test_a_field_of_any_name_is_named_on_one_short_line() -> None:
    # The field's name comes from the call: a model (or whoever wrote the
    # call) may put a line break or a whole page in it.
    session = set_up("Build")
    error = refused(session, CLEAR, {"line\nbreak": 1})
    assert error.field == "/line\nbreak"
    assert str(error) == '["line\\nbreak"]: unknown field "line\\nbreak"'
    error = refused(session, ADD, {"steps": [{"title": "Test", "due date": "May"}]})
    assert error.field == "/steps/0/due date"
    assert str(error) == 'steps[0]["due date"]: unknown field "due date"'
    for key in ("k" * 100_000, "7" * 100_000):
        error = refused(session, READ, {key: 1})
        assert len(str(error)) < 200


def test_a_value_of_the_wrong_type_is_refused_not_trimmed_into_shape() -> None:
    session = set_up("Build")
    error = refused(session, UPDATE, {"step_id": step_id(1), "title": 5})
    assert (error.field, str(error)) == (
        "/title",
        "title: expected a string, got an integer, or null",
    )
    error = refused(session, UPDATE, None)
    assert (error.field, str(error)) == ("", "arguments: expected an object, got null")
    error = refused(session, MARK, {"step_id": step_id(1), "status": "finished"})
    statuses = ", ".join(f'"{status}"' for status in STEP_STATUSES)
    assert (error.field, str(error)) == ("/status", f'status: "finished" is not one of {statuses}')


def test_the_error_is_a_plancontracts_error_whose_text_the_model_sees() -> None:
    session = PlanSession()
    done = session.call(SETUP, {"objective": ""})
    assert isinstance(done.error, ToolValidationError)
    assert isinstance(done.error, PlanContractsError)
    assert isinstance(done.error, ValueError)
    assert done.error.tool == SETUP
    assert str(done.error) == done.message
    assert done.message == f"objective: {done.error.problem}"
    unknown = session.call("nope", {})
    assert isinstance(unknown.error, UnknownToolError)
    assert isinstance(unknown.error, PlanContractsError)
    assert str(unknown.error) == unknown.message == unknown.error.problem


# Snapshots ---------------------------------------------------------------------------------


def test_one_snapshot_per_successful_change_none_for_reading_or_refusing() -> None:
    session = PlanSession()
    assert session.latest is None
    empty = session.history
    assert empty == ()
    succeeded(session, SETUP, {"objective": "Ship", "initial_steps": new_steps("Build")})
    succeeded(session, READ, {})
    refused(session, ADD, {"steps": []})
    succeeded(session, ADD, {"steps": new_steps("Test")})
    succeeded(session, UPDATE, {"step_id": step_id(2), "title": "Test all"})
    succeeded(session, MARK, {"step_id": step_id(1), "status": DONE})
    refused(session, MARK, {"step_id": step_id(7), "status": DONE})
    succeeded(session, CLEAR, {})
    succeeded(session, READ, {})
    assert [plan.status for plan in session.history] == ["active"] * 4 + ["abandoned"]
    assert [len(plan.steps) for plan in session.history] == [1, 2, 2, 2, 0]
    assert session.history[-1] is session.latest


def test_snapshots_are_frozen_and_their_collections_tuples() -> None:
    session = set_up("Build")
    succeeded(session, MARK, {"step_id": step_id(1), "status": DONE, "note": "Built"})
    plan = latest(session)
    assert isinstance(plan.steps, tuple)
    assert isinstance(plan.steps[0].notes, tuple)
    with pytest.raises(AttributeError):
        plan.status = "abandoned"  # type: ignore[misc]  # a frozen field, assigned on purpose
    with pytest.raises(AttributeError):
        plan.steps[0].title = "Changed"  # type: ignore[misc]  # the same, one level down
    assert session.history[0].steps[0].status == FIRST_STATUS  # the earlier snapshot, as it was


def test_steps_a_call_leaves_alone_are_shared_with_the_snapshot_before() -> None:
    session = set_up("Build", "Test", "Ship")
    before = latest(session)
    succeeded(session, MARK, {"step_id": step_id(2), "status": "in_progress"})
    after = latest(session)
    assert after.steps[0] is before.steps[0]
    assert after.steps[1] is not before.steps[1]
    assert after.steps[2] is before.steps[2]
    succeeded(session, ADD, {"steps": new_steps("Announce")})
    assert all(new is old for new, old in zip(latest(session).steps, after.steps, strict=False))


def test_a_session_keeps_its_newest_snapshots() -> None:
    session = PlanSession(keep=2)
    for objective in ("One", "Two", "Three"):
        succeeded(session, SETUP, {"objective": objective})
    assert [plan.objective for plan in session.history] == ["Two", "Three"]
    assert session.latest is session.history[-1]
    refused(session, CLEAR, {"x": 1})
    assert [plan.objective for plan in session.history] == ["Two", "Three"]


@pytest.mark.parametrize("keep", [0, -1])
def test_a_session_keeps_at_least_its_latest_snapshot(keep: int) -> None:
    with pytest.raises(
        ValueError, match=f"a session keeps at least its latest snapshot, not {keep}"
    ):
        PlanSession(keep=keep)


# Rules beyond the schema ---------------------------------------------------------------------


def plan_document(status: str, *steps: tuple[str, str]) -> dict[str, Any]:
    """A session plan of `status` whose steps have these ids and statuses."""
    return {
        "objective": "Ship",
        "status": status,
        "steps": [
            {"step_id": sid, "title": "Step", "details": None, "status": state, "notes": []}
            for sid, state in steps
        ],
    }


BROKEN_PLANS = [
    pytest.param(
        plan_document("completed", ("S001", "done"), ("S002", "blocked")),
        [("/status", 'the plan is completed, but /steps/1 is "blocked": every step is done')],
        id="completed-with-a-step-not-done",
    ),
    pytest.param(
        plan_document("completed"),
        [("/status", "a completed plan has steps, every one done; this has none")],
        id="completed-without-steps",
    ),
    pytest.param(
        plan_document("active", ("S001", "done"), ("S002", "done")),
        [("/status", "every step is done, so the plan is completed: active means work remains")],
        id="active-with-all-done",
    ),
    pytest.param(
        plan_document("abandoned", ("S001", "pending")),
        [("/steps", "an abandoned plan has no steps; this one has 1 step")],
        id="abandoned-with-steps",
    ),
    pytest.param(
        plan_document("active", ("S001", "done"), ("S002", "pending"), ("S001", "pending")),
        [("/steps/2/step_id", '"S001" is the id of /steps/0 too: ids are unique')],
        id="duplicate-ids",
    ),
    pytest.param(
        plan_document("active", ("S001", "done"), ("S003", "pending"), ("S002", "pending")),
        [("/steps/2/step_id",
          '"S002" comes after "S003": ids increase in the order steps were added')],
        id="decreasing-ids",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("document", "expected"), BROKEN_PLANS)
def test_the_plans_rules_beyond_the_schema(
    document: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    found = violations(SESSION_PLAN, document)
    assert [(violation.pointer, violation.message) for violation in found] == expected
    with pytest.raises(ContractError) as raised:
        decode(SESSION_PLAN, json.dumps(document))
    assert list(raised.value.violations) == [Violation(*pair) for pair in expected]


@pytest.mark.parametrize(("document", "expected"), BROKEN_PLANS)
def test_validate_session_plan_reports_the_rules(
    document: dict[str, Any], expected: list[tuple[str, str]], tmp_path: Path
) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(document))
    done = cli("validate", "--json", SESSION_PLAN.name, str(path))
    assert done.returncode == 1, done.stderr
    record = json.loads(done.stdout)
    assert record["valid"] is False
    assert [(error["pointer"], error["message"]) for error in record["errors"]] == expected


def test_a_plan_the_tools_made_is_valid() -> None:
    session = completed("Build", "Test")
    document = json.loads(msgspec.json.encode(latest(session)))
    assert violations(SESSION_PLAN, document) == ()


@pytest.mark.parametrize("document", [{"step_id": "S001"}, {"step_id": "S001", "title": None}])
def test_validate_session_update_step_refuses_an_update_of_nothing(
    document: dict[str, Any],
) -> None:
    message = (
        'changes nothing: give a new "title" or "details" '
        "(a field omitted or null is left as it is)"
    )
    assert [(v.pointer, v.message) for v in violations(SESSION_UPDATE_STEP, document)] == [
        ("", message)
    ]
    done = cli(
        "validate", "--json", SESSION_UPDATE_STEP.name, "-",
        stdin=json.dumps(document),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["errors"] == [{"pointer": "", "message": message}]


# Random call sequences -------------------------------------------------------------------------

HOSTILE_TEXTS = [
    "",
    "   ",
    " \n\t ",
    "Caf\u00e9",
    "a\x00b",
    "Right \u202eto left",
    "\u00a0padded\u00a0",
    "two\nlines",
    "one\r\ntwo",
    "<script>alert(1)</script>",
    '"quoted" \\ back',
    "S001",
    "o" * (OBJECTIVE_MAX + 1),
    "t" * (TITLE_MAX + 1),
    "d" * (DETAILS_MAX + 1),
]
"Texts a model may send that some field refuses, or that only trimming makes acceptable."


def mostly(usual: st.SearchStrategy[Any], *others: st.SearchStrategy[Any]) -> Any:
    """Values of `usual` nine times in ten, else of one of `others`: most calls are good ones.

    `one_of` alone would draw each branch as often, and repeating a branch
    in it does not weigh it more.
    """
    branches = (usual,) * 9 + (st.one_of(*others),)
    return st.sampled_from(branches).flatmap(lambda branch: branch)


ASCII_TEXTS = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=12
)
TEXTS = mostly(ASCII_TEXTS, st.sampled_from(HOSTILE_TEXTS), st.text(max_size=6))
OPTIONAL_TEXTS = mostly(st.none() | ASCII_TEXTS, TEXTS)
STEP_IDS = mostly(
    st.integers(1, 5).map(step_id),
    st.just(step_id(MAX_STEPS)),
    st.sampled_from(["S000", "s001", "S1", "S1000", " S002 ", "", "S001\n"]),
)
# Done half the time, so that plans get completed (and then marked back).
STATUSES = mostly(
    st.sampled_from([DONE] * len(OPEN_STATUSES) + OPEN_STATUSES),
    st.sampled_from(["finished", "DONE", ""]),
)
NEW_STEPS = st.lists(
    st.fixed_dictionaries({"title": TEXTS}, optional={"details": OPTIONAL_TEXTS}), max_size=4
)
ARGUMENTS = {
    SETUP: st.fixed_dictionaries({"objective": TEXTS}, optional={"initial_steps": NEW_STEPS}),
    ADD: st.fixed_dictionaries({"steps": NEW_STEPS}),
    UPDATE: st.fixed_dictionaries(
        {"step_id": STEP_IDS}, optional={"title": OPTIONAL_TEXTS, "details": OPTIONAL_TEXTS}
    ),
    MARK: st.fixed_dictionaries(
        {"step_id": STEP_IDS, "status": STATUSES}, optional={"note": OPTIONAL_TEXTS}
    ),
    CLEAR: st.just({}),
    READ: st.just({}),
}
assert set(ARGUMENTS) == {tool.name for tool in TOOLS}
# Setting up and clearing start a plan and end it: work on a plan is the rest,
# so those two are drawn less often.
WORK = (SETUP, ADD, ADD, UPDATE, UPDATE, MARK, MARK, MARK, MARK, CLEAR, READ)
assert set(WORK) == set(ARGUMENTS)
CALLS = st.lists(
    mostly(
        st.sampled_from(WORK).flatmap(lambda name: st.tuples(st.just(name), ARGUMENTS[name])),
        # Now and then a call of no tool, or arguments of any shape.
        st.tuples(st.sampled_from(sorted(ARGUMENTS)), JSON_VALUES),
        st.tuples(st.text(max_size=20), st.just({})),
    ),
    min_size=1,
    max_size=30,
)
"Calls of every tool, most of them well-shaped and many of them valid, some not at all."
FIRST_CALLS = mostly(
    st.tuples(
        st.just(SETUP),
        st.fixed_dictionaries(
            {
                "objective": st.just("Ship"),
                "initial_steps": st.lists(st.just({"title": "Step"}), min_size=1, max_size=4),
            }
        ),
    ).map(lambda call: [call]),
    st.just([]),
)
"A setup that succeeds, mostly, so that the calls after it work on a plan."


@given(FIRST_CALLS, CALLS)
def test_random_calls_keep_every_invariant(
    first: list[tuple[str, Any]], calls: list[tuple[str, Any]]
) -> None:
    session = PlanSession()
    issued = 0  # the highest step number the current plan has given
    for tool, arguments in first + calls:
        before, history = session.latest, session.history
        done = session.call(tool, arguments)
        assert "\n" not in done.message
        assert done.message
        if done.error is not None:
            assert done.result is None
            assert done.message == str(done.error)
            assert done.error.field is None or done.error.field in _pointers(arguments)
            assert session.latest is before
            assert _same(session.history, history)
        elif tool == READ:
            assert done.result is before
            assert session.latest is before
            assert _same(session.history, history)
        else:
            assert tool in CHANGING
            assert _same(session.history, (*history, latest(session)))
            assert session.latest is not before
            if tool == SETUP:
                issued = 0
            added = [number for number in step_numbers(latest(session)) if number > issued]
            assert added == list(range(issued + 1, issued + 1 + len(added)))  # none reused
            issued += len(added)
            _assert_valid(tool, done)
        if session.latest is not None:
            now = step_numbers(latest(session))
            assert now == sorted(set(now))  # unique, increasing


def step_numbers(plan: SessionPlan) -> list[int]:
    """The numbers of the plan's step ids, in plan order; each id must be one."""
    numbers: list[int] = []
    for step in plan.steps:
        number = step_number(step.step_id)
        assert number is not None, step.step_id
        numbers.append(number)
    return numbers


def _assert_valid(tool: str, done: CallResult[SessionPlan | None]) -> None:
    """The plan after a call, and the call's result, break neither schema nor rule."""
    assert done.state is not None
    plan = json.loads(msgspec.json.encode(done.state))
    assert list(RULES[SESSION_PLAN.name].find(plan)) == []
    assert violations(SESSION_PLAN, plan) == ()
    assert decode(SESSION_PLAN, msgspec.json.encode(done.state)) == done.state
    parameters = TOOLS.named(tool).parameters
    result = json.loads(msgspec.json.encode(done.result))
    assert violations(parameters, result) == ()
    if parameters.name in RULES:
        assert list(RULES[parameters.name].find(result)) == []


def _pointers(value: Any, at: str = "") -> Iterator[str]:
    """The JSON Pointer of `value` and of every member in it: where an error may point.

    A missing field is pointed at by its object's pointer, which is among them.
    """
    yield at
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _pointers(child, f"{at}/{key.replace('~', '~0').replace('/', '~1')}")
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _pointers(child, f"{at}/{index}")


# The command line ------------------------------------------------------------------------------


def run_calls(
    tmp_path: Path, lines: list[str], *options: str, stdin: bool = False
) -> tuple[int, list[dict[str, Any]], dict[str, Any] | None]:
    """`session run` on these lines (from a file, or from stdin): its status, records and plan.

    The records are the lines of the calls; the plan is the one the last line gives.
    """
    text = "".join(line + "\n" for line in lines)
    if stdin:
        done = cli("session", "run", "-", *options, stdin=text)
    else:
        path = tmp_path / "calls.ndjson"
        path.write_text(text)
        done = cli("session", "run", str(path), *options)
    assert done.stderr == ""
    *records, last = [json.loads(line) for line in done.stdout.splitlines()]
    assert list(last) == ["plan"]
    return done.returncode, records, last["plan"]


def call(tool: str, **arguments: Any) -> str:
    return json.dumps({"tool": tool, "arguments": arguments})


def test_session_run_from_setup_to_clear(tmp_path: Path) -> None:
    lines = [
        call(SETUP, objective="  Triage the open bug reports ",
             initial_steps=[{"title": "List open reports"}, {"title": "Label duplicates"}]),
        call(ADD, steps=[{"title": "Ask reporters for logs", "details": "  "}]),
        call(UPDATE, step_id="S002", details="Link each duplicate to its original."),
        call(UPDATE, step_id="S009", title="Nothing"),
        "{not json",
        call(MARK, step_id="S001", status="done", note="Found 14 open reports"),
        call("planning_delete_step", step_id="S001"),
        call(MARK, step_id="S002", status="done"),
        call(MARK, step_id="S003", status="done", note="All logs in"),
        call(MARK, step_id="S003", status="in_progress", note="One more log"),
        call(CLEAR),
        call(READ),
    ]  # fmt: skip
    status, records, plan = run_calls(tmp_path, lines, "--plan-after-each")
    assert status == 1  # some calls were refused
    assert [record["line"] for record in records] == list(range(1, len(lines) + 1))
    assert [record["ok"] for record in records] == [
        True, True, True, False, False, True, False, True, True, True, True, True
    ]  # fmt: skip
    assert [record["tool"] for record in records] == [
        SETUP, ADD, UPDATE, UPDATE, None, MARK, "planning_delete_step",
        MARK, MARK, MARK, CLEAR, READ,
    ]  # fmt: skip

    def step(number: int, title: str, status: str = FIRST_STATUS, **more: Any) -> dict[str, Any]:
        return {"step_id": step_id(number), "title": title, "details": None, "status": status,
                "notes": [], **more}  # fmt: skip

    objective = "Triage the open bug reports"
    two = [step(1, "List open reports"), step(2, "Label duplicates")]
    assert records[0] == {
        "line": 1, "tool": SETUP, "ok": True,
        "message": "The plan is set up and active, with 2 steps, S001 to S002.",
        "result": {"objective": objective, "initial_steps": [
            {"title": "List open reports", "details": None},
            {"title": "Label duplicates", "details": None}]},
        "plan": {"objective": objective, "status": "active", "steps": two},
    }  # fmt: skip
    three = [*two, step(3, "Ask reporters for logs")]
    assert records[1]["message"] == "Added S003, pending."
    assert records[1]["plan"]["steps"] == three
    three[1] = step(2, "Label duplicates", details="Link each duplicate to its original.")
    assert records[2]["message"] == "Updated the details of S002."
    assert records[2]["plan"]["steps"] == three
    assert records[3]["error"] == {
        "field": "/step_id",
        "message": 'step_id: no step "S009" in the plan: its steps are S001 to S003',
    }
    assert "result" not in records[3]
    assert "message" not in records[3]
    assert records[3]["plan"] == records[2]["plan"]  # a refused call leaves the plan as it was
    assert records[4]["error"]["field"] is None
    assert records[4]["error"]["message"].startswith("malformed JSON")
    assert records[4]["plan"] == records[2]["plan"]
    assert records[5]["message"] == "Marked S001 done, with a note; the plan is active."
    assert records[5]["plan"]["steps"][0]["notes"] == ["Found 14 open reports"]
    assert records[6]["error"]["field"] is None
    assert records[6]["error"]["message"].startswith(
        'no planning tool is called "planning_delete_step"'
    )
    assert records[6]["plan"] == records[5]["plan"]
    assert records[7]["message"] == "Marked S002 done; the plan is active."
    assert records[8]["message"] == "Marked S003 done, with a note; the plan is completed."
    assert records[8]["plan"]["status"] == "completed"
    assert records[9]["message"] == "Marked S003 in_progress, with a note; the plan is active."
    assert records[9]["plan"]["status"] == "active"
    assert records[9]["plan"]["steps"][2]["notes"] == ["All logs in", "One more log"]
    abandoned = {"objective": objective, "status": "abandoned", "steps": []}
    assert records[10]["message"] == "The plan is abandoned; its steps are discarded."
    assert records[10]["result"] == {}
    assert records[10]["plan"] == abandoned
    assert records[11]["message"] == "The plan is abandoned, with 0 steps."
    assert records[11]["result"] == records[11]["plan"] == abandoned
    assert plan == abandoned  # and once more at the end


def test_session_run_of_good_calls_from_stdin_exits_0(tmp_path: Path) -> None:
    lines = [
        call(SETUP, objective="Ship", initial_steps=[{"title": "Build"}]),
        call(MARK, step_id="S001", status="done"),
        call(READ),
    ]
    status, records, plan = run_calls(tmp_path, lines, stdin=True)
    assert status == 0
    assert [record["ok"] for record in records] == [True] * 3
    assert all("plan" not in record for record in records)  # the plan is printed once, at the end
    assert plan is not None
    assert plan["status"] == "completed"
    assert records[-1]["result"] == plan  # reading returns the plan


def test_session_run_prints_the_plan_once_so_its_output_grows_linearly(tmp_path: Path) -> None:
    # Each note lengthens the plan: printed after every call, the plan made the
    # output grow with the square of the calls (1.2 MB of notes printed 1 GB).
    note = "n" * NOTE_MAX
    steps = [{"title": f"Step {number}"} for number in range(1, 9)]

    def output(calls: int) -> str:
        lines = [call(SETUP, objective="Take notes", initial_steps=steps)]
        lines += [
            call(MARK, step_id=step_id(1 + number % len(steps)), status="in_progress", note=note)
            for number in range(calls)
        ]
        path = tmp_path / f"{calls}.ndjson"
        path.write_text("".join(line + "\n" for line in lines))
        done = cli("session", "run", str(path))
        assert (done.returncode, done.stderr) == (0, "")
        return done.stdout

    calls = 100
    some, twice = output(calls), output(2 * calls)
    sizes = [len(some.encode()), len(twice.encode())]
    assert sizes[1] <= 2 * sizes[0]  # quadratic, it was 4 times as much
    *records, last = twice.splitlines()
    assert len(records) == 2 * calls + 1
    assert max(map(len, records)) < 3 * len(note)  # each call's line: about its call's size
    assert json.loads(last)["plan"]["steps"][0]["notes"][-1] == note


def test_session_run_refuses_lines_that_are_no_call(tmp_path: Path) -> None:
    lines = [call(SETUP, objective="Ship"), "[1, 2]", '{"tool": 5}', "", '{"tool": "x", "y": 1}']
    status, records, plan = run_calls(tmp_path, lines, "--plan-after-each")
    assert status == 1
    assert [record["ok"] for record in records] == [True, False, False, False, False]
    assert [record["plan"] for record in records[1:]] == [records[0]["plan"]] * 4 == [plan] * 4
    assert records[3]["error"]["message"] == "empty line: expected one JSON document per line"


def test_session_run_of_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.ndjson"
    done = cli("session", "run", str(missing))
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1
    assert str(missing) in done.stderr
    assert "Traceback" not in done.stderr
