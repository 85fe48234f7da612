"""The tools' handlers: normalize a call's arguments, check them and the plan, then reduce.

A call is checked in this order, and refused at the first problem with a
`ToolValidationError`:

1. its arguments, normalized first: every string trimmed of surrounding
   ASCII whitespace (other spaces are refused like any character outside
   ASCII), and a blank one made null where the contract allows null (blank
   details and notes are no details and no note); then judged by the
   tool's parameter contract, whose schema holds every limit (objective 1 to
   240 characters, title 1 to 160, details and notes up to 512, printable
   ASCII) and whose rules beyond the schema refuse an update that changes
   nothing;
2. the plan's state: a plan to work on, active where the tool needs it, the
   step named, room for another note or more steps.

Only then does a reducer (`reducers`) make the new plan. Nothing here
changes a plan, so a refused call leaves the session as it was.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import msgspec
import msgspec.inspect

from ...generated import (
    SESSION_ADD_STEP,
    SESSION_CLEAR_PLAN,
    SESSION_MARK_STEP,
    SESSION_READ_PLAN,
    SESSION_SETUP_PLAN,
    SESSION_UPDATE_STEP,
)
from ...generated.session_plans import (
    SessionAddStep,
    SessionClearPlan,
    SessionMarkStep,
    SessionPlan,
    SessionSetupPlan,
    SessionUpdateStep,
)
from ..core import sessions
from ..core.contracts import contract_schema
from ..core.errors import ToolValidationError, Violation, shown
from ..core.sessions import Handlers, arguments_of
from ..core.tools import Tool
from . import reducers
from .steps import MAX_NOTES, MAX_STEPS, step_id
from .tools import TOOLS

__all__ = ["HANDLERS"]


HANDLERS: Handlers[SessionPlan | None, None] = Handlers(TOOLS)
"Each tool's handler: given the latest plan (None before any) and the call's arguments."

Handled = sessions.Handled[SessionPlan | None]


# Arguments ------------------------------------------------------------------------


def _arguments(tool: Tool, value: Any) -> Any:
    """The call's arguments normalized and converted to the tool's parameter type."""
    normalized = _normalized(value, msgspec.inspect.type_info(tool.parameters.type))
    return arguments_of(tool, normalized, partial(_problem, tool, arguments=normalized))


# Only ASCII whitespace is trimmed: the texts are ASCII, so a no-break or
# ideographic space is refused with the character named, never dropped unseen.
_ASCII_WHITESPACE = " \t\n\r\x0b\x0c"


def _normalized(value: Any, kind: msgspec.inspect.Type) -> Any:
    """`value` with every string of a known field trimmed, and blank ones null where allowed.

    It follows the parameter type, never the value, so it goes no deeper
    than the type does, whatever the value holds.
    """
    nullable = False
    if isinstance(kind, msgspec.inspect.UnionType):
        others = [m for m in kind.types if not isinstance(m, msgspec.inspect.NoneType)]
        nullable = len(others) < len(kind.types)
        kind = others[0] if len(others) == 1 else kind
    if isinstance(value, str):
        text = value.strip(_ASCII_WHITESPACE)
        return None if nullable and not text else text
    if isinstance(value, dict) and isinstance(kind, msgspec.inspect.StructType):
        fields = {field.encode_name: field.type for field in kind.fields}
        return {
            key: _normalized(child, fields[key]) if key in fields else child
            for key, child in value.items()
        }
    if isinstance(value, list) and isinstance(
        kind, msgspec.inspect.ListType | msgspec.inspect.VarTupleType
    ):
        return [_normalized(item, kind.item_type) for item in value]
    return value


def _problem(tool: Tool, violation: Violation, *, arguments: Any) -> str:
    """The violation's message; for text that is empty or that a pattern refuses, a clearer one.

    An empty text is named so, and for a character the pattern refuses, the
    message says which and where; either way it ends with what the
    definition of the field says the text is.
    """
    text = _value_at(arguments, violation.pointer)
    if violation.keyword not in ("pattern", "minLength") or not isinstance(text, str):
        return violation.message
    definition = _definition_at(contract_schema(tool.parameters), violation.pointer)
    described = (
        f": {definition['description']}" if definition and "description" in definition else ""
    )
    if not text:
        return f"is empty once trimmed of whitespace{described}"
    if violation.keyword != "pattern" or definition is None:
        return violation.message
    pattern = definition["pattern"]
    if re.fullmatch(pattern, "xxx"):  # a pattern of text: letters pass, some characters not
        for index, character in enumerate(text, 1):
            # A character refused between two letters is refused anywhere.
            if not re.fullmatch(pattern, f"x{character}x"):
                return f"holds {_character(character)} at character {index}, not allowed{described}"
    return f"{shown(text)} is not allowed{described}"


def _character(character: str) -> str:
    code = f"U+{ord(character):04X}"
    return code if not character.isprintable() else f"{shown(character)} ({code})"


def _value_at(value: Any, pointer: str) -> Any:
    for token in pointer.split("/")[1:]:
        if isinstance(value, dict):
            value = value.get(token.replace("~1", "/").replace("~0", "~"))
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return None
    return value


def _definition_at(schema: dict[str, Any], pointer: str) -> dict[str, Any] | None:
    """The definition of the text at `pointer` in arguments of `schema`, references followed.

    None unless it is a text with a pattern, the only kind a message explains.
    """
    definitions = schema.get("$defs", {})

    def resolved(node: Any) -> Any:
        while isinstance(node, dict):
            if "$ref" in node:
                node = definitions.get(node["$ref"].removeprefix("#/$defs/"))
            elif "anyOf" in node:
                branches = [branch for branch in node["anyOf"] if branch != {"type": "null"}]
                node = branches[0] if len(branches) == 1 else None
            else:
                return node
        return None

    node = resolved(schema)
    for token in pointer.split("/")[1:]:
        if not isinstance(node, dict):
            return None
        if token.isdigit() and "items" in node:
            node = resolved(node["items"])
        else:
            node = resolved(node.get("properties", {}).get(token))
    return node if isinstance(node, dict) and "pattern" in node else None


# The plan's state -------------------------------------------------------------------


def _setup_name() -> str:
    return TOOLS.taking(SESSION_SETUP_PLAN).name


def _existing(tool: Tool, plan: SessionPlan | None) -> SessionPlan:
    if plan is None:
        raise ToolValidationError(
            tool.name, None, f"there is no plan yet: set one up with {_setup_name()} first"
        )
    return plan


def _active(tool: Tool, plan: SessionPlan | None, doing: str) -> SessionPlan:
    plan = _existing(tool, plan)
    if plan.status == "completed":
        mark = TOOLS.taking(SESSION_MARK_STEP).name
        raise ToolValidationError(
            tool.name,
            None,
            f"the plan is completed, so it takes no {doing}: mark a step back with {mark} "
            f"first, or set up a new plan with {_setup_name()}",
        )
    if plan.status == "abandoned":
        raise ToolValidationError(
            tool.name,
            None,
            f"the plan was abandoned, so it takes no {doing}: "
            f"set up a new plan with {_setup_name()}",
        )
    return plan


def _step_named(tool: Tool, plan: SessionPlan, name: str) -> None:
    if any(step.step_id == name for step in plan.steps):
        return
    if not plan.steps:
        where = "the plan has no steps"
    elif len(plan.steps) == 1:
        where = f"its only step is {plan.steps[0].step_id}"
    else:
        where = f"its steps are {plan.steps[0].step_id} to {plan.steps[-1].step_id}"
    raise ToolValidationError(tool.name, "/step_id", f"no step {shown(name)} in the plan: {where}")


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _ids(first: int, count: int) -> str:
    if count == 1:
        return step_id(first)
    return f"{step_id(first)} to {step_id(first + count - 1)}"


# The handlers -------------------------------------------------------------------------


@HANDLERS.handles(SESSION_SETUP_PLAN)
def _set_up(tool: Tool, plan: SessionPlan | None, value: Any, context: None) -> Handled:
    arguments: SessionSetupPlan = _arguments(tool, value)
    new = reducers.set_up(arguments)
    steps = len(new.steps)
    listed = f"{_counted(steps, 'step')}, {_ids(1, steps)}" if steps else "no steps yet"
    return Handled(arguments, new, f"The plan is set up and active, with {listed}.")


@HANDLERS.handles(SESSION_ADD_STEP)
def _add(tool: Tool, plan: SessionPlan | None, value: Any, context: None) -> Handled:
    arguments: SessionAddStep = _arguments(tool, value)
    plan = _active(tool, plan, "new steps")
    first = reducers.next_step_number(plan)
    count = len(arguments.steps)
    if first + count - 1 > MAX_STEPS:
        raise ToolValidationError(
            tool.name,
            "/steps",
            f"has {_counted(count, 'step')}, but the plan holds {len(plan.steps)} and its ids "
            f"end at {step_id(MAX_STEPS)}: at most {MAX_STEPS - first + 1} more can be added",
        )
    new = reducers.add_steps(plan, arguments)
    return Handled(arguments, new, f"Added {_ids(first, count)}, pending.")


@HANDLERS.handles(SESSION_UPDATE_STEP)
def _update(tool: Tool, plan: SessionPlan | None, value: Any, context: None) -> Handled:
    arguments: SessionUpdateStep = _arguments(tool, value)
    plan = _active(tool, plan, "updates")
    _step_named(tool, plan, arguments.step_id)
    changed = " and ".join(
        name
        for name, given in (("title", arguments.title), ("details", arguments.details))
        if given is not None
    )
    new = reducers.update_step(plan, arguments)
    return Handled(arguments, new, f"Updated the {changed} of {arguments.step_id}.")


@HANDLERS.handles(SESSION_MARK_STEP)
def _mark(tool: Tool, plan: SessionPlan | None, value: Any, context: None) -> Handled:
    arguments: SessionMarkStep = _arguments(tool, value)
    plan = _existing(tool, plan)
    if plan.status == "abandoned":
        raise ToolValidationError(
            tool.name,
            None,
            f"the plan was abandoned and has no steps: set up a new plan with {_setup_name()}",
        )
    _step_named(tool, plan, arguments.step_id)
    step = next(step for step in plan.steps if step.step_id == arguments.step_id)
    if arguments.note is not None and len(step.notes) >= MAX_NOTES:
        raise ToolValidationError(
            tool.name,
            "/note",
            f"{step.step_id} already holds {MAX_NOTES} notes, the most a step keeps: "
            "mark it without a note",
        )
    new = reducers.mark_step(plan, arguments)
    noted = ", with a note" if arguments.note is not None else ""
    message = f"Marked {step.step_id} {arguments.status}{noted}; the plan is {new.status}."
    return Handled(arguments, new, message)


@HANDLERS.handles(SESSION_CLEAR_PLAN)
def _clear(tool: Tool, plan: SessionPlan | None, value: Any, context: None) -> Handled:
    arguments: SessionClearPlan = _arguments(tool, value)
    if plan is None:
        raise ToolValidationError(tool.name, None, "there is no plan to clear")
    if plan.status == "abandoned":
        raise ToolValidationError(tool.name, None, "the plan is already abandoned")
    new = reducers.abandon(plan)
    return Handled(arguments, new, "The plan is abandoned; its steps are discarded.")


@HANDLERS.handles(SESSION_READ_PLAN)
def _read(tool: Tool, plan: SessionPlan | None, value: Any, context: None) -> Handled:
    _arguments(tool, value)  # no values, but a call with some is refused
    plan = _existing(tool, plan)
    message = f"The plan is {plan.status}, with {_counted(len(plan.steps), 'step')}."
    return Handled(plan, plan, message, changed=False)
