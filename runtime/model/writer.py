"""What every generator writes through: a loaded model or a model server, one interface.

    document = await writer.write_chat(messages, profile.schema, answer="Plan JSON",
                                       max_tokens=512, seed=None)

A generator builds chat messages and a decoding profile (a JSON Schema); the
writer returns a JSON object the schema accepts or raises GenerationFailed.
`ModelWriter` (runtime.model.generation) renders the messages with the
model's chat template and decodes under the profile in-process;
`ServedModel` (runtime.model.served) sends them to an OpenAI-compatible
server with the profile as its structured-output constraint, and checks
the answer against the profile, since a server may ignore the constraint.
"""

from __future__ import annotations

from typing import Any, Protocol

from .chat import Message

__all__ = ["Writer"]


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
