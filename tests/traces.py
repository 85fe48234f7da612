"""What a test reads of plancontracts' spans and metrics: OpenTelemetry's SDK, in memory.

    def test_...(traced: Traced) -> None:
        ...                                  # code that plancontracts traces
        (write,) = traced.named("write plan")
        assert traced.children(write)[0].attributes["gen_ai.operation.name"] == "chat"

OpenTelemetry's global providers are set once per process: the first test that
takes `traced` sets them up (in-memory span exporter, in-memory metric
reader), and every test that takes it starts with nothing recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

__all__ = ["Traced", "all_text", "attributes", "recording", "stop_recording"]


def all_text(spans: list[ReadableSpan]) -> str:
    """Every name, attribute, event and status of `spans` as one text, to look for what must
    not be there (a prompt, a tool's output) without content capture."""
    parts: list[str] = []
    for span in spans:
        parts.append(span.name)
        parts.extend(f"{key}={value!r}" for key, value in attributes(span).items())
        for event in span.events:
            parts.append(event.name)
            parts.extend(f"{key}={value!r}" for key, value in dict(event.attributes or {}).items())
        parts.append(span.status.description or "")
    return "\n".join(parts)


def attributes(span: ReadableSpan) -> dict[str, Any]:
    """`span`'s attributes, as plain values a test compares (the SDK types them broadly)."""
    return dict(span.attributes or {})


@dataclass
class Traced:
    """The spans ended and the metrics recorded since the test started."""

    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    "Reads deltas: each reading holds what was recorded since the one before."
    _points: dict[str, list[Any]] = field(default_factory=dict)

    def clear(self) -> None:
        """Forget every span and metric recorded so far."""
        self.exporter.clear()
        self.reader.get_metrics_data()
        self._points.clear()

    @property
    def spans(self) -> list[ReadableSpan]:
        """Every span ended, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        """The spans called `name`, in the order they ended."""
        return [each for each in self.spans if each.name == name]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        """The spans whose parent is `parent`, in the order they started."""
        assert parent.context is not None
        found = [
            each
            for each in self.spans
            if each.parent is not None and each.parent.span_id == parent.context.span_id
        ]
        return sorted(found, key=lambda each: each.start_time or 0)

    def root(self, span: ReadableSpan) -> ReadableSpan:
        """The span at the top of `span`'s trace, among those ended."""
        by_id = {each.context.span_id: each for each in self.spans if each.context is not None}
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
        return span

    def metric_points(self, name: str) -> list[Any]:
        """The data points of metric `name` recorded since the test started, one per reading."""
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    self._points.setdefault(metric.name, []).extend(metric.data.data_points)
        return list(self._points.get(name, []))

    def counted(self, name: str, **attributes: Any) -> float:
        """The sum of counter `name` over its points whose attributes include `attributes`."""
        return float(
            sum(
                point.value
                for point in self.metric_points(name)
                if all(point.attributes.get(key) == value for key, value in attributes.items())
            )
        )


class _WhileATestReads(Sampler):
    """Records spans while a test that takes `traced` runs, and drops them after it.

    The providers stay set for the rest of the process: the tests after it
    would otherwise fill the exporter's memory with spans nobody reads.
    """

    def __init__(self) -> None:
        self.reading = False

    def should_sample(
        self,
        parent_context: Any,
        trace_id: int,
        name: str,
        kind: Any = None,
        attributes: Any = None,
        links: Any = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        # The attributes returned are the span's: the ones it was started with.
        if self.reading:
            return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes, trace_state)
        return SamplingResult(Decision.DROP)

    def get_description(self) -> str:
        return "while a test reads"


_WHILE_A_TEST_READS = _WhileATestReads()
_installed: Traced | None = None


def recording() -> Traced:
    """The process's in-memory OpenTelemetry, emptied: what the `traced` fixture gives.

    The fixture is conftest.py's, which imports this module only when a test
    takes it: every other test runs with no OpenTelemetry in its process.
    """
    global _installed
    if _installed is None:
        exporter = InMemorySpanExporter()
        spans = TracerProvider(sampler=_WHILE_A_TEST_READS)
        spans.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(spans)
        delta = AggregationTemporality.DELTA
        reader = InMemoryMetricReader(preferred_temporality={Counter: delta, Histogram: delta})
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        _installed = Traced(exporter, reader)
    _installed.clear()
    _WHILE_A_TEST_READS.reading = True
    return _installed


def stop_recording() -> None:
    """Record no more spans: the test that read them has ended."""
    _WHILE_A_TEST_READS.reading = False
