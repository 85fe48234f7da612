"""Reads or changes the player's standing with one faction.

Input: {"faction": "thieves_guild", "change": 5}; change is -20 to 20 and
defaults to 0, which only reads the standing. Standings live in
<dataDir>/standings.json as {faction: value}, each kept within -100 to 100; a
faction not seen before starts at 0, and a missing file is a fresh start. A
file that is not a standings file fails the run with `corrupt_data` and is
left as it is. State: {"reputation": {faction: value}}. The summary names the
standing: hostile below -50, unfriendly below -10, friendly above 10, honoured
above 50, neutral otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from plancontracts.generated.tool_plans import ToolRequest
from plancontracts.runtime.engine.script_io import DataFile, Reply, run_script

FILE = "standings.json"
LOWEST, HIGHEST = -100, 100


def standing_word(value: int) -> str:
    if value < -50:
        return "hostile"
    if value < -10:
        return "unfriendly"
    if value > 50:
        return "honoured"
    if value > 10:
        return "friendly"
    return "neutral"


def is_standings(data: Any) -> bool:
    """Whether `data` is what this script writes; anything else is `corrupt_data`."""
    return isinstance(data, dict) and all(
        type(value) is int and LOWEST <= value <= HIGHEST for value in data.values()
    )


def main(request: ToolRequest, reply: Reply) -> str:
    faction, change = request.input["faction"], request.input.get("change", 0)
    # The lock keeps two changes in one parallel plan from undoing each other.
    with DataFile(request, FILE) as file:
        standings: dict[str, int] = file.load(default={}, valid=is_standings)
        before = standings.get(faction, 0)
        value = max(LOWEST, min(HIGHEST, before + change))
        if value != before:
            standings[faction] = value
            file.save(standings)
    if value != before + change:
        reply.log(f"{faction} standing stops at {value}, the limit")
    reply.patch_state({"reputation": {faction: value}})
    name = faction.replace("_", " ")
    return f"Your standing with the {name} is {standing_word(value)} ({value})."


if __name__ == "__main__":
    run_script(main, input_schema=Path(__file__).with_name("standing.input.json"))
