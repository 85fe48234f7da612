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
    runs. Sets the program's global providers: meant for a command's own
    process, once.
    """
    require_extra("otel", "--otel")
    from opentelemetry import metrics, trace
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    _one_line_export_errors()
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the
    # service is plancontracts unless they name another.
    resource = Resource.create(
        {SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME") or "plancontracts"}
    )
    spans = TracerProvider(resource=resource)
    spans.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    # Exported when the command ends (shutdown), and every minute on the way.
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(), export_interval_millis=60_000)
    meters = MeterProvider(resource=resource, metric_readers=[reader])
    trace.set_tracer_provider(spans)
    metrics.set_meter_provider(meters)
    try:
        with span(f"plancontracts {command}", {"plancontracts.command": command}):
            yield
    finally:
        spans.shutdown()
        meters.shutdown()


class _OneLine(logging.Handler):
    """An exporter's complaint as one `plancontracts:` line on standard error, each once."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._said: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage().splitlines()[0] if record.getMessage() else ""
        except Exception:  # a record whose arguments do not format
            message = str(record.msg)
        line = f"--otel: {message[:300]}"
        # Once per kind of complaint: each retry says it again with its own delay
        # ("retrying in 1.06s"), which would be a line per retry.
        kind = _NUMBER.sub("#", line)
        if kind not in self._said and len(self._said) < 20:
            self._said.add(kind)
            say(line)


_NUMBER = re.compile(r"\d+(?:\.\d+)?")
"A number in an exporter's complaint: a retry's delay, a status code, a port."


def _one_line_export_errors() -> None:
    """OpenTelemetry's own log (a receiver refusing, not answering): one line each, once."""
    logger = logging.getLogger("opentelemetry")
    if not any(isinstance(handler, _OneLine) for handler in logger.handlers):
        logger.addHandler(_OneLine())
    logger.propagate = False
