"""Describes a door the player examines and offers what to do next.

Input: {"target": "iron_door"}, a snake_case door id. The description depends
on the id alone: a material named in it (iron_door) is kept, anything else is
picked from small tables by a SHA-256 hash of the id, so the same door reads
the same in every run and on every machine. State: {"doors": {target:
{"examined": true, "material": ...}}}. Offers three choices: open it, knock,
leave it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from plancontracts.generated.tool_plans import ToolRequest
from plancontracts.runtime.engine.script_io import Reply, run_script

MATERIALS = ("oak", "iron", "stone", "bronze", "ash", "bone")
DETAILS = (
    "It is {material}, cold to the touch, with a keyhole at waist height.",
    "Its {material} face is scored with old blade marks, but the hinges look sound.",
    "It is {material} and stands slightly ajar; a draught whistles through the gap.",
    "Heavy {material}, studded with rivets; someone has chalked a small cross on it.",
    "It is {material}, swollen with damp, and a faint light shows beneath it.",
)


def spoken(target: str) -> str:
    """The id as words: `iron_door` is "iron door"."""
    return " ".join(word for word in target.split("_") if word)


def describe(target: str) -> tuple[str, str]:
    """The door's material and description, fixed by its id."""
    # hash() is salted per process; the digest is the same everywhere.
    digest = hashlib.sha256(target.encode()).digest()
    named = [word for word in target.split("_") if word in MATERIALS]
    material = named[0] if named else MATERIALS[digest[0] % len(MATERIALS)]
    detail = DETAILS[digest[1] % len(DETAILS)].format(material=material)
    return material, f"You study the {spoken(target)}. {detail}"


def main(request: ToolRequest, reply: Reply) -> str:
    target = request.input["target"]
    material, description = describe(target)
    name = spoken(target)
    reply.patch_state({"doors": {target: {"examined": True, "material": material}}})
    reply.offer_choices([f"Open the {name}", f"Knock on the {name}", f"Leave the {name} alone"])
    return description


if __name__ == "__main__":
    run_script(main, input_schema=Path(__file__).with_name("examine.input.json"))
