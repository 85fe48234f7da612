"""Writers streaming their answer (`stream_chat`) and counting its tokens (`watching_tokens`).

The local model's stream is the same generation as its whole answer: the
pieces, joined, are the text llama.cpp writes without streaming for the same
seed, and their counts are the tokens it sampled. The served model's stream
is in test_served.py (the stub) and test_served_llama_cpp.py (a real server).
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
import trio
from packaged_model import model_file

from plancontracts.runtime.core.errors import GenerationFailed
from plancontracts.runtime.model.chat import render_chat
from plancontracts.runtime.model.local import LocalModel, generating
from plancontracts.runtime.model.writer import Piece, tokens_written, watching_tokens

# The hook ---------------------------------------------------------------------------


def test_watchers_nest_and_each_is_told_within_its_block() -> None:
    outer: list[int] = []
    inner: list[int] = []
    tokens_written(1)  # nobody watches: nothing happens
    with watching_tokens(outer.append):
        tokens_written(2)
        with watching_tokens(inner.append):
            tokens_written(3)
        tokens_written(4)
    tokens_written(5)
    assert (outer, inner) == ([2, 3, 4], [3])


def test_concurrent_tasks_watch_their_own_writing() -> None:
    told: dict[str, list[int]] = {"a": [], "b": []}

    async def task(name: str, count: int) -> None:
        with watching_tokens(told[name].append):
            for _ in range(3):
                tokens_written(count)
                await trio.sleep(0)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(task, "a", 1)
            nursery.start_soon(task, "b", 2)

    trio.run(main)
    assert told == {"a": [1, 1, 1], "b": [2, 2, 2]}


def test_what_a_watcher_raises_is_raised_where_the_tokens_are_written() -> None:
    def budget(count: int) -> None:
        raise RuntimeError("over budget")

    with watching_tokens(budget), pytest.raises(RuntimeError, match="over budget"):
        tokens_written(1)


# The local model --------------------------------------------------------------------


def story(most: int) -> dict[str, Any]:
    """A schema for a hero's name and a story of at most `most` characters."""
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["name", "story"],
        "properties": {
            "name": {"type": "string", "maxLength": 20},
            "story": {"type": "string", "maxLength": most},
        },
    }


SCHEMA = story(60)
"Short enough to end within a few dozen tokens: the tests compare whole answers."
LONG = story(5000)
"Long enough that an answer left running would take minutes."
MESSAGES = [{"role": "user", "content": "Name a hero and tell a long story about them."}]


def streamed(
    model: LocalModel, *, max_tokens: int, seed: int | None, schema: dict[str, Any] = SCHEMA
) -> tuple[list[Piece], list[int], set[int]]:
    """The pieces `stream_chat` gives, the counts the hook was told and the threads it ran in."""

    async def main() -> tuple[list[Piece], list[int], set[int]]:
        told: list[int] = []
        threads: set[int] = set()

        def watch(count: int) -> None:
            told.append(count)
            threads.add(threading.get_ident())

        with watching_tokens(watch):
            written = model.stream_chat(
                MESSAGES, schema, answer="JSON", max_tokens=max_tokens, seed=seed
            )
            pieces = [piece async for piece in written]
        return pieces, told, threads

    return trio.run(main)


def unstreamed(model: LocalModel, *, max_tokens: int, seed: int) -> tuple[str, int, str]:
    """What llama.cpp writes under SCHEMA without streaming: text, tokens, finish reason.

    Called as Outlines calls it for a whole answer, so that the streamed path
    is compared with the other one, not with itself.
    """
    generator = model.generator(SCHEMA)
    generator.logits_processor.reset()
    outlines_model = model.model
    prompt = render_chat(MESSAGES, model.chat_template, answer="JSON")
    with model.busy:
        completion = outlines_model.model(
            prompt,
            logits_processor=outlines_model.type_adapter.format_output_type(
                generator.logits_processor
            ),
            max_tokens=max_tokens,
            seed=seed,
        )
    choice = completion["choices"][0]
    return choice["text"], completion["usage"]["completion_tokens"], choice["finish_reason"]


