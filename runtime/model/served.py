"""A model behind an OpenAI-compatible server, written to like the local one.

    served = ServedModel.connect(ServerSettings("http://127.0.0.1:8080"))   # once
    document = await served.write_chat(messages, profile.schema, answer="Plan JSON",
                                       max_tokens=512, seed=None)

The same decoding profile the local model decodes under is sent as the
server's structured-output constraint: `response_format` of type
`json_schema` (vLLM, llama.cpp's llama-server, OpenAI), or of type
`json_object` with the schema beside it (llama-cpp-python's server). A server
may ignore a constraint, or fail to turn it into a grammar and fall back to
any JSON without saying so, so every answer is checked against the profile:
one that does not pass is refused and counted (`ServedModel.counts`), never
returned.

`stream_chat` asks for the answer as server-sent events (`"stream": true`)
and gives its text as it arrives, unchecked, under the same bounds: the
bytes of the whole stream, one deadline for the whole request, and tries
again only before the first piece (a half answer is never silently
started over). A server that ignores `stream` and answers with one JSON
object is read as one piece.

Requests go through httpx's async client, which runs under trio. Each has a
deadline; 408, 429, 502, 503 and 504 answers and failed connections are
tried again, at most `retries` times, a 500 once, after the wait the server
asks for (`Retry-After`) or an exponential backoff. Cancelling a call closes
its connection, which tells the server to stop. At most `in_flight` requests
are out at once per trio run: a call beyond that waits for a place, it never
fails for want of one.

The API key is read from `PLANCONTRACTS_API_KEY` only (never from an
option, so it stays out of shell history and process lists) and is never
said, logged or shown in an error. Nothing is read from proxy variables:
requests go to the address given, and nowhere else.
"""

from __future__ import annotations

import email.utils
import json
import os
import random
import re
import ssl
import threading
import time
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass, field
from typing import Any, TypeVar

import trio

from ..core.errors import AnswerRefused, NoModel, ServerFailed, printable
from ..core.plain_text import one_line
from .chat import Message
from .resolution import API_KEY_VARIABLE, ServerSettings
from .writer import Piece, profile_accepts, say_on_stderr, tokens_written

_T = TypeVar("_T")

__all__ = ["Counts", "ServedModel", "api_base", "portable"]

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"The largest answer read from a server, as sent and as decoded; a longer one is a failed request."
ACCEPTED_ENCODINGS = "gzip, deflate"
"""The encodings asked for: the ones decoded here, within MAX_RESPONSE_BYTES a layer.

httpx decodes a whole chunk at once, so 7 KB of `gzip, gzip` became 8 GB
before any count could stop it; the raw bytes are read instead and each
layer is decoded with a limit on its output."""
RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
MAX_WAIT = 60.0
"The longest wait before trying again, whatever `Retry-After` asks."
CONNECT_SECONDS = 10.0
SHOWN_CHARACTERS = 200


@dataclass
class Counts:
    """What a served model has done so far."""

    requests: int = 0
    "Requests sent, retries included."
    retried: int = 0
    "Requests sent again after a failure."
    answers: int = 0
    "Documents the server answered with."
    refused: int = 0
    "Of them, those refused (by the profile, the contract or a caller's check), never used."


_PASSWORD = re.compile(r"(//[^/@:]*:)[^/@]*@")
"The password of an address's user information: `//user:password@`."


def redacted(url: str) -> str:
    """`url` as it is shown in lines and errors: a password in it replaced by `***`.

    Works on any text, an address httpx refuses included.
    """
    return _PASSWORD.sub(r"\1***@", url)


def api_base(url: str) -> str:
    """The address requests are made under: `url` without a trailing `/`, ending in `/v1`.

    Raises ValueError for an address that is not http or https with a host.
    """
    import httpx

    try:
        parsed = httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError) as error:
        raise ValueError(f"not a server address: {redacted(url)!r} ({error})") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"not an http or https server address: {redacted(url)!r}")
    if parsed.query or parsed.fragment:
        raise ValueError(f"a server address has no query or fragment: {redacted(url)!r}")
    base = str(parsed.copy_with(path=parsed.path.rstrip("/"))).rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


