"""The local model keeping a session plan: it calls the planning tools, one call at a time.

    driver = Driver.start()                              # load a model, once
    drive = await driver.drive("Triage the open bug reports", max_calls=8)
    drive.calls                                          # every call and its result
    drive.session.latest                                 # the plan at the end

Each call is written under `call_profile`, a decoding schema derived from the
tools' parameter contracts and the plan as it stands: a call names one of the
tools and its arguments pass that tool's contract and rules, by
construction. The plan's state can still refuse a call (no plan yet, a
completed one); the error goes back to the model as the tool's result, as
it would to any agent, and the model tries again. A drive ends when the plan
is completed or after `max_calls` calls.

The model reads the planning section (`prompt.planning_section`), the
objective, its last calls with their results, and the plan as it stands
(`drive_messages`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from string import Template
from typing import Any

from ...generated import SESSION_SETUP_PLAN
from ...generated.session_plans import SessionPlan
from ..core.contracts import contract_schema
from ..core.errors import ContractError, ProfileBug, ToolValidationError
from ..core.profiles import WHITESPACE, Bounds, Deriver, every_field_written
from ..core.schema_text import display_pattern
from ..core.tools import Tool
from ..core.validation import convert
from ..model.chat import Message
from ..model.writer import Writer, say_on_stderr
from .handlers import HANDLERS
from .prompt import PlanningStrategy, planning_section
from .rules import UPDATE_STEP_RULES
from .session import CallResult, Session
from .steps import MAX_OBJECTIVE, id_pattern
from .tools import TOOLS

__all__ = [
    "CALL_BOUNDS",
    "Drive",
    "Driver",
    "ToolCall",
    "call_profile",
    "checked_objective",
    "drive_messages",
]

CALL_BOUNDS = Bounds(string=120, items=3)
"Short texts and at most three new steps a call: a small model writes a call in seconds."
CALL_TOKENS = 400
"Enough for the longest call the profile allows."
RECENT_CALLS = 6
"How many of its last calls, with their results, the model reads: the prompt stays bounded."


@dataclass(frozen=True)
class ToolCall:
    """One call the model made, and what it did."""

    tool: str
    "The tool's name."
    arguments: dict[str, Any]
    "The arguments as the model wrote them."
    result: CallResult
    "What the call did: `result.ok`, `result.message` (what the model read back)."


@dataclass
class Drive:
    """A drive so far: the session the model keeps, and every call it made, in order."""

    objective: str
    session: Session = field(default_factory=Session)
    calls: list[ToolCall] = field(default_factory=list)

    @property
    def completed(self) -> bool:
        """Whether the plan is completed: the drive is over."""
        plan = self.session.latest
        return plan is not None and plan.status == "completed"


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
            HANDLERS[tool.name](plan, example)
        except ToolValidationError as refusal:
            if refusal.field is None:
                continue
        found.append(tool)
    return tuple(found)


def call_profile(plan: SessionPlan | None, objective: str) -> dict[str, Any]:
    """The decoding schema of one tool call, `{"tool": NAME, "arguments": {...}}`, now.

    One branch per tool of `open_tools(plan)`, its arguments under the
    tool's profile. A plan is set up with `objective` (when the contract
    takes it as it is) and at least one step; where the plan has steps, a
    step id is one of theirs.
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
    """The setup's profile with every field written, and the objective given when it may be."""
    profile = every_field_written(profile)
    try:
        convert(SESSION_SETUP_PLAN, {"objective": objective})
    except ContractError:
        return profile  # not ASCII, say: the model writes one the contract takes
    return {**profile, "properties": {**profile["properties"], "objective": {"const": objective}}}


def _with_step_ids(node: Any, ids: list[str]) -> Any:
    """`node` with every string of the step-id pattern narrowed to `ids`."""
    if isinstance(node, dict):
        if node.get("pattern") == display_pattern(id_pattern().pattern):
            return {"enum": ids}
        return {key: _with_step_ids(value, ids) for key, value in node.items()}
    if isinstance(node, list):
        return [_with_step_ids(item, ids) for item in node]
    return node


