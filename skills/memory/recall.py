"""Finds stored memories by the words of a query.

Input: {"query": "map well"}. A memory matches when its key or its text
contains any word of the query, ignoring case; at most 5 are returned, most
recent first. Reads <dataDir>/memories.json, written by store.py: a missing
file means nothing is remembered yet, a file that is not a memory file fails
the run with `corrupt_data`. A query without a word (only punctuation) fails
with `bad_input`; finding nothing is a success. State: {"memory":
{"recalled": [{"key", "text"}, ...]}}.
"""

from __future__ import annotations

import re
from pathlib import Path

from memories import MEMORY_FILE, load_memories

from plancontracts.generated.tool_plans import ToolRequest
from plancontracts.runtime.engine.script_io import DataFile, Reply, ScriptFailure, run_script

LIMIT = 5


def matches(memory: dict[str, str], words: set[str]) -> bool:
    key, text = memory["key"].casefold(), memory["text"].casefold()
    return any(word in key or word in text for word in words)


def main(request: ToolRequest, reply: Reply) -> str:
    query = request.input["query"]
    words = set(re.findall(r"\w+", query.casefold()))
    if not words:
        raise ScriptFailure("bad_input", "input /query: holds no words to look for")
    with DataFile(request, MEMORY_FILE) as file:
        stored = load_memories(file)
    found = [memory for memory in reversed(stored) if matches(memory, words)][:LIMIT]
    reply.patch_state({"memory": {"recalled": found}})
    if not found:
        return f"No memory matches {query!r}."
    plural = "memory" if len(found) == 1 else "memories"
    return f"Found {len(found)} {plural}: {', '.join(memory['key'] for memory in found)}."


if __name__ == "__main__":
    run_script(main, input_schema=Path(__file__).with_name("recall.input.json"))
