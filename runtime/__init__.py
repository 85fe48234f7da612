"""The code that works with the contracts, in layers that import downward only.

- `core`: contracts, strict JSON text, validation and its messages, rules
  beyond the schemas (declared by families), schema text, plain text, and
  decoding profiles. It imports nothing of the project but `generated`.
- `engine` (the plan executor, tool processes, skills, script I/O, traces)
  and `model` (model resolution, loading, generation, chat templates):
  they import `core` only.
- one package per contract family (`tool_plans`, `planning_blocks`): its
  rules, profiles, prompts and templates, runtime and commands. Families
  never import each other.
- `cli`: the `plancontracts` command, the only code that imports families.

`tests/test_layers.py` holds the code to these rules. The public API is
`plancontracts` itself (`from plancontracts import decode`).
"""