@pytest.mark.parametrize("seed", [7, 11])
def test_the_stream_is_what_the_model_writes_whole_and_counts_its_tokens(
    packaged_model: LocalModel, seed: int
) -> None:
    pieces, told, threads = streamed(packaged_model, max_tokens=40, seed=seed)
    text, tokens, finish = unstreamed(packaged_model, max_tokens=40, seed=seed)
    assert "".join(piece.text for piece in pieces) == text
    # Every token sampled, the end-of-text token included when the model wrote it.
    assert sum(piece.tokens for piece in pieces) == tokens + (finish == "stop")
    assert all(piece.tokens >= 1 for piece in pieces)
    assert told == [piece.tokens for piece in pieces]
    assert threads == {threading.get_ident()}  # told in trio's thread, not the worker's


def test_a_whole_answer_is_the_joined_stream_and_counts_the_same_tokens(
    packaged_model: LocalModel,
) -> None:
    pieces, told, _ = streamed(packaged_model, max_tokens=0, seed=3)
    whole_told: list[int] = []

    async def whole() -> dict[str, Any]:
        with watching_tokens(whole_told.append):
            return await packaged_model.write_chat(
                MESSAGES, SCHEMA, answer="JSON", max_tokens=0, seed=3
            )

    document = trio.run(whole)
    assert json.loads("".join(piece.text for piece in pieces)) == document
    assert sum(whole_told) == sum(told)


def test_max_tokens_cuts_the_stream(packaged_model: LocalModel) -> None:
    pieces, told, _ = streamed(packaged_model, max_tokens=5, seed=7)
    assert sum(told) == 5
    assert not pieces[-1].text.endswith("}")

    async def whole() -> dict[str, Any]:
        return await packaged_model.write_chat(
            MESSAGES, SCHEMA, answer="JSON", max_tokens=5, seed=7
        )

    with pytest.raises(GenerationFailed, match=r"not complete JSON .* budget 5 tokens"):
        trio.run(whole)


def _stopped_soon() -> None:
    """Wait until no generation runs, failing only on a hang (the bound is no speed claim)."""
    give_up = time.monotonic() + 60
    while generating():
        assert time.monotonic() < give_up, "the generation did not stop"
        time.sleep(0.01)


@pytest.mark.parametrize("how", ["cancel", "aclose"])
def test_leaving_a_stream_stops_the_generation(packaged_model: LocalModel, how: str) -> None:
    read: list[Piece] = []

    async def main() -> None:
        # No token limit and a long string: generation would go on for thousands of tokens.
        written = packaged_model.stream_chat(MESSAGES, SCHEMA, answer="JSON", max_tokens=0, seed=5)
        if how == "cancel":
            with trio.CancelScope() as scope:
                async for piece in written:
                    read.append(piece)
                    if len(read) == 3:
                        scope.cancel()
        else:
            read.extend([await anext(written) for _ in range(3)])
            await written.aclose()

    trio.run(main)
    assert len(read) == 3
    _stopped_soon()
    assert not packaged_model.busy.locked()
    # The model writes again at once: the stopped generation holds nothing.
    pieces, _, _ = streamed(packaged_model, max_tokens=8, seed=7)
    assert sum(piece.tokens for piece in pieces) == 8


@pytest.mark.model  # a model of its own, with a small context
def test_a_prompt_the_context_cannot_hold_fails_the_stream_in_one_line() -> None:
    small = LocalModel.load(model_file(), context=512)
    long = [{"role": "user", "content": "Tell a story. " * 200}]  # 809 tokens

    async def main() -> list[Piece]:
        written = small.stream_chat(long, SCHEMA, answer="JSON", max_tokens=16, seed=1)
        return [piece async for piece in written]

    with pytest.raises(
        GenerationFailed, match=r"^Requested tokens \(\d+\) exceed context window of 512$"
    ):
        trio.run(main)
    assert not generating()
    assert not small.busy.locked()
