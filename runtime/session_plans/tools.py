"""The six planning tools as records, everything in them read from the schemas, and their error.

Each parameter contract of the family names its tool at its root
(`"x-tool": "planning_add_step"`); a `Tool` holds that name, the contract
(its generated type and its bundled schema), what the tool does (the
contract's description without its lead-in) and the contract of what the
tool returns. `TOOLS` lists them in the order an
agent meets them: set up, add, update, mark, clear, read.

    from plancontracts import contract_schema
    from plancontracts.runtime.session_plans.tools import TOOLS

    for tool in TOOLS:
        print(tool.name, contract_schema(tool.parameters)["properties"].keys())
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ...generated import (
    SESSION_ADD_STEP,
    SESSION_CLEAR_PLAN,
    SESSION_MARK_STEP,
    SESSION_PLAN,
    SESSION_READ_PLAN,
    SESSION_SETUP_PLAN,
    SESSION_UPDATE_STEP,
    Contract,
)
from ..core.contracts import contract_name, contract_schema
from ..core.errors import PlanContractsError, shown
from ..core.jsontext import dotted

__all__ = ["TOOLS", "Tool", "ToolValidationError", "UnknownToolError", "tool_for", "tool_named"]


@dataclass(frozen=True)
class Tool:
    """One planning tool, as its parameter contract's schema describes it."""

    name: str
    "The tool's name, the schema's `x-tool`: `planning_add_step`."
    parameters: Contract[Any]
    "The contract of its arguments: `contract_schema(tool.parameters)` is their JSON Schema."
    description: str
    "What the tool does, and its decisions: the parameter contract's description, lead-in dropped."
    result: Contract[Any]
    "The contract of what it returns: its arguments, trimmed, or the plan for reading it."


# The schemas describe the parameters object ("Parameters of the `x` tool: ...");
# what follows the colon says what the tool does.
_LEAD_IN = re.compile(r"^Parameters of the `[^`]+` tool[^:]*: ")


def _tool(parameters: Contract[Any], result: Contract[Any] | None = None) -> Tool:
    schema = contract_schema(parameters)
    does = _LEAD_IN.sub("", schema["description"].strip(), count=1)
    return Tool(schema["x-tool"], parameters, does[:1].upper() + does[1:], result or parameters)


TOOLS = (
    _tool(SESSION_SETUP_PLAN),
    _tool(SESSION_ADD_STEP),
    _tool(SESSION_UPDATE_STEP),
    _tool(SESSION_MARK_STEP),
    _tool(SESSION_CLEAR_PLAN),
    _tool(SESSION_READ_PLAN, SESSION_PLAN),
)
"The six tools, in the order an agent meets them."


def tool_for(parameters: Contract[Any]) -> Tool:
    """The tool whose parameter contract is `parameters`. Raises LookupError for another."""
    for tool in TOOLS:
        if tool.parameters is parameters:
            return tool
    raise LookupError(f"{contract_name(parameters)} is the parameters of no planning tool")


def tool_named(name: str) -> Tool:
    """The tool called `name`. Raises `UnknownToolError` when there is none."""
    for tool in TOOLS:
        if tool.name == name:
            return tool
    raise UnknownToolError(name)


class ToolValidationError(PlanContractsError, ValueError):
    """A tool call refused: its arguments break the tool's contract, or the plan's state forbids it.

    `tool` is the tool's name. `field` is the JSON Pointer of the argument
    at fault (`/initial_steps/1/title`; `""` for the arguments as a whole),
    or None when the plan's state, not an argument, refuses the call.
    `problem` says what is wrong; where a limit is at stake it names the
    limit and the value's length. The error's text, `str(error)`, is what a
    model sees as the tool's result: the field, in the dotted form a model
    writes it (`initial_steps[1].title`), then the problem.
    """

    def __init__(self, tool: str, field: str | None, problem: str) -> None:
        self.tool = tool
        self.field = field
        self.problem = problem
        super().__init__(problem if field is None else f"{dotted(field)}: {problem}")


class UnknownToolError(ToolValidationError, LookupError):
    """A call of a tool that does not exist: no planning tool has the given name."""

    def __init__(self, name: str) -> None:
        known = ", ".join(tool.name for tool in TOOLS)
        super().__init__(
            name, None, f"no planning tool is called {shown(name)}; the tools are: {known}"
        )
