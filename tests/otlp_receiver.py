"""A small OTLP/HTTP receiver on the loopback address: what `--otel` exported, decoded.

    with otlp_receiver() as receiver:
        plancontracts("write", ..., "--otel", env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url})
    (root,) = receiver.named("plancontracts write")

It takes POST /v1/traces and /v1/metrics with protobuf bodies (gzip or
deflate too, as the exporter may compress them), decodes them with
opentelemetry-proto's request messages, keeps the spans and metrics and
answers 200 with an empty response message, as a collector does. Its
`answer` can be set to fail the exporter instead: `error` (500), `hang`
(never answers, until the receiver stops) or `close` (the connection closed
without an answer); what such requests carried is kept all the same.
"""

from __future__ import annotations

import contextlib
import gzip
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from local_servers import serve
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanMessage
from opentelemetry.proto.trace.v1.trace_pb2 import Status

__all__ = ["Answer", "Metric", "Receiver", "Span", "otlp_receiver"]

Answer = Literal["ok", "error", "hang", "close", "trickle"]
"How the receiver answers an export: 200, 500, never, or by closing the connection."

_KINDS = {
    SpanMessage.SPAN_KIND_UNSPECIFIED: "unspecified",
    SpanMessage.SPAN_KIND_INTERNAL: "internal",
    SpanMessage.SPAN_KIND_SERVER: "server",
    SpanMessage.SPAN_KIND_CLIENT: "client",
    SpanMessage.SPAN_KIND_PRODUCER: "producer",
    SpanMessage.SPAN_KIND_CONSUMER: "consumer",
}
_STATUSES = {
    Status.STATUS_CODE_UNSET: "unset",
    Status.STATUS_CODE_OK: "ok",
    Status.STATUS_CODE_ERROR: "error",
}


@dataclass(frozen=True)
class Span:
    """One span as it arrived; ids as lowercase hex, `parent_id` None for a root."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    kind: str
    "internal, client, server, producer, consumer or unspecified."
    attributes: dict[str, Any]
    status: str
    "unset, ok or error."
    description: str
    events: list[tuple[str, dict[str, Any]]]
    resource: dict[str, Any]
    scope: str
    start: int
    "Nanoseconds since the epoch, as the exporter sent them; `end` too."
    end: int


@dataclass(frozen=True)
class Metric:
    """One metric of one export: its name and each data point's attributes and value.

    A counter's point holds its sum; a histogram's, its count of measurements.
    """

    name: str
    points: list[tuple[dict[str, Any], float]]


@dataclass
class Receiver:
    """The receiver's address, how it answers, and what reached it."""

    url: str
    answer: Answer = "ok"
    spans: list[Span] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    "Every request's body as sent, then decompressed: what a secret must never be in."
    headers: list[dict[str, str]] = field(default_factory=list)
    "Every request's headers."
    paths: list[str] = field(default_factory=list)
    "Every request's path, answered or not."

    def named(self, name: str) -> list[Span]:
        """The spans called `name`, in the order they arrived."""
        return [each for each in self.spans if each.name == name]

    def children(self, parent: Span) -> list[Span]:
        """The spans of `parent`'s trace whose parent it is, in the order they arrived."""
        return [
            each
            for each in self.spans
            if each.trace_id == parent.trace_id and each.parent_id == parent.span_id
        ]

    def metric_names(self) -> set[str]:
        """The name of every metric that arrived."""
        return {metric.name for metric in self.metrics}

    def total(self, name: str, **attributes: Any) -> float:
        """The sum of metric `name`'s points whose attributes include `attributes`."""
        return sum(
            value
            for metric in self.metrics
            if metric.name == name
            for point, value in metric.points
            if all(point.get(key) == wanted for key, wanted in attributes.items())
        )


