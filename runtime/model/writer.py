"""What every generator writes through: one interface, for a loaded model and a model server.

    document = await writer.write_chat(messages, profile.schema, answer="Plan JSON",
                                       max_tokens=512, seed=None)

A generator builds chat messages and a decoding profile (a JSON Schema); the
writer returns a JSON object the schema accepts or raises GenerationFailed.
`LocalModel` (`local.py`) renders the messages with the model's chat
template and decodes under the profile in-process; `ServedModel`
(`served.py`) sends them to an OpenAI-compatible server with the profile as
its structured-output constraint. Both import this module and nothing of
each other; `choice.py` chooses and loads one. Both check every answer with
`profile_accepts`, since a backend may fail silently and a server may
ignore the constraint.
"""

from __future__ import annotations

import sys
from typing import Any, Protocol, TypeGuard

from .chat import Message

__all__ = ["Writer", "profile_accepts", "say_on_stderr"]


class Writer(Protocol):
    """Writes one JSON object under a schema, after chat messages."""

    async def write_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str,
        max_tokens: int,
        seed: int | None,
    ) -> dict[str, Any]:
        """A JSON object that `schema` accepts, written after `messages`.

        `answer` names the answer where the model reads plain text (such as
        `Plan JSON`); `max_tokens` 0 lets the answer take what the context
        leaves. Raises GenerationFailed when no such object was written.
        Cancelling the call stops the writing.
        """
        ...


def profile_accepts(document: object, schema: dict[str, Any]) -> TypeGuard[dict[str, Any]]:
    """Whether `document` is a JSON object `schema` accepts: the check on every model's answer.

    Constrained decoding should make it hold by construction; a backend that
    fails silently, or a server that drops a constraint, is caught here.
    Patterns are matched as the grammar holds them, whole (`^2d6$` refuses
    `"2d6\\n"`, which Python's `re` would take).
    """
    from ..core.patterns import pattern_validator

    return isinstance(document, dict) and pattern_validator()(schema).is_valid(document)


def say_on_stderr(line: str) -> None:
    """Say one line on standard error, at once: how models report the steps they take."""
    print(line, file=sys.stderr, flush=True)
