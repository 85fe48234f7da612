"""What tracing costs a workload: the same work timed with OpenTelemetry off, idle and on.

    comparison = await compare(workload, rounds=9)
    print("\n".join(comparison.report("a plan of 1,000 tools", per=(1000, "tool"))))

Shared by the executor and planning benchmarks, which each end with a
comparison of their own workload. All three modes run in one process, in
interleaved rounds (the order rotated each round, so no mode always runs
first or last on a busy machine):

- off: no OpenTelemetry in the program, as without the `otel` extra. The
  library looks for `opentelemetry.trace` and `opentelemetry.metrics` in
  `sys.modules` at each call (`runtime/core/telemetry.py`), so hiding those
  two entries for the round gives it exactly a program's path without them;
  a module that imported them again while hidden would make the figure
  wrong, so that fails the comparison.
- no-op: the API imported and no provider set up, as in a program where
  another library imported OpenTelemetry: every span is the API's no-op.
- on: the SDK set up as `--otel` sets it up (a batch span processor, a metric
  reader), exporting to memory: a `TracerProvider` with a
  `BatchSpanProcessor` into an `InMemorySpanExporter`, a `MeterProvider`
  with an `InMemoryMetricReader`. After each run, outside its time, the
  spans are flushed and counted, then dropped as an exporter drops what it
  sent, so no run pays for the one before.

The API's global providers can be set only once, so the rounds switch them
through the API's own module globals (`_TRACER_PROVIDER`, `_METER_PROVIDER`),
to nothing (no-op) or to the SDK's (on), and leave them as they found them.
The library keeps the first tracer it gets (`telemetry._tracer`), so each
round starts without one, as a program that has just set up its provider
does. What is measured counts what was exported, whichever spans the
library makes.
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from plancontracts.runtime.core import telemetry

MODES: Final = ("off", "no-op", "on")
HIDDEN: Final = ("opentelemetry.trace", "opentelemetry.metrics", "opentelemetry.metrics._internal")
"The modules whose presence in `sys.modules` tells the library OpenTelemetry is there."
TRACER_KEPT: Final = "_tracer"
"Where the library keeps the tracer it got first: each mode starts without it."


@dataclass
class Comparison:
    """The seconds of each round in each mode, and what tracing exported."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: {mode: [] for mode in MODES})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {mode: [] for mode in MODES})
    "The CPU seconds of this process (all its threads, not its children) in each round."
    spans_per_run: list[int] = field(default_factory=list)
    "The spans each run with tracing on exported."
    span_names: Counter[str] = field(default_factory=Counter)
    "The names of the spans the last run with tracing on exported, with their numbers."
    metrics: set[str] = field(default_factory=set)
    "The names of the metrics recorded with tracing on."
    resident_before: float = 0.0
    "Resident memory in MiB before OpenTelemetry was imported."
    resident_imported: float = 0.0
    "Resident memory in MiB once OpenTelemetry's SDK was imported and set up."
    resident_after: float = 0.0
    "Resident memory in MiB after the last round."
    peak: float = 0.0
    "The process's peak resident memory in MiB, after the last round."

    def median(self, mode: str) -> float:
        """The median seconds of a run in `mode`."""
        return statistics.median(self.seconds[mode])

    def ratios(self, mode: str) -> list[float]:
        """Each round's seconds in `mode` against off in the same round."""
        return [ran / off for ran, off in zip(self.seconds[mode], self.seconds["off"], strict=True)]

    def ratio(self, mode: str) -> float:
        """The median over the rounds of a run's seconds in `mode` against off in the same round."""
        return statistics.median(self.ratios(mode))

    def best_ratio(self, mode: str) -> float:
        """The fastest run in `mode` against the fastest off: what is left when the machine's
        load, which only ever adds time, is least."""
        return min(self.seconds[mode]) / min(self.seconds["off"])

    def report(self, run: str, *, per: tuple[int, str] | None = None) -> list[str]:
        """Lines saying the comparison: `run` names what one run does; `per`, a count and
        its unit (1000, "tool"), adds what tracing costs each of them."""
        rounds = len(self.seconds["off"])
        lines = [f"tracing, {run}, {rounds} rounds of each mode interleaved (medians):"]
        off = self.median("off")
        cpu_off = statistics.median(self.cpu["off"])
        for mode in MODES:
            cpu = statistics.median(self.cpu[mode])
            line = f"    {mode}: {_seconds(self.median(mode))} (CPU here {_seconds(cpu)})"
            if mode != "off":
                ratios = self.ratios(mode)
                line += (
                    f", {self.ratio(mode):.3f}x off ({self.ratio(mode) - 1:+.1%}; rounds "
                    f"{min(ratios):.2f}x to {max(ratios):.2f}x; the fastest runs "
                    f"{self.best_ratio(mode):.3f}x)"
                )
                if per is not None:
                    count, unit = per
                    added = (self.median(mode) - off) / count * 1e6
                    line += f", {added:+.1f} us a {unit}"
                else:  # where other processes' noise hides it, the work added here
                    added = cpu - cpu_off
                    line += f", CPU here {added * 1000:+.1f} ms ({added / off:+.1%} of off)"
            lines.append(line)
        spans = sorted(set(self.spans_per_run))
        numbers = " to ".join(str(number) for number in (spans[0], spans[-1])[: len(spans)])
        shown = ", ".join(f"{number} {name}" for name, number in self.span_names.most_common(6))
        more = len(self.span_names) - 6
        lines.append(
            f"    spans exported a run with tracing on: {numbers} ({shown}"
            + (f", and {more} more names" if more > 0 else "")
            + f"); metrics: {', '.join(sorted(self.metrics)) or 'none'}"
        )
        lines.append(
            f"    resident memory {self.resident_before:.0f} MiB before OpenTelemetry was "
            f"imported, {self.resident_imported:.0f} MiB once its SDK was set up, "
            f"{self.resident_after:.0f} MiB after the rounds; peak {self.peak:.0f} MiB"
        )
        return lines


