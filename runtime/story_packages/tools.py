"""The eight story tools, everything in them read from the schemas.

Each input contract of the family names its tool at its root
(`"x-tool": "draftActOutline"`), and each tool's result has a contract of
its own. `TOOLS` lists them in the seed's order: premise, character, the
four pipeline steps of an act, update, finalize. What a tool record holds,
and the error that refuses a call, are the core's (`runtime.core.tools`).

    from plancontracts.runtime.story_packages.tools import TOOLS

    [tool.name for tool in TOOLS]   # proposeStoryPremise, ..., finalizePackage

`tool_definitions` gives them for function calling, as an outside agent
(or a model server) takes them: `plancontracts story tools` prints it.
"""

from __future__ import annotations

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
)
from ..core.tools import ToolSet, described

__all__ = ["TOOLS", "tool_definitions"]

TOOLS = ToolSet(
    "story",
    (
        described(STORY_PREMISE, STORY_PREMISE_RESULT),
        described(STORY_CHARACTER, STORY_CHARACTER_RESULT),
        described(STORY_ACT_OUTLINE, STORY_ACT_OUTLINE_RESULT),
        described(STORY_NODE_WEB, STORY_NODE_WEB_RESULT),
        described(STORY_NODE_ENCOUNTERS, STORY_NODE_ENCOUNTERS_RESULT),
        described(STORY_FINALIZE_NODE, STORY_FINALIZE_NODE_RESULT),
        described(STORY_UPDATE_ELEMENT, STORY_UPDATE_ELEMENT_RESULT),
        described(STORY_FINALIZE_PACKAGE, STORY_FINALIZE_PACKAGE_RESULT),
    ),
)
"The eight tools, in the seed's order."


def tool_definitions() -> list[dict[str, Any]]:
    """The eight tools for function calling, as OpenAI-compatible servers take them, in order.

    Each is `{"type": "function", "function": {"name", "description",
    "parameters"}}`: the name is the contract's `x-tool`, the description
    its own (lead-in dropped), and `parameters` the contract's whole
    schema, self-contained (its references point into its own `$defs`). A
    fresh copy on every call. Accepts nothing; raises nothing.
    """
    return [tool.definition() for tool in TOOLS]
