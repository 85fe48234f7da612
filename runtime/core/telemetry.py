"""What plancontracts tells OpenTelemetry: spans and metrics, through its API alone.

    with span("execute_tool inventory/add", {"gen_ai.tool.name": "inventory/add"}) as told:
        ...
        told.set("plancontracts.tool.state", "success")
    count("plancontracts.tool.failures", 1, {"gen_ai.tool.name": "inventory/add"})

The library configures nothing: its spans and metrics go to the tracer and
meter providers the program set up (the commands' `--otel` sets them up:
`commandkit/telemetry.py`). It never imports OpenTelemetry itself. A
program that set up a provider has imported `opentelemetry` (the API, or
the SDK through it), so until a program has imported it and set up a
provider, every call here is a no-op costing two dictionary lookups, and a
program without the `otel` extra runs as if this module were not there.
Whatever order the program imports in: the check is made at each call,
not when this module is imported.

Spans follow the OpenTelemetry semantic conventions for generative AI
(`gen_ai.*`: one `chat` span per answer a model writes, one `execute_tool`
span per tool call) and add `plancontracts.*` attributes for what they do
not name. No attribute carries text a person or a model wrote unless
content capture is on (`capturing_content`), and none ever carries a key:
an exception's message is content too, so a failed span says its type.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final, Literal

__all__ = [
    "CONTENT_VARIABLE",
    "INSTRUMENTS",
    "AttributeValue",
    "Told",
    "capturing_content",
    "content_json",
    "count",
    "measure",
    "span",
    "tracing",
]

AttributeValue = str | bool | int | float | Sequence[str] | Sequence[int] | Sequence[float]
"What an attribute may hold, as OpenTelemetry's API takes it."

SCOPE: Final = "plancontracts"
"The instrumentation scope every span and metric is reported under."

CONTENT_VARIABLE: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable that turns content capture on (`true`), as OpenTelemetry's
GenAI instrumentations read it: prompts, answers, tool arguments and results,
violations' messages, errors' messages."""

_SECONDS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
"The GenAI conventions' buckets for seconds; plancontracts' own durations use them too."
_TOKENS = tuple(4**power for power in range(14))
"The GenAI conventions' buckets for tokens: 1, 4, 16 ... 67,108,864."

INSTRUMENTS: Final[
    Mapping[str, tuple[Literal["counter", "histogram"], str, str, tuple[float, ...] | None]]
] = {
    "gen_ai.client.operation.duration": (
        "histogram",
        "s",
        "Seconds a model took to write one answer (the GenAI conventions' metric)",
        _SECONDS,
    ),
    "gen_ai.client.token.usage": (
        "histogram",
        "{token}",
        "Tokens of one answer's prompt (gen_ai.token.type input) and of the answer "
        "(output) (the GenAI conventions' metric)",
        _TOKENS,
    ),
    "plancontracts.write.attempts": (
        "counter",
        "{attempt}",
        "Answers a model wrote for a contract, accepted or refused (plancontracts.outcome)",
        None,
    ),
    "plancontracts.write.refusals": (
        "counter",
        "{attempt}",
        "Answers refused by the contract, its rules or the caller's check, then asked again "
        "while the budget lasts",
        None,
    ),
    "plancontracts.tool.duration": (
        "histogram",
        "s",
        "Seconds one tool call took, every retry included (plancontracts.tool.state)",
        _SECONDS,
    ),
    "plancontracts.tool.failures": (
        "counter",
        "{call}",
        "Tool calls that ended failed, timed out or refused (plancontracts.tool.state)",
        None,
    ),
    "plancontracts.plan.duration": (
        "histogram",
        "s",
        "Seconds one plan's execution took, from its checks to its result",
        _SECONDS,
    ),
}
"""Every metric plancontracts records: its kind, unit, description and a histogram's
bucket boundaries, the one place they are written. `count` and `measure` take only
these names."""


def tracing() -> bool:
    """Whether the program set up a tracer provider, so that spans may be recorded.

    False means every span of this module does nothing: the program has not
    imported OpenTelemetry's API, or has and set up no provider (nor named
    one by `OTEL_PYTHON_TRACER_PROVIDER`), when the API's own spans would be
    no-ops. Read from the API's global the way its `get_tracer_provider`
    reads it; an API without that global is taken to trace.
    """
    # None: a module a program (a test) marked as not installed.
    api = sys.modules.get("opentelemetry.trace")
    if api is None:
        return False
    return getattr(api, "_TRACER_PROVIDER", True) is not None or (
        "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
    )


