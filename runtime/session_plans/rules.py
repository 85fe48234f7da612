"""Rules of the session-plan contracts that a JSON Schema cannot state, checked on parsed JSON.

A session plan's status follows its steps: `completed` exactly when it has
steps and every one is `done` (so an `active` plan has work left, or no steps
yet), and an `abandoned` plan has no steps. Its step ids are unique and
increase in plan order, as the tools number them. An update of a step must
change something: a title or details that are not null. A tool-call event
that says its call succeeded has a result and no error, and one that says
it was refused has an error and no result.

Each rule reads the value as parsed, whatever else is wrong with it, and
checks only what is there and well typed; it walks the steps once, in a
loop, so any value costs time linear in its size. The tools keep every rule
(tests/test_session_plans.py checks it after every call of random sequences);
`validate` applies them to documents from elsewhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...generated import SESSION_PLAN, SESSION_TOOL_EVENT, SESSION_UPDATE_STEP
from ..core.errors import Violation, shown
from ..core.rules import Rules
from .steps import step_id, step_number

__all__ = ["RULES", "SESSION_PLAN_RULES", "TOOL_EVENT_RULES", "UPDATE_STEP_RULES"]


def _session_plan(value: Any) -> Iterator[Violation]:
    if not isinstance(value, dict):
        return  # the schema says what it should have been
    steps = value.get("steps")
    if not isinstance(steps, list):
        return
    yield from _step_ids(steps)
    yield from _status(value.get("status"), steps)


def _step_ids(steps: list[Any]) -> Iterator[Violation]:
    """Each id that repeats an earlier one, or is lower than the highest before it."""
    seen: dict[int, int] = {}
    highest = 0
    for index, step in enumerate(steps):
        text = step.get("step_id") if isinstance(step, dict) else None
        number = step_number(text) if isinstance(text, str) else None
        if number is None:
            continue  # not an id: the schema says so
        where = f"/steps/{index}/step_id"
        if number in seen:
            message = f"{shown(text)} is the id of /steps/{seen[number]} too: ids are unique"
            yield Violation(where, message)
        elif number < highest:
            message = (
                f"{shown(text)} comes after {shown(step_id(highest))}: "
                "ids increase in the order steps were added"
            )
            yield Violation(where, message)
        seen.setdefault(number, index)
        highest = max(highest, number)


def _status(status: Any, steps: list[Any]) -> Iterator[Violation]:
    if status == "abandoned":
        if steps:
            count = f"{len(steps)} step{'s' if len(steps) != 1 else ''}"
            yield Violation("/steps", f"an abandoned plan has no steps; this one has {count}")
        return
    open_step = next(
        (
            (index, step)
            for index, step in enumerate(steps)
            if not (isinstance(step, dict) and step.get("status") == "done")
        ),
        None,
    )
    if status == "completed":
        if not steps:
            yield Violation("/status", "a completed plan has steps, every one done; this has none")
        elif open_step is not None:
            index, step = open_step
            state = step.get("status") if isinstance(step, dict) else None
            what = f"is {shown(state)}" if isinstance(state, str) else "is not done"
            message = f"the plan is completed, but /steps/{index} {what}: every step is done"
            yield Violation("/status", message)
    elif status == "active" and steps and open_step is None:
        message = "every step is done, so the plan is completed: active means work remains"
        yield Violation("/status", message)


def _update_step(value: Any) -> Iterator[Violation]:
    if not isinstance(value, dict):
        return
    if value.get("title") is None and value.get("details") is None:
        message = (
            'changes nothing: give a new "title" or "details" '
            "(a field omitted or null is left as it is)"
        )
        yield Violation("", message)


def _tool_event(value: Any) -> Iterator[Violation]:
    if not isinstance(value, dict) or not isinstance(value.get("ok"), bool):
        return
    # A field left out is the schema's to report (both are required); the rule
    # judges only what is there, so it never points at a field that is not.
    if "result" not in value or "error" not in value:
        return
    result, error = value["result"], value["error"]
    if value["ok"]:
        if result is None:
            yield Violation("/result", "the call succeeded (ok is true), so it has a result")
        if error is not None:
            yield Violation("/error", "the call succeeded (ok is true), so it has no error: null")
    else:
        if result is not None:
            yield Violation(
                "/result", "the call was refused (ok is false), so it has no result: null"
            )
        if error is None:
            yield Violation(
                "/error", "the call was refused (ok is false), so it says why: an error"
            )


SESSION_PLAN_RULES = Rules(SESSION_PLAN.name, "the session plan's rules", _session_plan)
UPDATE_STEP_RULES = Rules(SESSION_UPDATE_STEP.name, "the update's rule", _update_step)
TOOL_EVENT_RULES = Rules(SESSION_TOOL_EVENT.name, "the event's rule", _tool_event)
RULES = {
    SESSION_PLAN.name: SESSION_PLAN_RULES,
    SESSION_UPDATE_STEP.name: UPDATE_STEP_RULES,
    SESSION_TOOL_EVENT.name: TOOL_EVENT_RULES,
}
