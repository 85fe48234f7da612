"""Goal plans: a simulated person's goals decomposed into plans, followed cycle by cycle.

    from plancontracts.runtime.goal_plans import GoalPlanner, Person, PlanningSystem

The family's files follow the layout every family shares
(docs/development.md#a-familys-files): `rules` (the plans' invariants beyond
their schemas), `session` (`PlanningSystem`: the goals and plans, and what a
cycle does to them, never calling a model), `profiles` (the profile of a
plan's steps), `prompts` (the plan and replan prompts, and the action
decision's), `agent` (the `GoalPlanner`: scripted answers, the model, or the
fallback decomposition)
and `commands` (`goals plan`, `goals simulate`, `goals stats`, `goals
prompt`); beside them, `simulation` (a `Person`: the two put together
event by event, saved and resumed as one document), `stats`
(`planning_stats`: a system counted) and `repairs` (`normalize_output`: the
upstream's tolerance of model answers, each repair reported, and the
`NORMALIZERS` that `plancontracts normalize` finds).
"""

from ..core.errors import TooManyGoals
from ..core.repairs import Normalized, Repair
from .agent import MAX_SCRIPTED, GoalPlanner, Source, fallback_steps
from .profiles import PLAN_BOUNDS, output_profile
from .prompts import NO_PLAN_STEP, Circumstances, PlanRequest, action_messages, plan_messages
from .repairs import normalize_output
from .rules import GOAL_PLAN_RULES, MAX_REPLANS, RULES, SYSTEM_RULES
from .session import (
    ABANDONED,
    HORIZONS,
    MAX_GOALS,
    OVERRIDDEN,
    STUCK,
    Failure,
    PlanningSystem,
    StepOutcome,
    directive,
    follows,
)
from .simulation import MAX_NEEDS, CycleReport, Happening, Person
from .stats import GOAL_STANDINGS, PlanningStats, planning_stats

__all__ = [
    "ABANDONED",
    "GOAL_PLAN_RULES",
    "GOAL_STANDINGS",
    "HORIZONS",
    "MAX_GOALS",
    "MAX_NEEDS",
    "MAX_REPLANS",
    "MAX_SCRIPTED",
    "NO_PLAN_STEP",
    "OVERRIDDEN",
    "PLAN_BOUNDS",
    "RULES",
    "STUCK",
    "SYSTEM_RULES",
    "Circumstances",
    "CycleReport",
    "Failure",
    "GoalPlanner",
    "Happening",
    "Normalized",
    "Person",
    "PlanRequest",
    "PlanningStats",
    "PlanningSystem",
    "Repair",
    "Source",
    "StepOutcome",
    "TooManyGoals",
    "action_messages",
    "directive",
    "fallback_steps",
    "follows",
    "normalize_output",
    "output_profile",
    "plan_messages",
    "planning_stats",
]
