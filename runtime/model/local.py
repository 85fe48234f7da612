"""A local model writing JSON under a decoding profile, with Outlines and llguidance: a Writer.

    model = LocalModel.load(path)                   # once per process
    document = model.write(prompt, profile.schema)  # a dict, or GenerationFailed

The model (llama-cpp-python) is loaded once; the compiled constraint for a
schema is built once and reused for every later call with the same schema
(building one costs seconds, so `write` keeps the most recent ones). A
generation that does not end in JSON the schema accepts, because the token
budget ran out or the backend failed silently inside llama.cpp, raises
GenerationFailed; it is never returned as a document.

`write_in_thread` runs the same off trio's event loop, and `stream_in_thread`
hands the text to trio as the model writes it, a piece per token, unchecked
(`stream_chat`, the `Writer`'s stream). Both are the same generation: the
joined pieces are what `write` decodes, for the same seed. Cancelling
either, or closing the stream, stops token generation at the next token,
not only the waiting. Until then the thread goes on (building a constraint
or reading a long prompt takes seconds and cannot be stopped);
`generating()` says whether any does. Every token is reported to the
`watching_tokens` callbacks (`writer.py`), in trio's thread.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections import OrderedDict
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from ..core.errors import GenerationFailed
from .chat import Message, render_chat
from .writer import Piece, profile_accepts, tokens_written

__all__ = ["LocalModel", "generating", "offload_layers", "where_it_runs"]

CACHED_CONSTRAINTS = 8


class _Workers:
    """How many worker threads run `write`, cancelled ones not yet stopped included."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def add(self, step: int) -> None:
        with self._lock:
            self._count += step

    def any(self) -> bool:
        with self._lock:
            return self._count > 0


_workers = _Workers()


def generating() -> bool:
    """Whether a model is generating in a worker thread, a cancelled generation included.

    The process must then end without its normal teardown: llama.cpp's
    global state, freed at exit, is still in use by that thread.
    """
    return _workers.any()


