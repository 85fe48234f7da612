"""Tool plans: player input planned into a plan of tools, run by the executor, narrated.

    from plancontracts.runtime.tool_plans import Planner, play_turn

The family's files follow the layout every family shares
(docs/development.md#a-familys-files): `rules` (the plan-attempt record's
rules beyond its schema), `profiles` (the plan profile for the enabled
skills), `prompts` (the narrator's prompt and a replan's lines), `agent` (the
`Planner`: the model, or the patterns of `patterns` without one; it first
chooses the skills a plan calls, by `choosing`),
`narrator` (one turn: plan, execute, replan, narrate) and `commands`
(`execute`, `plan`, `play`). Plans and their execution are contracts of this
family; the executor itself is `runtime.engine`.
"""

from .agent import Choosing, Planner
from .choosing import Choice, choose_by_cues
from .narrator import Attempt, PlanSource, Turn, attempt_record, choice_line, play_turn
from .patterns import pattern_plan
from .profiles import PlanProfile, plan_profile
from .prompts import FAILURES_SHOWN, narrator_messages, what_failed
from .rules import PLAN_ATTEMPT_RULES, RULES

__all__ = [
    "FAILURES_SHOWN",
    "PLAN_ATTEMPT_RULES",
    "RULES",
    "Attempt",
    "Choice",
    "Choosing",
    "PlanProfile",
    "PlanSource",
    "Planner",
    "Turn",
    "attempt_record",
    "choice_line",
    "choose_by_cues",
    "narrator_messages",
    "pattern_plan",
    "plan_profile",
    "play_turn",
    "what_failed",
]