@dataclass
class ServedModel:
    """A model on an OpenAI-compatible server, and how this process asks it."""

    base: str
    "The API's address, ending in `/v1`."
    model: str
    settings: ServerSettings
    counts: Counts = field(default_factory=Counts)
    _headers: dict[str, str] = field(default_factory=dict, repr=False)
    _ssl: ssl.SSLContext | None = field(default=None, repr=False)
    _run: object = field(default=None, repr=False)
    _pool: trio.CapacityLimiter | None = field(default=None, repr=False)

    @property
    def address(self) -> str:
        """The API's address as lines and errors show it: without a password."""
        return redacted(self.base)

    @property
    def otel_attributes(self) -> dict[str, str | int]:
        """What a model call's span says of this server: the model, host and port, never a password.

        `gen_ai.provider.name` is `openai_compatible`: the API is OpenAI's,
        the server may be anyone's (vLLM, llama-server...).
        """
        from urllib.parse import urlsplit

        parts = urlsplit(self.base)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return {
            "gen_ai.provider.name": "openai_compatible",
            "gen_ai.request.model": self.model,
            "server.address": parts.hostname or "",
            "server.port": port,
        }

    @classmethod
    def connect(
        cls,
        settings: ServerSettings,
        *,
        url: str | None = None,
        source: str = "--server",
        environ: Mapping[str, str] | None = None,
        say: Callable[[str], None] = say_on_stderr,
    ) -> ServedModel:
        """Ask the server at `url` (default `settings.url`) which models it serves, and pick one.

        `source` says where the address came from, in the line said and in
        errors. Raises NoModel, in one line, when the address is not one,
        the server does not answer, or it does not serve `settings.model`.
        """
        import httpx

        environ = os.environ if environ is None else environ
        address = url or settings.url or ""
        try:
            base = api_base(address)
        except ValueError as error:
            raise NoModel(f"{error} ({source})") from None
        shown = redacted(base)
        key = environ.get(API_KEY_VARIABLE, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        served = cls(base, settings.model or "", settings, _headers=headers)
        deadline = time.monotonic() + settings.timeout

        def listed() -> tuple[int, bytes]:
            with (
                httpx.Client(
                    timeout=min(CONNECT_SECONDS, settings.timeout),
                    trust_env=False,
                    verify=served._context(),
                ) as client,
                client.stream("GET", f"{base}/models", headers=_asking(headers)) as response,
            ):
                raw = _bounded(response.iter_raw(), deadline)
                return response.status_code, _decoded(
                    raw, response.headers.get("content-encoding", "")
                )

        try:
            status, body = _by_deadline(listed, deadline)
        except (httpx.HTTPError, _TooLong, _TooSlow, _Undecodable) as error:
            why = _why(error)
            raise NoModel(f"the model server {shown} ({source}) does not answer: {why}") from None
        if status != 200:
            raise NoModel(
                f"the model server {shown} ({source}) answered HTTP {status} to GET /v1/models: "
                f"{_shown(body)}"
            )
        names = _model_names(body)
        if settings.model is None:
            if not names:
                raise NoModel(f"the model server {shown} ({source}) lists no model at /v1/models")
            served.model = names[0]
        elif names and settings.model not in names:
            raise NoModel(
                f"the model server {shown} ({source}) does not serve {settings.model!r}: "
                f"it lists {', '.join(repr(name) for name in names[:5])}"
            )
        # What a server names its model is its to say: shown escaped, never as terminal codes.
        say(f"model: {printable(served.model)} served at {shown} ({source})")
        return served

    async def write_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str = "Plan JSON",
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> dict[str, Any]:
        """A JSON object that `schema` accepts, from the server, for chat `messages`.

        `answer` is unused (the server applies its model's chat template);
        `max_tokens` 0 sends no limit. Waits for a place when `in_flight`
        requests are out. Raises ServerFailed when no answer came (after the
        retries), AnswerRefused when the answer is not such an object. The
        answer's tokens, when the server counts them (`usage`), are reported
        to the `watching_tokens` callbacks once it has come.
        """
        body = self._body(messages, schema, max_tokens=max_tokens, seed=seed, stream=False)
        async with self._limiter():
            reply = await self._post(json.dumps(body).encode())
        text, finish = _choice(reply)
        written = _completion_tokens(reply)
        if written:
            tokens_written(written)
        self.counts.answers += 1
        document: object
        try:
            document = json.loads(text)
        except (ValueError, RecursionError):
            document = None
        if profile_accepts(document, schema):
            return document
        self.counts.refused += 1
        cut = ""
        if finish == "length":  # with no limit sent (0), the server's own limit cut it
            limit = f"{max_tokens} tokens" if max_tokens > 0 else "the server's token limit"
            cut = f"cut at {limit}; "
        raise AnswerRefused(
            f"the server's answer does not satisfy the decoding schema ({cut}refused: "
            f"{self.counts.refused} of {self.counts.answers} answers so far): {_shown(text)}"
        )

    async def stream_chat(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        answer: str = "Plan JSON",
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> AsyncGenerator[Piece, None]:
        """The server's answer to `messages` under `schema`, unchecked, in pieces as it arrives.

        Each piece of text counts for one token; when the server counts the
        answer's tokens (`usage`, asked for with `include_usage`), a last
        piece with no text brings the total to its count (fewer tokens than
        pieces makes that piece's count negative). Each piece's tokens are
        reported to the `watching_tokens` callbacks before it is given.
        Raises ServerFailed when the request fails (tried again as
        `write_chat`'s are, but only before the first piece), the stream
        breaks off, says an error, or is not server-sent events of chat
        chunks. Closing the generator or cancelling its reader closes the
        connection, which tells the server to stop. A whole answer counts in
        `counts.answers`; one its caller refuses, in `counts.refused` (`refused`).
        """
        body = self._body(messages, schema, max_tokens=max_tokens, seed=seed, stream=True)
        body["stream_options"] = {"include_usage": True}
        place = object()  # the limiter's borrower: the generator may be closed from another task
        limiter = self._limiter()
        await limiter.acquire_on_behalf_of(place)
        try:
            async with aclosing(self._stream(json.dumps(body).encode())) as pieces:
                async for piece in pieces:
                    tokens_written(piece.tokens)
                    yield piece
        finally:
            limiter.release_on_behalf_of(place)

    def refused(self) -> None:
        """Count an answer `stream_chat` gave that its caller refused (`counts.refused`)."""
        self.counts.refused += 1

    def _body(
        self,
        messages: list[Message],
        schema: dict[str, Any],
        *,
        max_tokens: int,
        seed: int | None,
        stream: bool,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "response_format": self._response_format(schema),
            "stream": stream,
        }
        if max_tokens > 0:
            body["max_tokens"] = max_tokens
        if seed is not None:
            body["seed"] = seed
        return body

    def _response_format(self, schema: dict[str, Any]) -> dict[str, Any]:
        sent = portable(schema)
        if self.settings.response_format == "json_object":
            return {"type": "json_object", "schema": sent}
        return {"type": "json_schema", "json_schema": {"name": "profile", "schema": sent}}

    def _limiter(self) -> trio.CapacityLimiter:
        """The pool of places for requests in the current trio run (a limiter is one run's)."""
        run = trio.lowlevel.current_trio_token()
        if self._pool is None or self._run is not run:
            self._run, self._pool = run, trio.CapacityLimiter(self.settings.in_flight)
        return self._pool

    def _context(self) -> ssl.SSLContext:
        """One TLS context for every request: building one reads the CA bundle (milliseconds)."""
        if self._ssl is None:
            import certifi

            self._ssl = ssl.create_default_context(cafile=certifi.where())
        return self._ssl

    async def _post(self, content: bytes) -> Any:
        """POST `content` to /chat/completions, trying again as the settings allow; the reply."""
        import httpx

        settings = self.settings
        url = f"{self.base}/chat/completions"
        headers = _asking({**self._headers, "Content-Type": "application/json"})
        timeout = httpx.Timeout(settings.timeout, connect=min(CONNECT_SECONDS, settings.timeout))
        for attempt in range(settings.retries + 1):
            self.counts.requests += 1
            wait: float | None = None
            try:
                with trio.fail_after(settings.timeout):
                    async with (
                        httpx.AsyncClient(
                            timeout=timeout, trust_env=False, verify=self._context()
                        ) as client,
                        client.stream("POST", url, content=content, headers=headers) as response,
                    ):
                        raw = await _bounded_async(response.aiter_raw())
                        body = _decoded(raw, response.headers.get("content-encoding", ""))
                        status = response.status_code
                        asked = response.headers.get("retry-after")
            except (trio.TooSlowError, httpx.TimeoutException):
                raise ServerFailed(
                    f"the model server {self.address} gave no answer within {settings.timeout:g} s"
                ) from None
            except (_TooLong, _Undecodable) as error:
                raise ServerFailed(f"the model server {self.address} {error}") from None
            except httpx.HTTPError as error:
                problem = _why(error)
            else:
                if status == 200:
                    try:
                        return json.loads(body)
                    except (ValueError, RecursionError):
                        raise ServerFailed(
                            f"the model server {self.address} answered with no JSON: {_shown(body)}"
                        ) from None
                problem = self._refusal(status, body, attempt)
                wait = _retry_after(asked)
            await self._again(attempt, problem, wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _refusal(self, status: int, body: bytes, attempt: int) -> str:
        """The problem an answer of HTTP `status` is, when another try may mend it.

        Raises ServerFailed when no other try can.
        """
        problem = f"HTTP {status}: {_shown(body)}"
        if b"response_format" in body and self.settings.response_format == "json_schema":
            problem += " (llama-cpp-python's server takes the json_object response format)"
        # A 500 is a crash or, for some servers, a refused request (llama-cpp-python's
        # and some vLLM releases' validation errors), which no other try mends: one more.
        if status not in RETRIED_STATUSES or (status == 500 and attempt > 0):
            raise ServerFailed(f"the model server {self.address} answered {problem}")
        return problem

    async def _again(self, attempt: int, problem: str, wait: float | None) -> None:
        """Wait before try `attempt + 1`; ServerFailed with `problem` when it was the last."""
        settings = self.settings
        if attempt == settings.retries:
            tries = f"{attempt + 1} tries" if attempt else "1 try"
            raise ServerFailed(f"the model server {self.address} failed {tries}: {problem}")
        self.counts.retried += 1
        if wait is None:
            wait = settings.backoff * 2**attempt * (1 + random.random() / 2)
        await trio.sleep(min(wait, MAX_WAIT))

    async def _stream(self, content: bytes) -> AsyncGenerator[Piece, None]:
        """POST `content`, a streamed request, to /chat/completions: the answer's pieces.

        Each try has one deadline for the whole stream, checked at every
        read (a cancel scope cannot span this generator's yields: its
        reader's code runs between them).
        """
        import httpx

        settings = self.settings
        url = f"{self.base}/chat/completions"
        headers = _asking({**self._headers, "Content-Type": "application/json"})
        timeout = httpx.Timeout(settings.timeout, connect=min(CONNECT_SECONDS, settings.timeout))
        for attempt in range(settings.retries + 1):
            self.counts.requests += 1
            deadline = trio.current_time() + settings.timeout
            answer = _StreamedAnswer()
            wait: float | None = None
            try:
                async with AsyncExitStack() as stack:
                    with trio.fail_at(deadline):
                        client = await stack.enter_async_context(
                            httpx.AsyncClient(
                                timeout=timeout, trust_env=False, verify=self._context()
                            )
                        )
                        response = await stack.enter_async_context(
                            client.stream("POST", url, content=content, headers=headers)
                        )
                    raw = response.aiter_raw()
                    decoder = _Decoder(response.headers.get("content-encoding", ""))
                    if response.status_code != 200:
                        kept = bytearray()
                        while (chunk := await _read(raw, deadline)) is not None:
                            kept += decoder.feed(chunk)
                        kept += decoder.end()
                        problem = self._refusal(response.status_code, bytes(kept), attempt)
                        wait = _retry_after(response.headers.get("retry-after"))
                    else:
                        while not answer.done:
                            chunk = await _read(raw, deadline)
                            if chunk is None:
                                pieces = answer.end(decoder.end())
                            else:
                                pieces = answer.feed(decoder.feed(chunk))
                            for piece in pieces:
                                yield piece
                        self.counts.answers += 1
                        return
            except (trio.TooSlowError, httpx.TimeoutException):
                when = "ended" if answer.started else "answered"
                raise ServerFailed(
                    f"the model server {self.address} had not {when} within {settings.timeout:g} s"
                ) from None
            except (_TooLong, _Undecodable, _NotAStream) as error:
                raise ServerFailed(f"the model server {self.address} {error}") from None
            except httpx.HTTPError as error:
                if answer.started:
                    raise ServerFailed(
                        f"the model server {self.address} broke off its answer after "
                        f"{answer.characters} characters: {_why(error)}"
                    ) from None
                problem = _why(error)
            await self._again(attempt, problem, wait)
        raise AssertionError("unreachable: the last attempt returns or raises")


def portable(schema: Any) -> Any:
    """`schema` as servers' grammar converters read it: the same documents, fewer forms.

    A tuple's `"items": false` (nothing after the `prefixItems`) becomes a
    `maxItems` of as many items: llama.cpp's converter refuses a boolean
    schema there ("schema must be an object"). Answers are still checked
    against `schema` itself.
    """
    if isinstance(schema, list):
        return [portable(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    sent = {key: portable(value) for key, value in schema.items()}
    if sent.get("items") is False and isinstance(sent.get("prefixItems"), list):
        del sent["items"]
        most = len(sent["prefixItems"])
        sent["maxItems"] = min(most, sent.get("maxItems", most))
    return sent


class _TooLong(Exception):
    def __str__(self) -> str:
        return f"answered with more than {MAX_RESPONSE_BYTES} bytes"


class _Undecodable(Exception):
    """An answer in an encoding not decoded here, or not decodable as it says."""


class _TooSlow(Exception):
    def __str__(self) -> str:
        return "its answer did not end within the --server-timeout"


class _NotAStream(Exception):
    """A streamed answer that is not server-sent events of chat chunks, or says an error."""


async def _read(chunks: AsyncIterator[bytes], deadline: float) -> bytes | None:
    """The next chunk of `chunks`, None at their end; trio.TooSlowError past `deadline`."""
    with trio.fail_at(deadline):
        return await anext(chunks, None)


class _Decoder:
    """Bytes as sent, decoded as a Content-Encoding says as they arrive, bounded like `_decoded`.

    Raises _Undecodable for an encoding other than gzip and deflate or bytes
    that are not what it says, _TooLong past MAX_RESPONSE_BYTES sent or
    decoded at any layer.
    """

    def __init__(self, encoding: str) -> None:
        names = [name.strip().lower() for name in encoding.split(",")]
        self._layers: list[_Inflating] = []
        for layer in reversed([name for name in names if name and name != "identity"]):
            if layer not in ("gzip", "x-gzip", "deflate"):
                raise _Undecodable(f"answered in the {_shown(layer)} encoding, which is not read")
            self._layers.append(_Inflating(layer))
        self._sent = 0

    def feed(self, data: bytes) -> bytes:
        self._sent += len(data)
        if self._sent > MAX_RESPONSE_BYTES:
            raise _TooLong
        for layer in self._layers:
            data = layer.feed(data)
        return data

    def end(self) -> bytes:
        data = b""
        for layer in self._layers:
            data = layer.feed(data) + layer.end()
        return data


class _Inflating:
    """One gzip or deflate layer decoded as it arrives; deflate zlib-wrapped or raw."""

    def __init__(self, layer: str) -> None:
        self._layer = layer
        self._inflater: Any = None
        self._held = b""  # a deflate stream's first bytes, until its header tells the form
        self._out = 0
        if layer != "deflate":
            self._inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)

    def feed(self, data: bytes) -> bytes:
        if self._inflater is None:
            self._held += data
            if len(self._held) < 2:
                return b""
            data, self._held = self._held, b""
            wrapped = data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0
            self._inflater = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        try:
            out = self._inflater.decompress(data, MAX_RESPONSE_BYTES + 1 - self._out)
        except zlib.error:
            raise _Undecodable(
                f"answered with a body that is not {self._layer} as it says"
            ) from None
        self._out += len(out)
        if self._out > MAX_RESPONSE_BYTES or self._inflater.unconsumed_tail:
            raise _TooLong
        return bytes(out)

    def end(self) -> bytes:
        if self._inflater is None:  # fewer than two bytes: no deflate stream
            if self._held:
                raise _Undecodable(f"answered with a body that is not {self._layer} as it says")
            return b""
        return bytes(self._inflater.flush())


_LINE_END = re.compile(rb"\r\n|\r|\n")


class _StreamedAnswer:
    """A streamed chat answer read as it arrives: server-sent events of chunks, or one object.

    `feed` takes decoded bytes and gives the pieces they complete; `end`,
    at the end of the bytes, gives the last ones. Raises _NotAStream for an
    event that is not a chat chunk, an error said in the stream, and a
    stream that ends before its `[DONE]` or a finished choice. The work is
    linear in the bytes, however they are cut.
    """

    def __init__(self) -> None:
        self.started = False
        "Whether a piece of text was given: no other try after that."
        self.done = False
        self.characters = 0
        self._form: str | None = None  # "events" or "object", told by the first byte
        self._line = bytearray()
        self._data: list[bytes] = []
        self._after_cr = False
        self._pieces = 0
        self._finished = False
        self._usage: int | None = None
        self._prompt = 0

    def feed(self, data: bytes) -> list[Piece]:
        if not data:  # a decoder's empty output: a CR it follows may still be a CRLF's
            return []
        if self._form is None:
            # Blank lines before the first byte mean nothing in either form.
            data = data.lstrip()
            if not data:
                return []
            self._form = "object" if data.startswith(b"{") else "events"
        if self._form == "object":
            self._line += data
            return []
        pieces: list[Piece] = []
        start = 1 if self._after_cr and data.startswith(b"\n") else 0
        self._after_cr = data.endswith(b"\r")
        for end in _LINE_END.finditer(data, start):
            self._line += data[start : end.start()]
            start = end.end()
            self._event_line(bytes(self._line), pieces)
            self._line.clear()
            if self.done:
                return pieces
        self._line += data[start:]
        return pieces

    def end(self, data: bytes) -> list[Piece]:
        pieces = self.feed(data) if data else []
        if self.done:
            return pieces
        if self._form == "object":
            return [*pieces, self._object(bytes(self._line))]
        if self._line:
            self._event_line(bytes(self._line), pieces)
        self._event_line(b"", pieces)
        if not self.done:
            if not self._finished:
                raise _NotAStream(
                    f"ended its stream before the answer did, after {self.characters} characters"
                )
            self._finish(pieces)
        return pieces

    def _event_line(self, line: bytes, pieces: list[Piece]) -> None:
        """Read one line of server-sent events, as the standard says, into `pieces`."""
        if not line:  # the end of an event
            data, self._data = b"\n".join(self._data), []
            if data:  # an event without data is none (the standard says so)
                self._event(data, pieces)
            return
        if line.startswith(b":"):  # a comment: servers keep a connection open with them
            return
        name, _, value = line.partition(b":")
        if name == b"data":
            self._data.append(value[1:] if value.startswith(b" ") else value)

    def _event(self, data: bytes, pieces: list[Piece]) -> None:
        if data.strip() == b"[DONE]":
            self._finish(pieces)
            return
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            raise _NotAStream(f"sent an event that is not JSON: {_shown(data)}") from None
        if not isinstance(chunk, dict):
            raise _NotAStream(f"sent an event that is not a chat chunk: {_shown(data)}")
        if "error" in chunk:
            raise _NotAStream(f"said an error in its stream: {_shown(_error_text(chunk))}")
        count = _completion_tokens(chunk)
        if count:
            self._usage = count
        self._prompt = _prompt_tokens(chunk) or self._prompt
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            if count:
                return  # a usage chunk may come without choices
            raise _NotAStream(f"sent an event that is not a chat chunk: {_shown(data)}")
        if not choices:
            return
        choice = choices[0]
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            raise _NotAStream(f"sent a chat chunk with no delta: {_shown(data)}")
        text = delta.get("content")
        if text is not None and not isinstance(text, str):
            raise _NotAStream(f"sent a chat chunk whose content is not text: {_shown(data)}")
        if text:
            self.started = True
            self.characters += len(text)
            self._pieces += 1
            pieces.append(Piece(text, 1))
        if isinstance(choice.get("finish_reason"), str):
            self._finished = True

    def _finish(self, pieces: list[Piece]) -> None:
        self.done = True
        if self._usage is not None and self._usage != self._pieces:
            pieces.append(Piece("", self._usage - self._pieces))
        if self._prompt:
            pieces.append(Piece("", 0, self._prompt))

    def _object(self, body: bytes) -> Piece:
        """The one piece of a server that answered a streamed request with a whole object."""
        try:
            reply = json.loads(body)
        except (ValueError, RecursionError):
            raise _NotAStream(f"answered with no JSON: {_shown(body)}") from None
        if isinstance(reply, dict) and "error" in reply:
            raise _NotAStream(f"answered with an error: {_shown(_error_text(reply))}")
        try:
            text, _finish = _choice(reply)
        except ServerFailed:
            raise _NotAStream(f"answered with no message text: {_shown(reply)}") from None
        self.done = self.started = True
        self.characters = len(text)
        return Piece(text, _completion_tokens(reply), _prompt_tokens(reply))


def _error_text(reply: dict[str, Any]) -> Any:
    """What an `{"error": ...}` object says: its message where it has one."""
    error = reply["error"]
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return error


def _asking(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` with the encodings this module decodes asked for, and no other."""
    return {**headers, "Accept-Encoding": ACCEPTED_ENCODINGS}


def _by_deadline(work: Callable[[], _T], deadline: float) -> _T:
    """What `work()` returns, or raises; raises _TooSlow when it has not ended by `deadline`.

    httpx's timeouts are per read, and a server sending its status line and
    headers a byte now and then passes every one of them: `work` runs in a
    daemon thread that is left behind at the deadline (its reads end with
    their own timeouts), and this thread, waiting, still handles signals.
    """
    outcome: list[_T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as error:  # handed to the waiting thread, raised there
            failure.append(error)

    worker = threading.Thread(target=run, name="plancontracts model list", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if worker.is_alive():
        raise _TooSlow
    if failure:
        raise failure[0]
    return outcome[0]


def _bounded(chunks: Iterator[bytes], deadline: float | None = None) -> bytes:
    """`chunks` joined; raises _TooLong past MAX_RESPONSE_BYTES, _TooSlow past `deadline`.

    `deadline` is a time.monotonic() value: a server sending a byte now and
    then passes every per-read timeout, so the whole answer has one too.
    """
    kept = bytearray()
    for chunk in chunks:
        kept += chunk
        if len(kept) > MAX_RESPONSE_BYTES:
            raise _TooLong
        if deadline is not None and time.monotonic() > deadline:
            raise _TooSlow
    return bytes(kept)


async def _bounded_async(chunks: AsyncIterator[bytes]) -> bytes:
    """`chunks` joined; raises _TooLong past MAX_RESPONSE_BYTES (trio bounds the time)."""
    kept = bytearray()
    async for chunk in chunks:
        kept += chunk
        if len(kept) > MAX_RESPONSE_BYTES:
            raise _TooLong
    return bytes(kept)


def _decoded(raw: bytes, encoding: str) -> bytes:
    """`raw` decoded as the Content-Encoding `encoding` says, the last layer applied first.

    Each layer gives at most MAX_RESPONSE_BYTES: raises _TooLong beyond,
    _Undecodable for an encoding other than gzip and deflate (which are all
    that is asked for) or bytes that are not what the encoding says.
    """
    layers = [name.strip().lower() for name in encoding.split(",")]
    body = raw
    for layer in reversed([name for name in layers if name and name != "identity"]):
        if layer in ("gzip", "x-gzip"):
            body = _inflated(body, [zlib.MAX_WBITS | 16], layer)
        elif layer == "deflate":  # zlib-wrapped as the RFC says, or raw as some servers send
            body = _inflated(body, [zlib.MAX_WBITS, -zlib.MAX_WBITS], layer)
        else:
            raise _Undecodable(f"answered in the {_shown(layer)} encoding, which is not read")
    return body


def _inflated(data: bytes, windows: list[int], layer: str) -> bytes:
    for wbits in windows:
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(data, MAX_RESPONSE_BYTES + 1)
        except zlib.error:
            continue
        if len(out) > MAX_RESPONSE_BYTES or inflater.unconsumed_tail:
            raise _TooLong
        return out
    raise _Undecodable(f"answered with a body that is not {layer} as it says")


def _model_names(body: bytes) -> list[str]:
    """The model ids of a /v1/models answer; none when it is not one."""
    try:
        listed = json.loads(body)
    except (ValueError, RecursionError):
        return []
    data = listed.get("data") if isinstance(listed, dict) else None
    if not isinstance(data, list):
        return []
    ids = (entry.get("id") for entry in data if isinstance(entry, dict))
    return [name for name in ids if isinstance(name, str)]


def _choice(reply: Any) -> tuple[str, str | None]:
    """The first choice's message text and finish reason; ServerFailed when there is none."""
    try:
        choice = reply["choices"][0]
        text = choice["message"]["content"]
    except (KeyError, IndexError, TypeError):
        text = None
    if not isinstance(text, str):
        raise ServerFailed(f"the model server's answer has no message text: {_shown(reply)}")
    finish = choice.get("finish_reason")
    return text, finish if isinstance(finish, str) else None


def _completion_tokens(reply: Any) -> int:
    """The tokens a reply's `usage` says the answer took; 0 when it does not say."""
    return _usage_count(reply, "completion_tokens")


def _prompt_tokens(reply: Any) -> int:
    """The tokens a reply's `usage` says the prompt took; 0 when it does not say."""
    return _usage_count(reply, "prompt_tokens")


def _usage_count(reply: Any, key: str) -> int:
    """A count of a reply's `usage`: 0 when it does not say, or says no count (past 2**53)."""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    count = usage.get(key) if isinstance(usage, dict) else None
    valid = isinstance(count, int) and not isinstance(count, bool) and 0 < count < 2**53
    return count if valid and isinstance(count, int) else 0


def _retry_after(value: str | None) -> float | None:
    """The seconds a `Retry-After` header asks to wait (a number or an HTTP date), if it does."""
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _why(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text[:SHOWN_CHARACTERS]


def _shown(value: Any) -> str:
    """A bounded, one-line, printable view of what a server sent."""
    if isinstance(value, bytes):
        value = value[: SHOWN_CHARACTERS * 4].decode("utf-8", "replace")
    elif not isinstance(value, str):
        value = json.dumps(value)[: SHOWN_CHARACTERS * 4]
    text = one_line(value[: SHOWN_CHARACTERS * 4])
    text = text if len(text) <= SHOWN_CHARACTERS else text[:SHOWN_CHARACTERS] + "..."
    return repr(text)  # repr escapes control characters: a terminal shows them, never obeys
