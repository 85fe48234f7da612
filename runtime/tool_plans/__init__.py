"""Tool plans: planning player input, the pattern planner, the narrator's turn, and commands.

Plans and their execution are contracts of this family; the executor itself is `runtime.engine`.
"""
