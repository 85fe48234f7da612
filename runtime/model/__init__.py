"""The model layer: one writer interface, a local model and a model server behind it, one chooser.

    from plancontracts.runtime.model import ModelChoice, load_writer

    writer = load_writer(ModelChoice("gemma3-270m", download=False), needs="a plan needs one")

`Writer` (`writer.py`) is what every generator writes through. `LocalModel`
(`local.py`: llama-cpp-python under Outlines and llguidance) and
`ServedModel` (`served.py`: an OpenAI-compatible server through httpx)
implement it and import nothing of each other; `choice.py` chooses and
loads one from a `ModelChoice`, walking the resolution order of
`resolution.py`. `chat.py` renders chat messages as a model reads them.
Importing this front is light: llama.cpp, Outlines and httpx are imported
when a writer is loaded. It imports `runtime.core` only.
"""

from __future__ import annotations

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
    "Message",
    "ModelChoice",
    "NoModel",
    "NotAModel",
    "ServerFailed",
    "ServerSettings",
    "Writer",
    "load_first_writer",
    "load_writer",
    "profile_accepts",
    "render_chat",
]
