"""Where one attempt's events go: the protocol enforced, the plan's event budget kept.

A script's output lines and an in-process tool's emitted events both reach a
`Sink`, which checks each against the `tool-event` contract and the protocol
(nothing after `done`, at most `Limits.max_events` events), keeps it in the
tool's trace within the plan's `EventBudget`, passes `ui_event`s to the
caller's handler, and registers assets: files inside the folders assets may
use, whose identity is checked again before they are reported.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from ...generated import TOOL_EVENT
from ...generated.tool_plans import (
    AssetEvent,
    AssetReference,
    DoneEvent,
    ErrorEvent,
    LogEvent,
    StatePatchEvent,
    ToolError,
    ToolEvent,
    UiEvent,
)
from ..core.errors import ContractError, MalformedJSON, ProtocolViolation
from ..core.jsontext import TOO_DEEP, copy_json, parse
from ..core.validation import convert
from .runs import Asset, ToolRun, UiEventHandler, failure, fit, identity

__all__ = ["EventBudget", "Sink", "merge_patch"]

_encoder = msgspec.json.Encoder()


def merge_patch(state: dict[str, Any], patch: Mapping[str, Any]) -> None:
    """Merge `patch` into `state` in place: objects merge, arrays replace, null deletes.

    Values are JSON values (dicts, lists and scalars); they may nest as deep as
    the parser allows, so nothing here recurses.
    """
    pending: list[tuple[dict[str, Any], Mapping[str, Any]]] = [(state, patch)]
    while pending:
        target, source = pending.pop()
        for key, value in source.items():
            if value is None:
                target.pop(key, None)
            elif isinstance(value, dict):
                current = target.get(key)
                if not isinstance(current, dict):
                    current = target[key] = {}
                pending.append((current, value))
            else:
                target[key] = copy_json(value)


@dataclass(slots=True)
class EventBudget:
    """The bytes of events one plan keeps (see `Limits.max_kept_event_bytes`).

    Events that only inform (`log`, `ui_event`) get half: once one does not
    fit, none is kept any more, so a trace keeps a plan's first notices, not
    a random few. Every other event carries state, an asset or a verdict and
    may use the whole budget, half of which is left for them whatever the
    notices took.
    """

    limit: int
    kept: int = 0
    notices: int = 0
    notices_closed: bool = False

    def keep_notice(self, size: int) -> bool:
        """Whether a `log` or `ui_event` of `size` bytes is kept; counted in if it is."""
        fits = self.notices + size <= self.limit // 2 and self.kept + size <= self.limit
        if self.notices_closed or not fits:
            self.notices_closed = True
            return False
        self.notices += size
        self.kept += size
        return True

    def keep(self, size: int) -> bool:
        """Whether any other event of `size` bytes fits; counted in if it does."""
        if self.kept + size > self.limit:
            return False
        self.kept += size
        return True


class Sink:
    """Receives one attempt's events, enforces the protocol, and keeps what they say.

    `asset_roots` are the folders an asset may lie in, the first two those a
    relative asset path is tried in, in turn. `max_events` bounds this
    attempt's events; `budget` is the plan's, shared by all its attempts.
    """

    def __init__(
        self,
        run: ToolRun,
        asset_roots: Iterable[Path],
        *,
        max_events: int,
        budget: EventBudget,
        on_ui_event: UiEventHandler | None,
    ) -> None:
        self.run = run
        self.asset_roots = tuple(asset_roots)
        self.max_events = max_events
        self.budget = budget
        self.on_ui_event = on_ui_event
        self.count = 0
        self.lines = 0
        self.done: DoneEvent | None = None
        self.last_error: ErrorEvent | None = None
        self.patches: list[dict[str, Any]] = []
        self.assets: list[Asset] = []
        self.violation: ProtocolViolation | None = None
        self.handler_error: Exception | None = None

    def line(self, raw: bytes) -> None:
        """Take a line of a script's output. Raises ProtocolViolation for one that breaks it."""
        self.lines += 1
        if not raw.strip():
            return
        where = f"output line {self.lines}"
        if self.done is not None:
            raise self._violate("output_after_done", f"{where}: output after the done event")
        try:
            event: ToolEvent = convert(TOOL_EVENT, parse(raw))
        except MalformedJSON as error:
            raise self._violate("malformed_line", f"{where}: {error}") from None
        except ContractError as error:
            raise self._violate("invalid_event", f"{where}: {_listed(error)}") from None
        self._keep(event, len(raw))

    def accept(self, event: ToolEvent) -> None:
        """Take an event from an in-process tool; checked as if it were a line of output."""
        if self.done is not None:
            raise self._violate("output_after_done", "an event after the done event")
        try:
            checked: ToolEvent = convert(TOOL_EVENT, msgspec.to_builtins(event))
        except ContractError as error:
            raise self._violate("invalid_event", _listed(error)) from None
        except RecursionError:
            # A value built in Python can nest deeper than any line the parser takes.
            raise self._violate("invalid_event", TOO_DEEP) from None
        self._keep(checked, len(_encoder.encode(checked)))

    def _keep(self, event: ToolEvent, size: int) -> None:
        """Keep `event` (`size` bytes as a JSON line) in the trace, or count it as dropped."""
        budget = self.budget
        if self.count >= self.max_events:
            raise self._violate(
                "too_many_events", f"more than {self.max_events} events in one attempt"
            )
        self.count += 1
        if isinstance(event, LogEvent | UiEvent):
            if budget.keep_notice(size):
                self.run.events.append(event)
            else:
                self.run.dropped += 1
                self.run.dropped_bytes += size
        elif budget.keep(size):
            self.run.events.append(event)
        else:
            raise self._violate(
                "too_many_event_bytes",
                f"a {type(event).__struct_config__.tag} event of {size} bytes does not fit in "
                f"what is left ({budget.limit - budget.kept} bytes) of the plan's "
                f"{budget.limit} bytes for kept events",
            )
        if isinstance(event, StatePatchEvent):
            self.patches.append(event.patch)
        elif isinstance(event, AssetEvent):
            self._register(event)
        elif isinstance(event, UiEvent):
            if self.on_ui_event is not None:
                try:
                    self.on_ui_event(self.run.call.tool_id, event)
                except Exception as error:
                    # The caller's handler failed, not the tool: remembered so that
                    # an in-process tool catching it cannot hide it.
                    self.handler_error = error
                    raise
        elif isinstance(event, ErrorEvent):
            self.last_error = event
        elif isinstance(event, DoneEvent):
            self.done = event

    def _register(self, event: AssetEvent) -> None:
        roots = self.asset_roots
        # Relative to the working folder, else to the data folder (the first two roots).
        candidates = [(root / event.path).resolve() for root in roots[:2]]
        path = next((found for found in candidates if found.exists()), None)
        if path is None:
            raise self._violate(
                "asset_missing", f"asset {event.asset_id!r}: {event.path} is not a file"
            )
        if not any(path.is_relative_to(root) for root in roots):
            raise self._violate(
                "asset_outside_folder",
                f"asset {event.asset_id!r}: {event.path} is outside the folders assets may use",
            )
        found = identity(str(path))
        if found is None:
            raise self._violate(
                "asset_missing", f"asset {event.asset_id!r}: {event.path} is not a file"
            )
        reference = AssetReference(
            asset_id=event.asset_id,
            kind=event.kind,
            media_type=event.media_type,
            path=str(path),
            tool_id=self.run.call.tool_id,
        )
        self.assets.append(Asset(reference, *found))

    def _violate(self, code: str, message: str) -> ProtocolViolation:
        self.violation = ProtocolViolation(code, fit(message))
        return self.violation

    def finish(self, details: dict[str, Any]) -> ToolError | None:
        """The attempt's verdict once it ended without breaking the protocol.

        On success, the tool's output, state patches and assets are kept in its run.
        """
        if self.done is not None and not self.done.ok:
            if self.last_error is not None:
                code, message = self.last_error.error_code, self.last_error.error_message
            else:
                code, message = "failed", self.done.summary or "the tool reported failure"
            return failure("tool_failure", code, message, details)
        for asset in self.assets:
            if asset.swapped():
                return asset.refusal()
        output: dict[str, Any] = {}
        if self.done is not None and self.done.summary:
            output["summary"] = self.done.summary
        if self.patches:
            state: dict[str, Any] = {}
            for patch in self.patches:
                merge_patch(state, patch)
            output["state"] = state
        self.run.output = output
        self.run.patches = self.patches
        self.run.assets = self.assets
        return None


def _listed(error: ContractError) -> str:
    return "; ".join(map(str, error.violations))
