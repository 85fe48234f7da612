"""Remembers a text under a key, in the skill's data folder.

Input: {"key": "old_map", "text": "..."}: a snake_case key and 1 to 1000
characters of text. Memories live in <dataDir>/memories.json (see
memories.py), oldest first. Storing under an existing key replaces its text
and makes it the most recent; past 500 memories the oldest are forgotten. A
missing file is a fresh start; a file that is not a memory file fails the run
with `corrupt_data` and is left as it is, so that nothing is overwritten by
accident. State: {"memory": {"stored": key}}.
"""

from __future__ import annotations

from pathlib import Path

from memories import MEMORY_FILE, load_memories, save_memories

from plancontracts.generated.tool_plans import ToolRequest
from plancontracts.runtime.engine.script_io import DataFile, Reply, run_script

KEEP = 500


def main(request: ToolRequest, reply: Reply) -> str:
    key, text = request.input["key"], request.input["text"]
    # The lock keeps two stores in one parallel plan from dropping each other's memory.
    with DataFile(request, MEMORY_FILE) as file:
        kept = [memory for memory in load_memories(file) if memory["key"] != key]
        kept.append({"key": key, "text": text})
        forgotten = max(0, len(kept) - KEEP)
        save_memories(file, kept[forgotten:])
    if forgotten:
        reply.log(f"forgot the {forgotten} oldest memories to stay within {KEEP}")
    reply.patch_state({"memory": {"stored": key}})
    return f"Remembered {key}."


if __name__ == "__main__":
    run_script(main, input_schema=Path(__file__).with_name("store.input.json"))
