"""Session plans: the single to-do plan an agent keeps for a session, through six planning tools.

`tools` describes the tools (names, parameter contracts, what they do: all
read from the schemas); `session` holds the plan and applies calls;
`handlers` check a call's arguments and the plan's state; `reducers` are the
only code that makes a new plan; `rules` are the plan's invariants beyond its
schema; `prompt` renders the tools' prompt section and their definitions for
function calling; `commands` and `prompt_commands` are `plancontracts session`.
"""
