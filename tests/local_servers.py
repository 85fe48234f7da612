"""Servers on the loopback address that record what reaches them, and a stub model server."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

POLL_SECONDS = 0.01
"How often a server here looks whether it is told to stop: `shutdown` waits for it."


def serve(server: ThreadingHTTPServer) -> None:
    """Serve until `server.shutdown()`, which then returns at once, not after half a second."""
    server.serve_forever(poll_interval=POLL_SECONDS)


@contextlib.contextmanager
def http_server() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server on 127.0.0.1: its `host:port`, and the paths requested of it, as they come.

    Every request is answered with a small JSON Schema, so a client that
    fetched one would get something usable.
    """
    requests: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            body = b'{"type": "object"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/schema+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the test reads `requests`, not a log

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=serve, args=(server,), daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", requests
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextlib.contextmanager
def silent_server() -> Iterator[tuple[str, socket.socket]]:
    """A TCP port on 127.0.0.1 that takes connections and never answers: `host:port` and its socket.

    The kernel completes connections into the listen backlog; nothing ever
    accepts them, so a client waits for an answer until its own timeout.
    After use, `socket.accept()` on the (non-blocking) socket tells whether
    anyone connected.
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}", listener
    finally:
        listener.close()


A_PLAN = json.dumps({"narrative": "You roll the die.", "tools": [{"input": {"formula": "d20"}}]})
"""What a model server writes for `I roll a die` under the plan profile of the bundled skills.

