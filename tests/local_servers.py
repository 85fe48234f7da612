"""Servers on the loopback address that record what reaches them, for tests that expect nothing."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
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