def capturing_content() -> bool:
    """Whether spans may carry content: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`.

    On for `true` (any case) or `1`, and for the conventions' newer values
    naming spans (`SPAN_ONLY`, `SPAN_AND_EVENT`); off otherwise, and by
    default. Read at each call, so a test or a program may turn it on late.
    """
    value = os.environ.get(CONTENT_VARIABLE, "").strip().lower()
    return value in ("true", "1", "span_only", "span_and_event")


CONTENT_LIMIT: Final = 16_384
"""Characters of one text attribute kept on a span; the rest is cut, `...` said. A captured
prompt of a megabyte would otherwise make its batch too large to export, and the
exporter drops a batch whole."""


def _fit(value: AttributeValue) -> AttributeValue:
    """`value`, a text cut to `CONTENT_LIMIT` characters (each text of a list too).

    A text that is not valid Unicode (a lone surrogate, from a JSON escape or a
    file name) has it replaced by `?`: OTLP carries UTF-8, and one such text
    would make its whole batch fail to encode.
    """
    if isinstance(value, str):
        return _text(value if len(value) <= CONTENT_LIMIT else value[:CONTENT_LIMIT] + "...")
    if isinstance(value, list | tuple) and value and isinstance(value[0], str):
        return [str(_fit(each)) for each in value[:100]]
    return value


def content_json(value: object) -> str:
    """`value` as JSON text, for a content attribute (`gen_ai.tool.call.arguments`...).

    Never raises: text that is no valid Unicode is escaped (`\\ud800`), a value
    JSON cannot hold is written as Python shows it.
    """
    import msgspec

    try:
        return msgspec.json.encode(value).decode()
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):  # a lone surrogate...
        import json

        return json.dumps(value, default=repr)


def _text(text: str) -> str:
    """`text` as UTF-8 can carry it: each lone surrogate replaced by `?`."""
    if text.isascii():
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


class Told:
    """The span a `span` block records into: what it is told ends up on the span.

    Inside a block that records nothing (no OpenTelemetry), every method
    does nothing: callers never check.
    """

    __slots__ = ("_span",)

    def __init__(self, recorded: Any = None) -> None:
        self._span = recorded

    @property
    def recording(self) -> bool:
        """Whether what this span is told is kept: worth building a costly attribute for."""
        return self._span is not None and bool(self._span.is_recording())

    def set(self, key: str, value: AttributeValue | None) -> None:
        """Set attribute `key` to `value`; None leaves it unset."""
        if self._span is not None and value is not None:
            self._span.set_attribute(key, _fit(value))

    def update(self, attributes: Mapping[str, AttributeValue | None]) -> None:
        """Set each attribute of `attributes` whose value is not None."""
        if self._span is not None:
            self._span.set_attributes(
                {key: _fit(value) for key, value in attributes.items() if value is not None}
            )

    def event(self, name: str, attributes: Mapping[str, AttributeValue] | None = None) -> None:
        """Add the event `name`, now, with `attributes`."""
        if self._span is not None:
            self._span.add_event(
                _text(name), {key: _fit(value) for key, value in (attributes or {}).items()}
            )

    def fail(self, error_type: str, description: str | None = None) -> None:
        """Mark the span failed: `error.type` set to `error_type`, its status an error.

        `description` is the status's text, kept only where content is
        captured (a failure's message may quote what a person or model wrote).
        """
        if self._span is None:
            return
        from opentelemetry.trace import Status, StatusCode

        self._span.set_attribute("error.type", error_type)
        shown = description if description is not None and capturing_content() else error_type
        shown = str(_fit(shown))
        self._span.set_status(Status(StatusCode.ERROR, shown))


_NOTHING = Told()


def span(
    name: str,
    attributes: Mapping[str, AttributeValue | None] | None = None,
    *,
    kind: Literal["internal", "client"] = "internal",
) -> AbstractContextManager[Told]:
    """A span named `name`, current inside the block, a child of the current one.

        with span("execute plan", {"plancontracts.plan.tools": 3}) as told:
            ...

    `attributes` whose value is None are left unset. A block that raises
    marks the span failed with the exception's type as `error.type` (never
    its message, see `Told.fail`), and the exception goes on; trio's
    cancellation and Ctrl-C included. Without OpenTelemetry in the program,
    the block runs with a `Told` that records nothing.
    """
    if not tracing():
        return _NOT_RECORDED
    return _Recorded(name, attributes, kind)