The planner's cues choose the dice roller for it, so the server writes the
tool's input and the narrative; the planner writes the rest of the plan.
"""


@dataclass
class Reply:
    """What the stub model server answers one chat request with."""

    status: int = 200
    content: str | None = '{"answer": "yes"}'
    "The answer's message text; None sends `body` instead."
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    "Seconds before answering, watching for the client to hang up."
    finish: str = "stop"
    "The choice's `finish_reason`: `length` says the answer was cut at the token limit."
    every: float = 0.0
    """Seconds between the body's bytes, sent one at a time when above 0: a trickling server.

    A streamed answer waits as long between its events instead."""
    tokens: int | None = None
    """The answer's `usage.completion_tokens`: sent when not None, and in a stream always (one
    token for each event of text when None)."""
    prompt_tokens: int | None = None
    "The prompt's `usage.prompt_tokens`, in a stream's usage chunk: sent when not None."
    piece: int = 3
    "The characters of `content` in each event of a streamed answer."
    cut: int | None = None
    "The bytes of the answer sent before the connection is closed, the headers saying the whole."


@dataclass
class ModelServer:
    """A stub OpenAI-compatible server on 127.0.0.1 and what reached it."""

    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)
    "Each chat request's JSON body, as it came."
    authorizations: list[str | None] = field(default_factory=list)
    hung_up: int = 0
    "Requests whose client closed the connection before the answer."
    most_at_once: int = 0
    "The most chat requests it was answering at one time."


@contextlib.contextmanager
def model_server(
    answer: Callable[[int, dict[str, Any]], Reply],
    models: list[str] | None = None,
    listing: Reply | None = None,
) -> Iterator[ModelServer]:
    """A stub model server: `answer(n, body)` says how to answer the n-th chat request (from 0).

    GET /v1/models lists `models` (default one, `stub-model`), or answers
    `listing`'s status, body and headers when given. Answers are
    sent as OpenAI's chat completion objects around `Reply.content`; to a
    request with `"stream": true`, as server-sent events of OpenAI's chat
    chunks (`Reply.piece` characters each, then the finish, the usage and
    `[DONE]`) on a connection closed after them.
    """
    lock = threading.Lock()
    at_once = 0
    state = ModelServer("")
    listed = ["stub-model"] if models is None else models

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if listing is not None:
                self._send(listing.status, listing.body, listing.headers, listing.every)
                return
            data = [{"id": name, "object": "model"} for name in listed]
            self._send(200, json.dumps({"object": "list", "data": data}).encode(), {})

        def do_POST(self) -> None:
            nonlocal at_once
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with lock:
                number = len(state.requests)
                state.requests.append(body)
                state.authorizations.append(self.headers.get("Authorization"))
                at_once += 1
                state.most_at_once = max(state.most_at_once, at_once)
            try:
                reply = answer(number, body)
                if self._hung_up_within(reply.delay):
                    with lock:
                        state.hung_up += 1
                    return
                if body.get("stream") is True and reply.content is not None:
                    self._send_events(reply, reply.status, reply.headers)
                    return
                payload = reply.body
                if reply.content is not None:
                    message = {"role": "assistant", "content": reply.content}
                    choice = {"index": 0, "message": message, "finish_reason": reply.finish}
                    completion: dict[str, Any] = {
                        "object": "chat.completion",
                        "choices": [choice],
                    }
                    if reply.tokens is not None:
                        completion["usage"] = {"completion_tokens": reply.tokens}
                    payload = json.dumps(completion).encode()
                self._send(reply.status, payload, reply.headers, reply.every, reply.cut)
            finally:
                with lock:
                    at_once -= 1

        def _hung_up_within(self, seconds: float) -> bool:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                readable, _, _ = select.select([self.connection], [], [], 0.02)
                if readable and not self.connection.recv(1, socket.MSG_PEEK):
                    return True
            return False

        def _send(
            self,
            status: int,
            payload: bytes,
            headers: dict[str, str],
            every: float = 0.0,
            cut: int | None = None,
        ) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if cut is not None:
                    payload = payload[:cut]
                    self.close_connection = True
                if every <= 0:
                    self.wfile.write(payload)
                for index in range(len(payload) if every > 0 else 0):
                    self.wfile.write(payload[index : index + 1])
                    self.wfile.flush()
                    time.sleep(every)
            except OSError:
                pass  # the client went away: what it did is what the test looks at

        def _send_events(self, reply: Reply, status: int, headers: dict[str, str]) -> None:
            """`reply.content` as OpenAI streams it: events of chat chunks, then `[DONE]`."""
            assert reply.content is not None
            text = reply.content
            pieces = [text[at : at + reply.piece] for at in range(0, len(text), reply.piece)]
            chunks: list[dict[str, Any]] = [
                {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
            ]
            chunks += [
                {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                for piece in pieces
            ]
            chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": reply.finish}]})
            used = len(pieces) if reply.tokens is None else reply.tokens
            usage: dict[str, int] = {"completion_tokens": used}
            if reply.prompt_tokens is not None:
                usage["prompt_tokens"] = reply.prompt_tokens
            chunks.append({"choices": [], "usage": usage})
            events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in chunks]
            events.append(b"data: [DONE]\n\n")
            stream = b"".join(events)
            if reply.cut is not None:
                stream = stream[: reply.cut]
            self.close_connection = True
            try:
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                if reply.cut is not None:  # more than is sent: the client sees the cut
                    self.send_header("Content-Length", str(len(b"".join(events))))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                sent = 0
                for event in events:
                    if sent and reply.every > 0:
                        time.sleep(reply.every)
                    part = stream[sent : sent + len(event)]
                    sent += len(event)
                    if not part:
                        break
                    self.wfile.write(part)
                    self.wfile.flush()
            except OSError:
                with lock:
                    state.hung_up += 1  # the client went away mid-stream

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=serve, args=(server,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def conforming(number: int, body: dict[str, Any]) -> Reply:
    """A server that keeps to the constraint: the simplest document of the schema it was sent."""
    return Reply(content=json.dumps(simplest_document(sent_schema(body))))


def sent_schema(body: dict[str, Any]) -> dict[str, Any]:
    """The schema a chat request constrains its answer to, in either response format."""
    form = body["response_format"]
    schema: dict[str, Any] = (
        form["json_schema"]["schema"] if "json_schema" in form else form["schema"]
    )
    return schema


def simplest_document(schema: dict[str, Any]) -> Any:
    """The simplest document `schema` accepts, the same every time (found once per schema)."""
    return copy.deepcopy(_simplest(json.dumps(schema, sort_keys=True)))


@functools.cache
def _simplest(schema: str) -> Any:
    from hypothesis import find, settings
    from schema_strategies import valid_documents
    from tiers import examples_at_most

    return find(
        valid_documents(json.loads(schema)),
        lambda _: True,
        settings=settings(database=None, max_examples=examples_at_most(10)),
    )