def _seconds(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def resident_mib() -> float:
    """This process's resident memory now, in MiB (Linux's /proc)."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def peak_mib() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Switch:
    """OpenTelemetry's SDK set up in memory, and each mode made current in turn.

    Imports OpenTelemetry's API and SDK (the `otel` extra); raises ImportError
    without them.
    """

    def __init__(self) -> None:
        from opentelemetry import trace as trace_api
        from opentelemetry.metrics import _internal as metrics_api
        from opentelemetry.sdk.metrics import Counter, Histogram, MeterProvider
        from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self._trace_api: Any = trace_api
        self._metrics_api: Any = metrics_api
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(BatchSpanProcessor(self.exporter))
        # Deltas: each reading holds only what was recorded since the one before.
        delta = AggregationTemporality.DELTA
        self.reader = InMemoryMetricReader(preferred_temporality={Counter: delta, Histogram: delta})
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    @contextmanager
    def mode(self, mode: str) -> Iterator[None]:
        """Run the block with OpenTelemetry `mode` ("off", "no-op" or "on"); then as before.

        Raises RuntimeError when something imported OpenTelemetry again while
        it was hidden (off): that round ran with it after all.
        """
        saved = self._trace_api._TRACER_PROVIDER, self._metrics_api._METER_PROVIDER
        kept = vars(telemetry).get(TRACER_KEPT)
        hidden = {name: sys.modules.pop(name) for name in HIDDEN if mode == "off"}
        on = mode == "on"
        self._trace_api._TRACER_PROVIDER = self.tracer_provider if on else None
        self._metrics_api._METER_PROVIDER = self.meter_provider if on else None
        if TRACER_KEPT in vars(telemetry):
            setattr(telemetry, TRACER_KEPT, None)
        try:
            yield
            if hidden and any(name in sys.modules for name in HIDDEN):
                raise RuntimeError("OpenTelemetry was imported while it was off: not measured off")
        finally:
            sys.modules.update(hidden)
            self._trace_api._TRACER_PROVIDER, self._metrics_api._METER_PROVIDER = saved
            if TRACER_KEPT in vars(telemetry):
                setattr(telemetry, TRACER_KEPT, kept)

    def exported(self) -> tuple[Counter[str], set[str]]:
        """The names of the spans exported since the last call, and of the metrics recorded;
        forgets them."""
        self.tracer_provider.force_flush()
        names = Counter(span.name for span in self.exporter.get_finished_spans())
        self.exporter.clear()
        data = self.reader.get_metrics_data()
        metrics = {
            metric.name
            for resource_metrics in (data.resource_metrics if data is not None else ())
            for scope in resource_metrics.scope_metrics
            for metric in scope.metrics
        }
        return names, metrics

    def shutdown(self) -> None:
        """Stop the batch processor's thread and the metric reader."""
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


async def compare(
    workload: Callable[[str], Awaitable[object]], *, rounds: int, warm_up: bool = True
) -> Comparison:
    """Time `workload(mode)` in each mode, `rounds` times, interleaved.

    `warm_up` runs it once in each mode first, untimed. Raises ImportError
    without OpenTelemetry's SDK, and RuntimeError when the off mode was not
    (see `Switch.mode`).
    """
    comparison = Comparison(resident_before=resident_mib())
    switch = Switch()
    comparison.resident_imported = resident_mib()
    try:
        # The SDK's first span and instrument, made before any round.
        with switch.mode("on"), telemetry.span("warm up"):
            telemetry.count("plancontracts.tool.failures", 0)
        switch.exported()
        for mode in MODES if warm_up else ():
            with switch.mode(mode):
                await workload(mode)
        switch.exported()
        for round_ in range(rounds):
            turn = round_ % len(MODES)
            for mode in MODES[turn:] + MODES[:turn]:
                with switch.mode(mode):
                    started, cpu = time.perf_counter(), time.process_time()
                    await workload(mode)
                    comparison.seconds[mode].append(time.perf_counter() - started)
                    comparison.cpu[mode].append(time.process_time() - cpu)
                names, metrics = switch.exported()
                if mode == "on":
                    comparison.spans_per_run.append(sum(names.values()))
                    comparison.span_names = names
                    comparison.metrics |= metrics
                elif names or metrics:
                    raise RuntimeError(f"tracing {mode} exported {dict(names)}, {metrics}")
    finally:
        switch.shutdown()
    comparison.resident_after = resident_mib()
    comparison.peak = peak_mib()
    return comparison