@dataclass
class LocalModel:
    """One loaded model and the compiled constraints built for it."""

    path: Path
    llama: Any
    model: Any
    chat_template: str | None
    _generators: OrderedDict[str, Any] = field(default_factory=OrderedDict)
    _backend: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    busy: threading.Lock = field(default_factory=threading.Lock)
    "Held while tokens are generated: one llama.cpp context serves one generation at a time."

    @classmethod
    def load(
        cls,
        path: Path,
        *,
        context: int = 8192,
        threads: int | None = None,
        gpu_layers: int | None = None,
    ) -> LocalModel:
        """Load the GGUF model at `path`. Raises ValueError when llama.cpp cannot load it.

        `gpu_layers` layers are offloaded to the GPU, -1 for all; None means
        all when this build of llama-cpp-python can offload (a CUDA or Metal
        build), none otherwise (`offload_layers`).
        """
        import outlines
        from llama_cpp import Llama

        _quiet_llama_log()
        llama = Llama(
            str(path),
            n_ctx=context,
            n_threads=threads or os.cpu_count() or 1,
            n_gpu_layers=offload_layers(gpu_layers),
            verbose=False,
        )
        template = llama.metadata.get("tokenizer.chat_template") or None
        # chat_mode off: prompts arrive rendered through the model's own chat
        # template (runtime.model.chat), and plain completion honours stopping criteria.
        model: Any = outlines.from_llamacpp(llama, chat_mode=False)
        model.model = _KeepingEvaluatedPrefix(llama)
        return cls(path, llama, model, template)

    @property
    def otel_attributes(self) -> dict[str, str]:
        """What a model call's span says of this model: llama.cpp, and the model file's name."""
        return {"gen_ai.provider.name": "llama.cpp", "gen_ai.request.model": self.path.stem}

    async def write_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str = "Plan JSON",
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """`write_in_thread` after `messages` in the model's chat format (`render_chat`)."""
        prompt = render_chat(messages, self.chat_template, answer=answer)
        return await self.write_in_thread(prompt, schema, max_tokens=max_tokens, seed=seed)

    async def stream_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str = "Plan JSON",
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> AsyncGenerator[Piece, None]:
        """`stream_in_thread` after `messages` in the model's chat format (`render_chat`)."""
        prompt = render_chat(messages, self.chat_template, answer=answer)
        async with aclosing(
            self.stream_in_thread(prompt, schema, max_tokens=max_tokens, seed=seed)
        ) as pieces:
            async for piece in pieces:
                yield piece

    def refused(self) -> None:
        """An answer was refused: nothing is counted for a local model (see `Writer`)."""

    def generator(self, schema: dict[str, Any]) -> Any:
        """The compiled constraint for `schema`, built on first use and then reused."""
        from outlines.backends.llguidance import LLGuidanceBackend
        from outlines.generator import SteerableGenerator

        canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        key = hashlib.sha256(canonical.encode()).hexdigest()
        with self._lock:
            found = self._generators.get(key)
            if found is None:
                if self._backend is None:
                    # The backend holds llguidance's tokenizer, built from the whole
                    # vocabulary: 2 to 4 s, which `outlines.Generator` pays again for
                    # every schema. Built once, a new schema's constraint costs little.
                    self._backend = LLGuidanceBackend(self.model)
                # Unsorted: the model writes properties in the order the schema gives.
                text = json.dumps(schema, separators=(",", ":"))
                processor = self._backend.get_json_schema_logits_processor(text)
                found = SteerableGenerator.from_processor(self.model, processor)
                self._generators[key] = found
                while len(self._generators) > CACHED_CONSTRAINTS:
                    self._generators.popitem(last=False)
            self._generators.move_to_end(key)
            return found

    def pieces(
        self,
        prompt: str,
        schema: dict[str, Any],
        *,
        max_tokens: int = 512,
        seed: int | None = None,
        stop: threading.Event | None = None,
    ) -> Iterator[Piece]:
        """The text written under `schema` after `prompt`, in pieces as the model writes it.

        Each piece counts the tokens sampled since the one before: one,
        more where a character spans tokens (its bytes are held back until
        whole), and a last piece with no text for the end-of-text token.
        The text is not checked. Holds `busy` until the generator is
        exhausted or closed. Raises GenerationFailed when the prompt and
        `max_tokens` do not fit the model's context, or when `stop` was set
        before the end.
        """
        from llama_cpp import StoppingCriteriaList

        generator = self.generator(schema)
        sampled = 0
        seen = -1
        read = 0

        def counting(ids: Any, _logits: Any) -> bool:
            # Called by llama-cpp-python once for every token sampled, with the tokens
            # evaluated before it, and once more after the last with the same tokens
            # (nothing was evaluated since), which is no token: the exact count. The
            # first call's are the prompt's.
            nonlocal sampled, seen, read
            if stop is not None and stop.is_set():
                return True
            if len(ids) != seen:
                if seen < 0:
                    read = len(ids)
                seen = len(ids)
                sampled += 1
            return False

        options: dict[str, Any] = {
            "max_tokens": max_tokens,
            "stopping_criteria": StoppingCriteriaList([counting]),
        }
        if seed is not None:
            options["seed"] = seed
        reported = 0
        with self.busy:
            try:
                # Once `stop` is set the counter ends the generation at the next token.
                for text in generator.stream(prompt, **options):
                    if text or sampled > reported:
                        yield Piece(text, sampled - reported, read)
                        reported, read = sampled, 0
            except ValueError as error:  # llama-cpp-python: the prompt does not fit the context
                raise GenerationFailed(str(error).splitlines()[0]) from None
        if stop is not None and stop.is_set():
            raise GenerationFailed("generation was stopped")
        if sampled > reported:
            yield Piece("", sampled - reported, read)

    def write(
        self,
        prompt: str,
        schema: dict[str, Any],
        *,
        max_tokens: int = 512,
        seed: int | None = None,
        stop: threading.Event | None = None,
    ) -> dict[str, Any]:
        """Generate one JSON object under `schema` after `prompt`.

        `max_tokens` 0 lets the document take what the model's context leaves
        after the prompt. Raises GenerationFailed when the output is not a JSON object that
        `schema` accepts, when the prompt and `max_tokens` do not fit the
        model's context, or when `stop` was set before the end. Reports its
        tokens to the `watching_tokens` callbacks of the calling thread.
        """
        written: list[str] = []
        for piece in self.pieces(prompt, schema, max_tokens=max_tokens, seed=seed, stop=stop):
            written.append(piece.text)
            tokens_written(piece.tokens)
        return _document("".join(written), schema, max_tokens)

    async def write_in_thread(
        self,
        prompt: str,
        schema: dict[str, Any],
        *,
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """`write` in a worker thread; cancellation stops generation at the next token.

        A cancelled call returns at once, before the thread has stopped (see
        `generating`).
        """
        async with aclosing(
            self.stream_in_thread(prompt, schema, max_tokens=max_tokens, seed=seed)
        ) as pieces:
            written = [piece.text async for piece in pieces]
        return _document("".join(written), schema, max_tokens)

    async def stream_in_thread(
        self,
        prompt: str,
        schema: dict[str, Any],
        *,
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> AsyncGenerator[Piece, None]:
        """`pieces` in a worker thread, each handed to trio as it is written, unchecked.

        Each piece's tokens are reported to the `watching_tokens` callbacks
        here, in trio's thread, before it is yielded. Raises GenerationFailed
        as `pieces` does. Cancelling the caller, or closing this generator,
        returns at once and stops generation at the next token (see
        `generating`).
        """
        # Unbounded: the worker never waits on the reader (a reader that stops reading
        # would hold `busy`); the pieces are bounded by the tokens the context holds.
        send, receive = trio.open_memory_channel[Piece | BaseException | None](math.inf)
        stop = threading.Event()
        trio_token = trio.lowlevel.current_trio_token()

        def hand(item: Piece | BaseException | None) -> None:
            try:
                send.send_nowait(item)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                stop.set()  # the reader is gone: stop at the next token

        def work() -> None:
            try:
                try:
                    for piece in self.pieces(
                        prompt, schema, max_tokens=max_tokens, seed=seed, stop=stop
                    ):
                        try:
                            trio_token.run_sync_soon(hand, piece)
                        except trio.RunFinishedError:
                            # Nobody reads: the generation ends at its next token, by the
                            # flag, as a cancelled one does, rather than closed mid-piece.
                            stop.set()
                except BaseException as error:  # handed to the reader, raised there
                    trio_token.run_sync_soon(hand, error)
                else:
                    trio_token.run_sync_soon(hand, None)
            except trio.RunFinishedError:
                pass  # the trio run that asked has ended: nobody reads
            finally:
                _workers.add(-1)

        # Counted from here, and the thread started at once: a cancelled reader never
        # leaves a generation behind that `generating()` does not know of.
        _workers.add(1)
        try:
            threading.Thread(target=work, name="plancontracts generation", daemon=True).start()
        except BaseException:
            _workers.add(-1)
            raise
        try:
            async with receive:
                while True:
                    item = await receive.receive()
                    if item is None:
                        return
                    if isinstance(item, BaseException):
                        raise item
                    tokens_written(item.tokens)
                    yield item
        finally:
            # On cancellation or close the thread is left, not killed: the flag makes
            # it stop at its next token, and `busy` keeps the next call waiting till then.
            stop.set()


def _document(text: str, schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """The JSON object `text` holds, when `schema` accepts it; GenerationFailed otherwise."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        shown = text if len(text) <= 200 else text[:200] + "..."
        budget = f"budget {max_tokens} tokens" if max_tokens > 0 else "the context ran out"
        raise GenerationFailed(
            f"the model's output is not complete JSON ({len(text)} characters, {budget}): {shown!r}"
        ) from None
    if not profile_accepts(document, schema):
        raise GenerationFailed("the model's output does not satisfy the decoding schema")
    return document


class _KeepingEvaluatedPrefix:
    """The model as Outlines sees it: every call goes through, except `reset`.

    Outlines resets the model after each generation, which throws away the
    evaluated prompt. Without that reset, llama-cpp-python keeps the longest
    prefix the next prompt shares with the last one in llama.cpp's own KV
    cache; prompts share their long system message, so only the player's
    input and what follows is evaluated again. (llama-cpp-python's RAM
    prompt cache would do the same by saving whole states, each with a copy
    of the score array: hundreds of MB per distinct prompt, unbounded.)
    """

    def __init__(self, llama: Any) -> None:
        self._llama = llama

    def __getattr__(self, name: str) -> Any:
        return getattr(self._llama, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._llama(*args, **kwargs)

    def reset(self) -> None:
        """Keep the evaluated tokens; `Llama.generate` reuses what the next prompt shares."""


_GGML_LOG_ERROR, _GGML_LOG_CONT = 4, 5
"ggml's log levels (ggml.h) for an error and for the rest of the line before."
_log: dict[str, Any] = {"callback": None, "error": False}


def _quiet_llama_log() -> None:
    """Send llama.cpp's log to standard error only for its errors, from now on.

    llama-cpp-python's own callback reads ggml's levels from an older table,
    where a warning is an error, so `verbose=False` still printed lines such
    as `llama_kv_cache_iswa: using full-size SWA cache` on every model
    command. The callback is kept referenced: ctypes would free it otherwise.
    """
    if _log["callback"] is not None:
        return
    import ctypes
    import sys

    import llama_cpp

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def errors_only(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        if level != _GGML_LOG_CONT:
            _log["error"] = level == _GGML_LOG_ERROR
        if _log["error"]:
            sys.stderr.write(text.decode("utf-8", "replace"))

    _log["callback"] = errors_only
    llama_cpp.llama_log_set(errors_only, ctypes.c_void_p(0))


def offload_layers(gpu_layers: int | None) -> int:
    """The layers to offload for `--gpu-layers` (`gpu_layers`; None: all, where the build can).

    A build of llama-cpp-python without GPU support offloads nothing,
    whatever is asked: llama.cpp runs every layer on the CPU.
    """
    import llama_cpp

    if not llama_cpp.llama_supports_gpu_offload():
        return 0
    return -1 if gpu_layers is None else gpu_layers


def where_it_runs(gpu_layers: int | None) -> str:
    import llama_cpp

    if not llama_cpp.llama_supports_gpu_offload():
        return "on the CPU (this build of llama-cpp-python cannot offload to a GPU)"
    layers = offload_layers(gpu_layers)
    if layers == 0:
        return "on the CPU (--gpu-layers 0)"
    return "with all layers on the GPU" if layers < 0 else f"with {layers} layers on the GPU"
