"""The code that works with the contracts, in layers that import one way.

`core` at the bottom, then `engine` and `model`, the command kit
(`commandkit`), one package per family, and the entry point (`cli`) on top.
What each layer may import, and where each kind of change goes:
docs/development.md#layers (tests/test_layers.py holds the code to it). The
public API is `plancontracts` itself (`from plancontracts import decode`) and
each family's package (`from plancontracts.runtime.tool_plans import Planner`).
"""
