"""The model layer: one writer interface, a local model and a model server behind it, one chooser.

    from plancontracts.runtime.model import ModelChoice, load_writer

    writer = load_writer(ModelChoice("gemma3-270m", download=False), needs="a plan needs one")

`Writer` (`writer.py`) is what every generator writes through, whole
(`write_chat`) or in `Piece`s as it is written (`stream_chat`), telling
`watching_tokens` callbacks of every token. `LocalModel`
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

from typing import TYPE_CHECKING

from ..core.errors import AnswerRefused, GenerationFailed, NoModel, NotAModel, ServerFailed
from ..core.lazy import lazy_names
from .chat import Message, render_chat
from .choice import ModelChoice, load_first_writer, load_writer
from .resolution import DEFAULT_MODEL, PACKAGED_MODEL, ServerSettings
from .writer import Piece, Writer, profile_accepts, tokens_written, watching_tokens

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
    "Piece",
    "ServedModel",
    "ServerFailed",
    "ServerSettings",
    "Writer",
    "load_first_writer",
    "load_writer",
    "profile_accepts",
    "render_chat",
    "tokens_written",
    "watching_tokens",
]

if TYPE_CHECKING:
    from .local import LocalModel
    from .served import ServedModel

_WRITERS = {"LocalModel": "local", "ServedModel": "served"}
"The writers, each imported from its module when first named."

_writer, __dir__ = lazy_names(__name__, _WRITERS)
if not TYPE_CHECKING:  # why only at run time: runtime/core/lazy.py
    __getattr__ = _writer
