"""Session plans: the single to-do plan an agent keeps for a session, through six planning tools.

    from plancontracts.runtime.session_plans import PlanSession

The family's files follow the layout every family shares
(docs/development.md#a-familys-files): `rules` (the plan's invariants beyond
its schema), `tools` (the six tools, read from their contracts), `session`
(`PlanSession`: the plan, its snapshots, and an event of each call for its
subscribers), `handlers` (each tool's checks, then `reducers`, the only
code that makes a new plan), `profiles` (the profile of one call),
`prompts` (the tools' prompt section and definitions, a drive's prompt),
`agent` (the `Driver`: the model making the calls) and `commands`
(`session run`, `drive`, `section`, `tools`); `events` writes the events of
`--events FILE`, and `steps` holds the step ids and the limits the schemas
set.
"""

from ...generated.session_plans import SessionToolEvent
from .agent import Drive, Driver, checked_objective
from .profiles import call_profile, open_tools
from .prompts import PlanningStrategy, drive_messages, planning_section, tool_definitions
from .rules import RULES, SESSION_PLAN_RULES, TOOL_EVENT_RULES, UPDATE_STEP_RULES
from .session import PlanSession, Subscriber, SubscriberFailed
from .steps import MAX_NOTES, MAX_OBJECTIVE, MAX_STEPS, step_id, step_number
from .tools import TOOLS

__all__ = [
    "MAX_NOTES",
    "MAX_OBJECTIVE",
    "MAX_STEPS",
    "RULES",
    "SESSION_PLAN_RULES",
    "TOOLS",
    "TOOL_EVENT_RULES",
    "UPDATE_STEP_RULES",
    "Drive",
    "Driver",
    "PlanSession",
    "PlanningStrategy",
    "SessionToolEvent",
    "Subscriber",
    "SubscriberFailed",
    "call_profile",
    "checked_objective",
    "drive_messages",
    "open_tools",
    "planning_section",
    "step_id",
    "step_number",
    "tool_definitions",
]
