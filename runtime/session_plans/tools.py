"""The six planning tools, everything in them read from the schemas.

Each parameter contract of the family names its tool at its root
(`"x-tool": "planning_add_step"`); `TOOLS` lists the tools in the order an
agent meets them: set up, add, update, mark, clear, read. Reading returns
the plan; the others return their arguments, trimmed. What a tool record
holds, and the error that refuses a call, are the core's
(`runtime.core.tools`).

    from plancontracts import contract_schema
    from plancontracts.runtime.session_plans.tools import TOOLS

    for tool in TOOLS:
        print(tool.name, contract_schema(tool.parameters)["properties"].keys())
"""

from __future__ import annotations

from ...generated import (
    SESSION_ADD_STEP,
    SESSION_CLEAR_PLAN,
    SESSION_MARK_STEP,
    SESSION_PLAN,
    SESSION_READ_PLAN,
    SESSION_SETUP_PLAN,
    SESSION_UPDATE_STEP,
)
from ..core.tools import ToolSet, described

__all__ = ["TOOLS"]

TOOLS = ToolSet(
    "planning",
    (
        described(SESSION_SETUP_PLAN),
        described(SESSION_ADD_STEP),
        described(SESSION_UPDATE_STEP),
        described(SESSION_MARK_STEP),
        described(SESSION_CLEAR_PLAN),
        described(SESSION_READ_PLAN, SESSION_PLAN),
    ),
)
"The six tools, in the order an agent meets them."
