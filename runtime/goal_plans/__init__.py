"""Goal plans: a simulated person's goals decomposed into plans, followed cycle by cycle.

`system` holds the goals and plans and what a cycle does to them (never
calling a model); `planner` writes a plan's steps (scripted answers, the
local model under the `goal-plan-output` profile, or the fallback
decomposition) and renders the plan and replan prompts; `simulation` puts
the two together event by event; `rules` are the plans' invariants beyond
their schemas; `commands` is `plancontracts goals`.
"""
