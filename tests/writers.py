"""What the tests' own writers share: answers written whole, streamed as one piece."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from plancontracts.runtime.model.chat import Message
from plancontracts.runtime.model.writer import Piece


class WrittenWhole:
    """`stream_chat` for a test's writer that has `write_chat`: its answer as one piece.

    The families write through `stream_chat` (the re-ask loop reads the text
    as it comes); a test's writer that decides whole documents gives each
    one as a server that sends its answer at once would, encoded as JSON.
    """

    async def write_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str,
        max_tokens: int,
        seed: int | None,
    ) -> dict[str, Any]:
        raise NotImplementedError

    async def stream_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str,
        max_tokens: int,
        seed: int | None,
    ) -> AsyncGenerator[Piece, None]:
        written = await self.write_chat(
            messages, schema, answer=answer, max_tokens=max_tokens, seed=seed
        )
        yield Piece(json.dumps(written), 1)

    def refused(self) -> None:
        """A refused answer: nothing to count."""