@contextlib.contextmanager
def otlp_receiver(answer: Answer = "ok") -> Iterator[Receiver]:
    """An OTLP/HTTP receiver on 127.0.0.1 answering as `answer` says (changeable on the way).

    Its `url` is what OTEL_EXPORTER_OTLP_ENDPOINT takes. A request it cannot
    decode fails the test that reads it: the decoding error is raised again
    when the block ends.
    """
    lock = threading.Lock()
    stopping = threading.Event()
    state = Receiver("", answer)
    failures: list[BaseException] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = _decompressed(body, self.headers.get("Content-Encoding", ""))
            with lock:
                state.paths.append(self.path)
                state.bodies.append(body)
                state.headers.append(dict(self.headers.items()))
                answering = state.answer
            try:
                reply = self._kept(body)
            except Exception as error:  # kept for the test to see, then a 400 as a collector
                failures.append(error)
                self._send(400, b"")
                return
            if answering == "hang":
                stopping.wait()
                self.close_connection = True
            elif answering == "close":
                self.close_connection = True
            elif answering == "trickle":
                self._trickle(reply)
            elif answering == "error":
                self._send(500, b"")
            else:
                self._send(200, reply)

        def _kept(self, body: bytes) -> bytes:
            """Keep what `body` exports; the empty answer to it, serialized."""
            content = self.headers.get("Content-Type", "")
            if content != "application/x-protobuf":
                raise AssertionError(f"{self.path}: Content-Type {content!r}")
            if self.path == "/v1/traces":
                traces = ExportTraceServiceRequest.FromString(body)
                with lock:
                    state.spans.extend(_spans(traces))
                return bytes(ExportTraceServiceResponse().SerializeToString())
            if self.path == "/v1/metrics":
                metrics = ExportMetricsServiceRequest.FromString(body)
                with lock:
                    state.metrics.extend(_metrics(metrics))
                return bytes(ExportMetricsServiceResponse().SerializeToString())
            raise AssertionError(f"an export to {self.path}")

        def _send(self, status: int, payload: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the exporter gave up waiting: what it sent is what the test reads

        def _trickle(self, payload: bytes) -> None:
            """A 200 of 1,000 bytes, one every 0.3 s: each restarts the exporter's read timeout."""
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "1000")
                self.end_headers()
                for _ in range(1000):
                    if stopping.wait(0.3):
                        return
                    self.wfile.write(b"\0")
                    self.wfile.flush()
            except OSError:
                pass

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
        stopping.set()
        server.shutdown()
        server.server_close()
        thread.join()
    if failures:
        raise failures[0]


def _decompressed(body: bytes, encoding: str) -> bytes:
    """`body` as the exporter serialized it, before its Content-Encoding."""
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


def _spans(request: ExportTraceServiceRequest) -> Iterator[Span]:
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for one in scope_spans.spans:
                yield Span(
                    name=one.name,
                    trace_id=one.trace_id.hex(),
                    span_id=one.span_id.hex(),
                    parent_id=one.parent_span_id.hex() or None,
                    kind=_KINDS[one.kind],
                    attributes=_attributes(one.attributes),
                    status=_STATUSES[one.status.code],
                    description=one.status.message,
                    events=[(event.name, _attributes(event.attributes)) for event in one.events],
                    resource=resource,
                    scope=scope_spans.scope.name,
                    start=one.start_time_unix_nano,
                    end=one.end_time_unix_nano,
                )


def _metrics(request: ExportMetricsServiceRequest) -> Iterator[Metric]:
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for one in scope_metrics.metrics:
                points: list[tuple[dict[str, Any], float]] = []
                kind = one.WhichOneof("data")
                if kind in ("sum", "gauge"):
                    for point in getattr(one, kind).data_points:
                        value = point.as_int if point.HasField("as_int") else point.as_double
                        points.append((_attributes(point.attributes), value))
                elif kind in ("histogram", "exponential_histogram"):
                    points.extend(
                        (_attributes(point.attributes), point.count)
                        for point in getattr(one, kind).data_points
                    )
                yield Metric(one.name, points)


def _attributes(pairs: Any) -> dict[str, Any]:
    """OTLP key-value pairs as a dict of Python values."""
    found: dict[str, Any] = {}
    for pair in pairs:
        assert isinstance(pair, KeyValue)
        found[pair.key] = _value(pair.value)
    return found


def _value(value: AnyValue) -> Any:
    """An OTLP AnyValue as the Python value it holds (a tuple for an array)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return tuple(_value(each) for each in value.array_value.values)
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return getattr(value, kind)