def checked_objective(text: str) -> str:
    """`text` trimmed, as the objective of a drive. Raises ValueError when empty or too long."""
    objective = text.strip()
    if not objective:
        raise ValueError("the objective is empty")
    if len(objective) > MAX_OBJECTIVE:
        raise ValueError(
            f"the objective is {len(objective)} characters long; at most {MAX_OBJECTIVE} allowed"
        )
    return objective


def _template(name: str) -> Template:
    return Template(files(__package__).joinpath("templates", name).read_text("utf-8"))


def drive_messages(
    objective: str,
    calls: Iterable[ToolCall],
    plan: SessionPlan | None,
    strategy: PlanningStrategy = PlanningStrategy.REACT,
) -> list[Message]:
    """What the model reads before its next call: chat messages.

    The system message is the planning section for `strategy`; the user
    message gives `objective` and asks for one call. Then come the last
    `RECENT_CALLS` of `calls`, each the model's call (as its JSON) and the
    result it read back, and last the plan as it stands.
    """
    messages: list[Message] = [
        {"role": "system", "content": planning_section(strategy).strip()},
        {"role": "user", "content": _template("drive.md").substitute(objective=objective).strip()},
    ]
    for call in list(calls)[-RECENT_CALLS:]:
        written = json.dumps({"tool": call.tool, "arguments": call.arguments})
        messages.append({"role": "assistant", "content": written})
        outcome = "ok" if call.result.ok else "refused"
        messages.append({"role": "user", "content": f"Result ({outcome}): {call.result.message}"})
    messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{_shown(plan)}"}
    return messages


def _shown(plan: SessionPlan | None) -> str:
    """The plan in a few lines: its status and objective, each step's id, status and title."""
    if plan is None:
        return "There is no plan yet."
    lines = [f"The plan ({plan.status}): {plan.objective}"]
    lines += [f"- {step.step_id} ({step.status}): {step.title}" for step in plan.steps]
    if not plan.steps:
        lines.append("- no steps")
    return "\n".join(lines)


@dataclass
class Driver:
    """Keeps session plans with one loaded model."""

    writer: Writer
    say: Callable[[str], None] = say_on_stderr

    async def drive(
        self,
        objective: str,
        *,
        max_calls: int,
        strategy: PlanningStrategy = PlanningStrategy.REACT,
        seed: int | None = None,
        on_call: Callable[[ToolCall], None] | None = None,
        drive: Drive | None = None,
    ) -> Drive:
        """Let the model work toward `objective` with the tools, for at most `max_calls` calls.

        `on_call` is told of each call as soon as it is made. Pass `drive`
        to see the calls made so far if this raises. The model writes in a
        worker thread: cancelling stops it at its next token. Raises
        ValueError for an empty objective, one longer than `MAX_OBJECTIVE`
        or `max_calls` below 1; GenerationFailed when the model writes no
        complete call (the prompt outgrew the model's context, say);
        ProfileBug when a call breaks its tool's contract (a bug).
        """
        objective = checked_objective(objective)
        if max_calls < 1:
            raise ValueError(f"a drive makes at least 1 call, not {max_calls}")
        drive = drive if drive is not None else Drive(objective)
        while len(drive.calls) < max_calls and not drive.completed:
            plan = drive.session.latest
            messages = drive_messages(objective, drive.calls, plan, strategy)
            written = await self.writer.write_chat(
                messages,
                call_profile(plan, objective),
                answer="Tool call JSON",
                max_tokens=CALL_TOKENS,
                seed=seed,
            )
            call = _made(drive.session, written["tool"], written["arguments"])
            drive.calls.append(call)
            if on_call is not None:
                on_call(call)
        return drive


def _made(session: Session, name: str, arguments: dict[str, Any]) -> ToolCall:
    """Apply the call the model wrote, first checking that the profile kept it well formed."""
    tool = TOOLS.named(name)
    try:
        convert(tool.parameters, arguments)
    except ContractError as error:
        raise ProfileBug(f"a {name} call broke its contract: {error}") from None
    return ToolCall(name, arguments, session.call(name, arguments))
