"""Lights the player's torch or puts it out.

Input: {"action": "light"} or {"action": "extinguish"}. State: {"torch":
{"lit": true}} or {"torch": {"lit": false}}. Doing what is already done is not
an error: the state simply says so again.
"""

from __future__ import annotations

from pathlib import Path

from plancontracts.generated.tool_plans import ToolRequest
from plancontracts.runtime.engine.script_io import Reply, run_script

OUTCOMES = {"light": (True, "The torch is lit."), "extinguish": (False, "The torch is out.")}


def main(request: ToolRequest, reply: Reply) -> str:
    lit, summary = OUTCOMES[request.input["action"]]
    reply.log(f"torch {'lit' if lit else 'extinguished'}")
    reply.patch_state({"torch": {"lit": lit}})
    return summary


if __name__ == "__main__":
    run_script(main, input_schema=Path(__file__).with_name("light.input.json"))
