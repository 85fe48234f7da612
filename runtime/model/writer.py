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

`stream_chat` gives the same answer as the model writes it, in `Piece`s,
unchecked: the caller judges the whole text (and keeps a refused one to
ask again with). Every writer reports the tokens it writes, in either
form, to the callbacks `watching_tokens` installs:

    with watching_tokens(lambda count: print(count, "more tokens")):
        document = await writer.write_chat(...)
"""

from __future__ import annotations

import sys
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

from .chat import Message

__all__ = [
    "Piece",
    "Writer",
    "profile_accepts",
    "say_on_stderr",
    "tokens_written",
    "watching_tokens",
]


@dataclass(frozen=True)
class Piece:
    """A piece of an answer as the model writes it: its text and the tokens it counts for.

    A piece may carry text of several tokens, or no text and only tokens: a
    local model's end-of-text token, or a server's own count correcting the
    pieces' (negative where the server counts fewer tokens than it sent
    pieces). `prompt_tokens`, where a writer knows them, are the tokens the
    model read before writing, told once in an answer (what a trace reports
    as the tokens in).
    """

    text: str
    tokens: int
    prompt_tokens: int = 0


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

    def stream_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str,
        max_tokens: int,
        seed: int | None,
    ) -> AsyncGenerator[Piece, None]:
        """The answer to `messages` under `schema`, in pieces as the model writes it.

        An async generator. The text is not checked against `schema`: the
        caller judges the whole answer, and a refused one is kept whole for
        asking again. Raises GenerationFailed (a local model) or
        ServerFailed (a server) when the writing fails. Cancelling the
        surrounding scope, or closing the iterator (`aclose`), stops the
        writing: a local model at its next token, a server by the connection
        closed.
        """
        ...

    def refused(self) -> None:
        """Told that an answer `stream_chat` gave was refused by whoever judged it.

        A server's client counts it (`ServedModel.counts.refused`); a local
        model has nothing to count.
        """
        ...


_watchers: ContextVar[tuple[Callable[[int], None], ...]] = ContextVar(
    "plancontracts_token_watchers", default=()
)
"The callbacks told of tokens written in this context, the outermost first."


@contextmanager
def watching_tokens(callback: Callable[[int], None]) -> Iterator[None]:
    """Within the block, `callback(count)` is called as every writer writes `count` more tokens.

    Blocks nest: each watcher installed around a call is told (a progress
    display and a token budget watch the same writing). Context-local, so
    concurrent tasks watch their own writing. The callback runs in the
    caller's trio thread and must not block; what it raises is raised by
    the writer's call.
    """
    token = _watchers.set((*_watchers.get(), callback))
    try:
        yield
    finally:
        _watchers.reset(token)


def tokens_written(count: int) -> None:
    """Tell the callbacks of the current context that `count` more tokens were written."""
    for callback in _watchers.get():
        callback(count)


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