class _NotRecorded:
    """The block of a span in a program without OpenTelemetry: nothing is done."""

    __slots__ = ()

    def __enter__(self) -> Told:
        return _NOTHING

    def __exit__(self, *exception: object) -> None:
        return None


_NOT_RECORDED = _NotRecorded()


class _Recorded:
    """The block of a span recorded through the API: started on entry, ended on exit.

    A class, not a generator: a plan's every tool is one, and this is the
    cheapest way the API allows (the span made current by attaching its
    context, as `trace.use_span` does, without its wrapping).
    """

    __slots__ = ("_attributes", "_kind", "_name", "_span", "_token")

    def __init__(
        self,
        name: str,
        attributes: Mapping[str, AttributeValue | None] | None,
        kind: Literal["internal", "client"],
    ) -> None:
        self._name = name
        self._attributes = attributes
        self._kind = kind

    def __enter__(self) -> Told:
        from opentelemetry import context, trace

        global _tracer
        if _tracer is None:
            # The global provider is set once per program; a tracer got before that
            # (a proxy) follows it when it is.
            _tracer = trace.get_tracer(SCOPE)
        given = self._attributes
        self._span = recorded = _tracer.start_span(
            _text(self._name[:_NAME_LIMIT]),
            kind=trace.SpanKind.CLIENT if self._kind == "client" else trace.SpanKind.INTERNAL,
            attributes=None
            if given is None
            else {key: _fit(value) for key, value in given.items() if value is not None},
        )
        self._token = context.attach(trace.set_span_in_context(recorded))
        return Told(recorded)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: object
    ) -> None:
        from opentelemetry import context

        context.detach(self._token)
        if error is not None:
            Told(self._span).fail(_error_type(error))
        self._span.end()


_NAME_LIMIT: Final = 1024
"Characters of a span's name kept: a name holds a tool's or a model's name, someone else's to say."
_tracer: Any = None
"The tracer every span is started with, once the program has imported OpenTelemetry."


def _error_type(error: BaseException) -> str:
    """The `error.type` of an exception: its class's qualified name, as the conventions ask.

    A group of exceptions of one type (trio's nursery wraps a cancellation in
    one) is named by that type.
    """
    while isinstance(error, BaseExceptionGroup):
        kinds = {type(each) for each in error.exceptions}
        if len(kinds) != 1:
            break
        error = error.exceptions[0]
    kind = type(error)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


_instruments: dict[tuple[int, str], Any] = {}
"Each instrument made, by the meter provider it was made from and its name."


def count(
    name: str, value: int = 1, attributes: Mapping[str, AttributeValue] | None = None
) -> None:
    """Add `value` to the counter `name` (a key of `INSTRUMENTS`), with `attributes`."""
    instrument = _instrument(name)
    if instrument is not None:
        instrument.add(value, {key: _fit(each) for key, each in (attributes or {}).items()})


def measure(
    name: str, value: float, attributes: Mapping[str, AttributeValue] | None = None
) -> None:
    """Record `value` in the histogram `name` (a key of `INSTRUMENTS`), with `attributes`."""
    instrument = _instrument(name)
    if instrument is not None:
        instrument.record(value, {key: _fit(each) for key, each in (attributes or {}).items()})


def _instrument(name: str) -> Any:
    """The instrument `name` of the program's meter provider; None without OpenTelemetry.

    Made once per provider: a program (a test) may set up another one.
    Raises KeyError for a name `INSTRUMENTS` does not hold.
    """
    kind, unit, description, boundaries = INSTRUMENTS[name]
    api = sys.modules.get("opentelemetry.metrics._internal")
    if api is None:
        return None
    if getattr(api, "_METER_PROVIDER", True) is None and (
        "OTEL_PYTHON_METER_PROVIDER" not in os.environ
    ):
        return None  # no provider set up: the API's instruments would be no-ops
    from opentelemetry import metrics

    provider = metrics.get_meter_provider()
    key = (id(provider), name)
    made = _instruments.get(key)
    if made is None:
        meter = provider.get_meter(SCOPE)
        if kind == "counter":
            made = meter.create_counter(name, unit=unit, description=description)
        else:
            made = meter.create_histogram(
                name,
                unit=unit,
                description=description,
                explicit_bucket_boundaries_advisory=boundaries,
            )
        _instruments[key] = made
    return made
