"""The decoding profile of one planning-tool call, derived from the tools' contracts and the plan.

A call is `{"tool": NAME, "arguments": {...}}`: one branch per tool the plan's
state does not refuse (`open_tools`), its arguments under the profile of the
tool's parameter contract (`CALL_BOUNDS`), narrowed by the plan: step ids
are the plan's own, and a setup writes every field and the objective as
given (one the contract cannot hold is refused, never left to the model). A
call written under it names a tool and passes that tool's contract and rules
by construction.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from ...generated import SESSION_SETUP_PLAN
from ...generated.session_plans import SessionPlan, SessionSetupPlan
from ..core.contracts import contract_schema
from ..core.errors import ToolValidationError
from ..core.profiles import WHITESPACE, Bounds, Deriver, every_field_written
from ..core.schema_text import display_pattern
from ..core.tools import Tool
from .handlers import HANDLERS
from .rules import UPDATE_STEP_RULES
from .steps import id_pattern
from .tools import TOOLS

__all__ = ["CALL_BOUNDS", "call_profile", "checked_objective", "open_tools"]

_SETUP = TOOLS.taking(SESSION_SETUP_PLAN)
"The tool that sets a plan up: its check of the objective is the drive's."

CALL_BOUNDS = Bounds(string=120, items=3)
"Short texts and at most three new steps a call: a small model writes a call in seconds."


@cache
def _tool_profile(tool: Tool) -> dict[str, Any]:
    """The decoding schema of `tool`'s arguments, from its parameter contract."""
    schema = contract_schema(tool.parameters)
    profile = Deriver(schema.get("$defs", {}), CALL_BOUNDS).derive(schema)
    # The rule beyond the schema must hold by construction too: an update
    # changes something, so each branch gives one of its optional fields, not null.
    if tool.parameters.name == UPDATE_STEP_RULES.contract:
        return {"anyOf": [_giving(profile, name) for name in _optional(profile)]}
    return profile


def _optional(profile: dict[str, Any]) -> list[str]:
    return [name for name in profile["properties"] if name not in profile["required"]]


def _giving(profile: dict[str, Any], name: str) -> dict[str, Any]:
    """`profile` with the field `name` required and never null."""
    node = profile["properties"][name]
    given = [branch for branch in node.get("anyOf", [node]) if branch.get("type") != "null"]
    properties = {**profile["properties"], name: given[0] if len(given) == 1 else {"anyOf": given}}
    return {**profile, "properties": properties, "required": [*profile["required"], name]}


def open_tools(plan: SessionPlan | None) -> tuple[Tool, ...]:
    """The tools a drive offers the model while the session holds `plan`.

    A tool is offered when the plan's state does not refuse it: each tool's
    handler is asked, with the example arguments of its schema, and a
    refusal that names no argument is the state refusing the tool (handlers
    change nothing, so asking is free). Two tools are left out: reading,
    since the model reads the plan in its prompt before every call, and
    setting up while there is a plan to keep (a drive works one plan; a
    small model would set it up again and again).
    """
    keeping = plan is not None and plan.status != "abandoned"
    found = []
    for tool in TOOLS:
        if tool.result is not tool.parameters:  # the tool that returns the plan: reading
            continue
        if keeping and tool.parameters is SESSION_SETUP_PLAN:
            continue
        example = contract_schema(tool.parameters).get("examples", [{}])[0]
        try:
            HANDLERS.handle(tool.name, plan, example, None)
        except ToolValidationError as refusal:
            if refusal.field is None:
                continue
        found.append(tool)
    return tuple(found)


def checked_objective(text: str) -> str:
    """`text` as the objective of a drive: the objective a plan set up with it holds.

    Accepts any string; the setup tool trims surrounding ASCII whitespace and
    nothing else. Raises ValueError, in one line saying why, when the
    `session-setup-plan` contract refuses it (empty, longer than
    `MAX_OBJECTIVE`, a character outside printable ASCII): the profile fixes
    the objective into the setup call, so one the plan cannot hold is
    refused before the drive starts, never replaced by what the model writes.
    """
    # The setup tool's own check, the one a model's call meets: the limits
    # and the characters come from the schema, and its message is one line.
    try:
        handled = HANDLERS.handle(_SETUP.name, None, {"objective": text}, None)
    except ToolValidationError as refusal:
        raise ValueError(f"the objective {refusal.problem}") from None
    assert isinstance(handled.result, SessionSetupPlan)  # the setup tool returns its parameters
    return handled.result.objective


def call_profile(plan: SessionPlan | None, objective: str) -> dict[str, Any]:
    """The decoding schema of one tool call, `{"tool": NAME, "arguments": {...}}`, now.

    One branch per tool of `open_tools(plan)`, its arguments under the
    tool's profile. A plan is set up with `objective`, fixed as given (trimmed
    of surrounding ASCII whitespace, as the tool trims it), and at least one
    step; where the plan has steps, a step id is one of theirs. Raises
    ValueError, saying why, when the setup contract refuses `objective`
    (`checked_objective`).
    """
    ids = [step.step_id for step in plan.steps] if plan is not None else []
    branches = []
    for tool in open_tools(plan):
        arguments = _tool_profile(tool)
        if tool.parameters is SESSION_SETUP_PLAN:
            arguments = _setting_up(arguments, objective)
        if ids:
            arguments = _with_step_ids(arguments, ids)
        branches.append(
            {
                "type": "object",
                "properties": {"tool": {"const": tool.name}, "arguments": arguments},
                "required": ["tool", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": branches, "x-guidance": WHITESPACE}


def _setting_up(profile: dict[str, Any], objective: str) -> dict[str, Any]:
    """The setup's profile with every field written and the objective fixed: `objective` as given.

    Raises ValueError when the setup contract refuses `objective` (`checked_objective`).
    """
    # Fixed, never left to the model: a model left to write it replaces the
    # user's objective with one of its own (`Triage é` became `Triage`).
    fixed = checked_objective(objective)
    profile = every_field_written(profile)
    return {**profile, "properties": {**profile["properties"], "objective": {"const": fixed}}}


def _with_step_ids(node: Any, ids: list[str]) -> Any:
    """`node` with every string of the step-id pattern narrowed to `ids`."""
    if isinstance(node, dict):
        if node.get("pattern") == display_pattern(id_pattern().pattern):
            return {"enum": ids}
        return {key: _with_step_ids(value, ids) for key, value in node.items()}
    if isinstance(node, list):
        return [_with_step_ids(item, ids) for item in node]
    return node
