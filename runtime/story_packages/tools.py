"""The eight story tools as records, everything in them read from the schemas, and their error.

Each input contract of the family names its tool at its root
(`"x-tool": "draftActOutline"`); a `Tool` holds that name, the input
contract, what the tool does (the contract's description without its
lead-in, decisions included) and the contract of what it returns. `TOOLS`
lists them in the seed's order: premise, character, the four pipeline steps
of an act, update, finalize.

    from plancontracts.runtime.story_packages.tools import TOOLS

    [tool.name for tool in TOOLS]   # proposeStoryPremise, ..., finalizePackage
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...generated import (
    STORY_ACT_OUTLINE,
    STORY_ACT_OUTLINE_RESULT,
    STORY_CHARACTER,
    STORY_CHARACTER_RESULT,
    STORY_FINALIZE_NODE,
    STORY_FINALIZE_NODE_RESULT,
    STORY_FINALIZE_PACKAGE,
    STORY_FINALIZE_PACKAGE_RESULT,
    STORY_NODE_ENCOUNTERS,
    STORY_NODE_ENCOUNTERS_RESULT,
    STORY_NODE_WEB,
    STORY_NODE_WEB_RESULT,
    STORY_PREMISE,
    STORY_PREMISE_RESULT,
    STORY_UPDATE_ELEMENT,
    STORY_UPDATE_ELEMENT_RESULT,
    Contract,
)
from ..core.contracts import contract_name, contract_schema
from ..core.errors import PlanContractsError, Violation, shown
from ..core.jsontext import dotted

__all__ = ["TOOLS", "Tool", "ToolValidationError", "UnknownToolError", "tool_for", "tool_named"]


@dataclass(frozen=True)
class Tool:
    """One story tool, as its input contract's schema describes it."""

    name: str
    "The tool's name, the schema's `x-tool`: `draftActOutline`."
    parameters: Contract[Any]
    "The contract of its arguments: `contract_schema(tool.parameters)` is their JSON Schema."
    description: str
    "What the tool does, and its decisions: the input contract's description, lead-in dropped."
    result: Contract[Any]
    "The contract of what it returns when it succeeds: `{ok: true, ...}`."


# The schemas describe the input ("Input of the `x` tool, pipeline step 1: ...");
# what follows the colon says what the tool does.
_LEAD_IN = re.compile(r"^Input of the `[^`]+` tool[^:]*: ")


def _tool(parameters: Contract[Any], result: Contract[Any]) -> Tool:
    schema = contract_schema(parameters)
    does = _LEAD_IN.sub("", schema["description"].strip(), count=1)
    return Tool(schema["x-tool"], parameters, does[:1].upper() + does[1:], result)


TOOLS = (
    _tool(STORY_PREMISE, STORY_PREMISE_RESULT),
    _tool(STORY_CHARACTER, STORY_CHARACTER_RESULT),
    _tool(STORY_ACT_OUTLINE, STORY_ACT_OUTLINE_RESULT),
    _tool(STORY_NODE_WEB, STORY_NODE_WEB_RESULT),
    _tool(STORY_NODE_ENCOUNTERS, STORY_NODE_ENCOUNTERS_RESULT),
    _tool(STORY_FINALIZE_NODE, STORY_FINALIZE_NODE_RESULT),
    _tool(STORY_UPDATE_ELEMENT, STORY_UPDATE_ELEMENT_RESULT),
    _tool(STORY_FINALIZE_PACKAGE, STORY_FINALIZE_PACKAGE_RESULT),
)
"The eight tools, in the seed's order."


def tool_for(parameters: Contract[Any]) -> Tool:
    """The tool whose input contract is `parameters`. Raises LookupError for another."""
    for tool in TOOLS:
        if tool.parameters is parameters:
            return tool
    raise LookupError(f"{contract_name(parameters)} is the input of no story tool")


def tool_named(name: str) -> Tool:
    """The tool called `name`. Raises `UnknownToolError` when there is none."""
    for tool in TOOLS:
        if tool.name == name:
            return tool
    raise UnknownToolError(name)


class ToolValidationError(PlanContractsError, ValueError):
    """A tool call refused: its arguments break the tool's contract, or the draft forbids it.

    `tool` is the tool's name. `field` is the JSON Pointer of the argument
    at fault (`/locations/1/connections/0`; `""` for the arguments as a
    whole), or None when the draft's state, not an argument, refuses the
    call (a step that must come first, a finalized draft). `problem` says
    what is wrong. `violations` lists every problem of a package that
    `finalizePackage` refused, each with its JSON Pointer into the package;
    it is empty otherwise. The error's text, `str(error)`, is what a model
    sees as the tool's result: the field, in the dotted form a model writes
    it (`locations[1].connections[0]`), then the problem.
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
    """A call of a tool that does not exist: no story tool has the given name."""

    def __init__(self, name: str) -> None:
        known = ", ".join(tool.name for tool in TOOLS)
        super().__init__(
            name, None, f"no story tool is called {shown(name)}; the tools are: {known}"
        )
