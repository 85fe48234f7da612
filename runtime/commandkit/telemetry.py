"""`--otel`: a command's spans and metrics exported over OTLP/HTTP, as one trace.

Every command takes `--otel` (`add_otel`). With it, the command runs inside
`exporting`: OpenTelemetry's SDK is set up with the OTLP/HTTP exporters,
which read the standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, default
`http://localhost:4318`; `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
`..._HEADERS`, `..._TIMEOUT`, `OTEL_SERVICE_NAME`...), and the whole
command is one root span, `plancontracts COMMAND`, so that what it does
(`core.telemetry`'s spans) arrives as one trace. What was recorded is sent
when the command ends, however it ends; a receiver that fails or does not
answer costs a line or two on standard error for the spans and as many for
the metrics, and at most the exporter's timeout for each (the spans are
sent, then the metrics), never the command's own outcome.

Without `--otel` nothing of OpenTelemetry is imported here.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..core.telemetry import span
from .base import say
from .extras import require_extra

__all__ = ["add_otel", "exporting"]


def add_otel(parser: argparse.ArgumentParser, name: str = "") -> None:
    """Give every command under `parser` the `--otel` option, and its name (`story drive`)."""
    commands = [
        action
        for action in parser._actions  # argparse keeps its subcommands nowhere public
        if isinstance(action, argparse._SubParsersAction)
    ]
    if not commands:
        parser.add_argument(
            "--otel",
            action="store_true",
            help="export this command's spans and metrics over OTLP/HTTP to the endpoint "
            "$OTEL_EXPORTER_OTLP_ENDPOINT names (default http://localhost:4318); "
            "needs the otel extra",
        )
        parser.set_defaults(otel_command=name)
        return
    seen: set[int] = set()  # an alias names the parser of its command again
    for action in commands:
        for word, command in action.choices.items():
            if id(command) not in seen:
                seen.add(id(command))
                add_otel(command, f"{name} {word}".strip())


@contextmanager
def exporting(command: str) -> Iterator[None]:
    """Inside, spans and metrics are recorded and, at the end, exported over OTLP/HTTP.

    The block is the root span `plancontracts COMMAND`. Raises UsageError
    (exit status 2) when the otel extra is not installed, before anything
    runs. Settings the SDK refuses (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE=0`...)
    are one line, and the command runs untraced. At the end, what was
    recorded is sent for at most twice the exporter's timeout (`_sent`).
    Sets the program's global providers: meant for a command's own
    process, once.
    """
    require_extra("otel", "--otel")
    _one_line_export_errors()
    try:
        spans, meters = _providers()
    except Exception as error:  # the SDK's own checks of its variables, as ValueError and others
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        say(f"--otel: OpenTelemetry's settings are unusable, nothing is exported: {reason}")
        yield
        return
    try:
        with span(f"plancontracts {command}", {"plancontracts.command": command}):
            yield
    finally:
        _sent(spans, meters)


def _providers() -> tuple[Any, Any]:
    """The SDK's tracer and meter providers, exporting over OTLP/HTTP, set as the program's.

    Neither exports at exit by itself (`shutdown_on_exit` off): `_sent` does,
    within its time, so that a receiver that does not answer cannot hold the
    process after its command has ended.
    """
    from opentelemetry import metrics, trace
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the
    # service is plancontracts unless they name another.
    resource = Resource.create(
        {SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or "plancontracts"}
    )
    spans = TracerProvider(resource=resource, shutdown_on_exit=False)
    spans.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(session=_session())))
    # Exported when the command ends (`_sent`), and every minute on the way.
    reader = PeriodicExportingMetricReader(
        OTLPMetricExporter(session=_session()), export_interval_millis=60_000
    )
    meters = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
    trace.set_tracer_provider(spans)
    metrics.set_meter_provider(meters)
    return spans, meters


def _sent(spans: Any, meters: Any) -> None:
    """Send what `spans` and `meters` recorded, waiting at most twice the exporter's timeout.

    The sending runs in a thread of its own, waited for here: a receiver
    that trickles its answer (each byte restarting the exporter's read
    timeout) is given up on all the same, and Ctrl-C while waiting stops the
    waiting at once. What is not sent by then is lost, said in one line.
    """
    import threading

    done = threading.Event()

    def send() -> None:
        try:
            spans.force_flush()
            meters.force_flush()
        finally:
            done.set()

    threading.Thread(target=send, name="plancontracts --otel", daemon=True).start()
    waited = 2 * _export_seconds()
    if not done.wait(waited):
        say(f"--otel: the receiver took more than {waited:g} s: what was not sent is lost")
    _OneLine.quiet = True  # the thread left behind says nothing while the process ends


_EXPORT_SECONDS = 10.0
"The exporter's timeout when $OTEL_EXPORTER_OTLP_TIMEOUT does not give one, as the SDK has it."


def _export_seconds() -> float:
    """The exporter's timeout in seconds, as it reads $OTEL_EXPORTER_OTLP_TIMEOUT, 0.1 to 300."""
    try:
        seconds = float(os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT") or _EXPORT_SECONDS)
    except ValueError:
        return _EXPORT_SECONDS
    return min(max(seconds, 0.1), 300.0) if seconds == seconds else _EXPORT_SECONDS


_REPLY_BYTES = 64 * 1024
"The most of a receiver's reply read: an OTLP reply is a few bytes, an error a line."


def _session() -> Any:
    """A `requests` session for an exporter that reads at most `_REPLY_BYTES` of a reply.

    The exporter reads a reply whole; a receiver answering 500 MB would have
    it all in memory. The hook runs before `requests` reads the body and
    reads it itself, cut (an answer cut is an error the exporter reports).
    """
    import requests

    def capped(response: Any, *args: Any, **kwargs: Any) -> Any:
        body = response.raw.read(_REPLY_BYTES + 1, decode_content=True)
        response.close()
        # What `requests` keeps of a body it read: set so that it reads no more.
        response._content = body[:_REPLY_BYTES]
        response._content_consumed = True
        return response

    session = requests.Session()
    session.hooks["response"].append(capped)
    return session


class _OneLine(logging.Handler):
    """An exporter's complaint as one `plancontracts:` line on standard error, each once.

    Its text is the SDK's, which may quote a variable it could not read: the
    values of the `OTEL_EXPORTER_OTLP_*HEADERS` variables (API keys) are
    taken out first.
    """

    quiet = False
    "Set once the command's end has waited for the exporters: nothing more is said."

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._said: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage().splitlines()[0] if record.getMessage() else ""
        except Exception:  # a record whose arguments do not format
            message = str(record.msg)
        if self.quiet:
            return
        line = f"--otel: {_redacted(message)[:300]}"
        # Once per kind of complaint: each retry says it again with its own delay
        # ("retrying in 1.06s"), which would be a line per retry.
        kind = _NUMBER.sub("#", line)
        if kind not in self._said and len(self._said) < 20:
            self._said.add(kind)
            say(line)


def _redacted(text: str) -> str:
    """`text` with each value of the `OTEL_EXPORTER_OTLP_*HEADERS` variables shown as `***`."""
    for name, value in os.environ.items():
        if name.startswith("OTEL_EXPORTER_OTLP") and name.endswith("HEADERS") and value:
            pieces = {value, *value.split(",")}
            pieces |= {
                part for piece in value.split(",") for part in re.split(r"[=:]", piece, maxsplit=1)
            }
            for piece in sorted(pieces, key=len, reverse=True):
                if len(piece.strip()) >= 3:
                    text = text.replace(piece.strip(), "***")
    return text


_NUMBER = re.compile(r"\d+(?:\.\d+)?")
"A number in an exporter's complaint: a retry's delay, a status code, a port."


def _one_line_export_errors() -> None:
    """OpenTelemetry's own log (a receiver refusing, not answering): one line each, once."""
    logger = logging.getLogger("opentelemetry")
    if not any(isinstance(handler, _OneLine) for handler in logger.handlers):
        logger.addHandler(_OneLine())
    logger.propagate = False
