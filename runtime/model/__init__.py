"""The model layer: one writer interface, a local model and a model server behind it, one chooser.

    from plancontracts.runtime.model import ModelChoice, load_writer

    writer = load_writer(ModelChoice("gemma3-270m", download=False), needs="a plan needs one")

`Writer` (`writer.py`) is what every generator writes through. `LocalModel`
(`local.py`: llama-cpp-python under Outlines and llguidance) and
`ServedModel` (`served.py`: an OpenAI-compatible server through httpx)
implement it and import nothing of each other; `choice.py` chooses and
loads one from a `ModelChoice`, walking the resolution order of
`resolution.py`. `chat.py` renders chat messages as a model reads them.
Importing this front is light, since every command does: `LocalModel` and
`ServedModel` are imported when first named (with trio, and ssl for the
server), and llama.cpp, Outlines and httpx when a writer is loaded. It
imports `runtime.core` only.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..core.errors import AnswerRefused, GenerationFailed, NoModel, NotAModel, ServerFailed
from .chat import Message, render_chat
from .choice import ModelChoice, load_first_writer, load_writer
from .resolution import DEFAULT_MODEL, PACKAGED_MODEL, ServerSettings
from .writer import Writer, profile_accepts

__all__ = [
    "DEFAULT_MODEL",
    "PACKAGED_MODEL",
    "AnswerRefused",
    "GenerationFailed",
    "LocalModel",
    "Message",
    "ModelChoice",
    "NoModel",
    "NotAModel",
    "ServedModel",
    "ServerFailed",
    "ServerSettings",
    "Writer",
    "load_first_writer",
    "load_writer",
    "profile_accepts",
    "render_chat",
]

if TYPE_CHECKING:
    from .local import LocalModel
    from .served import ServedModel

_WRITERS = {"LocalModel": "local", "ServedModel": "served"}
"The writers, each imported from its module when first named."


def _writer(name: str) -> Any:
    """The writer class `name`, imported on first use. Raises AttributeError for any other name."""
    if name not in _WRITERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_WRITERS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The module's names, the writers not yet imported among them."""
    return sorted({*globals(), *_WRITERS})


# Only at run time: a type checker that saw a module `__getattr__` would type
# every other name as Any instead of refusing it.
if not TYPE_CHECKING:
    __getattr__ = _writer
