"""Tools an agent calls, as their contracts describe them, and the error that refuses a call.

A family whose contracts are the arguments of tools (session plans, story
packages) marks each such contract with its tool's name at the schema's root
(`"x-tool": "planning_add_step"`) and opens its description with a lead-in
naming the tool (`Parameters of the \\`planning_add_step\\` tool: ...`). A
`Tool` is read from that contract; a `ToolSet` holds a family's tools and
finds one by name or by contract.

    TOOLS = ToolSet("planning", [described(SESSION_SETUP_PLAN), ...])
    TOOLS.named("planning_setup_plan").parameters    # SESSION_SETUP_PLAN

A refused call is a `ToolValidationError`, whose text is what the model
that made the call reads back as the tool's result.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ...generated import Contract
from .contracts import contract_name, contract_schema
from .errors import PlanContractsError, Violation, shown
from .jsontext import dotted

__all__ = ["Tool", "ToolSet", "ToolValidationError", "UnknownToolError", "described"]


@dataclass(frozen=True)
class Tool:
    """One tool, as the schema of the contract of its arguments describes it."""

    name: str
    "The tool's name, the schema's `x-tool`: `planning_add_step`."
    parameters: Contract[Any]
    "The contract of its arguments: `contract_schema(tool.parameters)` is their JSON Schema."
    description: str
    "What the tool does, and its decisions: the contract's description, lead-in dropped."
    result: Contract[Any]
    "The contract of what it returns when it succeeds."


# The schemas describe the arguments ("Parameters of the `x` tool: ...",
# "Input of the `x` tool, pipeline step 1: ..."); what follows the colon says
# what the tool does.
_LEAD_IN = re.compile(r"^\w+ of the `[^`]+` tool[^:]*: ")


def described(parameters: Contract[Any], result: Contract[Any] | None = None) -> Tool:
    """The tool whose arguments are `parameters`, returning `result` (default: its arguments).

    Raises KeyError when the contract's schema names no tool (`x-tool`).
    """
    schema = contract_schema(parameters)
    does = _LEAD_IN.sub("", schema["description"].strip(), count=1)
    return Tool(schema["x-tool"], parameters, does[:1].upper() + does[1:], result or parameters)


class ToolSet:
    """A family's tools, in order; `kind` names them in messages (`no planning tool is ...`)."""

    def __init__(self, kind: str, tools: Iterable[Tool]) -> None:
        self.kind = kind
        self._tools = tuple(tools)

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools)

    def named(self, name: str) -> Tool:
        """The tool called `name`. Raises `UnknownToolError` when there is none."""
        for tool in self._tools:
            if tool.name == name:
                return tool
        raise UnknownToolError(name, self)

    def taking(self, parameters: Contract[Any]) -> Tool:
        """The tool whose arguments are `parameters`. Raises LookupError for another contract."""
        for tool in self._tools:
            if tool.parameters is parameters:
                return tool
        raise LookupError(f"{contract_name(parameters)} is the arguments of no {self.kind} tool")


class ToolValidationError(PlanContractsError, ValueError):
    """A tool call refused: its arguments break the tool's contract, or the state forbids it.

    `tool` is the tool's name. `field` is the JSON Pointer of the argument
    at fault (`/steps/1/title`; `""` for the arguments as a whole), or None
    when the state (the plan, the draft), not an argument, refuses the call.
    `problem` says what is wrong; where a limit is at stake it names the
    limit and the value's length. `violations` lists every problem of a
    document the call would have made (a package refused at finalizing), each
    with its JSON Pointer into that document; it is empty otherwise. The
    error's text, `str(error)`, is what a model sees as the tool's result:
    the field, in the dotted form a model writes it (`steps[1].title`), then
    the problem.
    """

    def __init__(
        self, tool: str, field: str | None, problem: str, violations: Sequence[Violation] = ()
    ) -> None:
        self.tool = tool
        self.field = field
        self.problem = problem
        self.violations = tuple(violations)
        super().__init__(problem if field is None else f"{dotted(field)}: {problem}")


class UnknownToolError(ToolValidationError, LookupError):
    """A call of a tool that does not exist: no tool of the set has the given name."""

    def __init__(self, name: str, tools: ToolSet) -> None:
        known = ", ".join(tool.name for tool in tools)
        super().__init__(
            name, None, f"no {tools.kind} tool is called {shown(name)}; the tools are: {known}"
        )
