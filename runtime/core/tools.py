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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ...generated import Contract
from .contracts import contract_name, contract_schema
from .errors import UnknownToolError

__all__ = ["Tool", "ToolSet", "described"]


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

    def definition(self) -> dict[str, Any]:
        """The tool for function calling, as OpenAI-compatible servers take it.

        `{"type": "function", "function": {"name", "description",
        "parameters"}}`, where `parameters` is the contract's whole schema,
        self-contained (its references point into its own `$defs`). A fresh
        copy on every call.
        """
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": contract_schema(self.parameters),
            },
        }


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
        raise UnknownToolError(name, self.kind, [tool.name for tool in self._tools])

    def taking(self, parameters: Contract[Any]) -> Tool:
        """The tool whose arguments are `parameters`. Raises LookupError for another contract."""
        for tool in self._tools:
            if tool.parameters is parameters:
                return tool
        raise LookupError(f"{contract_name(parameters)} is the arguments of no {self.kind} tool")
