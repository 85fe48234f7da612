"""The memory file that store.py writes and recall.py reads, shared by both.

<dataDir>/memories.json holds {"version": 1, "memories": [{"key", "text"},
...]}, oldest first: a list, so that the order survives the sorted keys
`DataFile.save` writes. A missing file holds no memories.
"""

from __future__ import annotations

from typing import Any

from plancontracts.runtime.engine.script_io import DataFile

MEMORY_FILE = "memories.json"


def is_memory_file(data: Any) -> bool:
    """Whether `data` is what store.py writes; anything else is `corrupt_data`."""
    memories = data.get("memories") if isinstance(data, dict) else None
    return isinstance(memories, list) and all(map(is_memory, memories))


def is_memory(item: object) -> bool:
    return (
        isinstance(item, dict)
        and set(item) == {"key", "text"}
        and all(isinstance(value, str) for value in item.values())
    )


def load_memories(file: DataFile) -> list[dict[str, str]]:
    """The stored memories, oldest first."""
    memories: list[dict[str, str]] = file.load(
        default={"version": 1, "memories": []}, valid=is_memory_file
    )["memories"]
    return memories


def save_memories(file: DataFile, memories: list[dict[str, str]]) -> None:
    file.save({"version": 1, "memories": memories})
