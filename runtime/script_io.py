"""The tool protocol from a skill script's side, for scripts written in Python.

A script reads one `tool-request` object from standard input and answers with
`tool-event` lines on standard output, the last of them `done`. `run_script`
does the reading and the ending; the script's own function only does its job::

    from plancontracts.runtime.script_io import Reply, ScriptFailure, run_script

    def main(request, reply):
        if "target" not in request.input:
            raise ScriptFailure("no_target", "say what to look at")
        reply.patch_state({"looked_at": request.input["target"]})
        return "looked"          # the done event's summary

    run_script(main)

Scripts in other languages speak the same protocol without this module.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any, BinaryIO, Literal, NoReturn

import msgspec

from plancontracts.generated.tool_plans import (
    AssetEvent,
    DoneEvent,
    ErrorEvent,
    LogEvent,
    StatePatchEvent,
    ToolEvent,
    ToolRequest,
    UiEvent,
)

__all__ = ["Reply", "ScriptFailure", "run_script"]

_encoder = msgspec.json.Encoder()
# The executor wrote the request from a validated plan, so msgspec's own checks
# suffice here; the full validation module would cost every script its import.
_request_decoder = msgspec.json.Decoder(ToolRequest)


class ScriptFailure(Exception):
    """Raised by a script's function to end its run with `done` ok false.

    The run writes an `error` event with `code`, `message` and `details`, then
    `done` with ok false and the message as summary, and exits 0: the script
    worked, and what it was asked to do failed.
    """

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details


class Reply:
    """Writes events for one request to a binary stream, one JSON line each."""

    def __init__(self, request_id: str, out: BinaryIO) -> None:
        self._request_id = request_id
        self._out = out
        self.finished = False

    def emit(self, event: ToolEvent) -> None:
        """Write one event. Raises RuntimeError after `done`, which must be the last line."""
        if self.finished:
            raise RuntimeError("the run already ended with a done event")
        self._out.write(_encoder.encode(event) + b"\n")
        self._out.flush()
        self.finished = isinstance(event, DoneEvent)

    def log(self, message: str, level: Literal["debug", "info", "warn", "error"] = "info") -> None:
        self.emit(
            LogEvent(version="0", request_id=self._request_id, level=level, message=_fit(message))
        )

    def patch_state(self, patch: dict[str, Any]) -> None:
        """Merge `patch` into the session state: objects merge, arrays replace, null deletes."""
        self.emit(StatePatchEvent(version="0", request_id=self._request_id, patch=patch))

    def asset(self, asset_id: str, kind: str, media_type: str, path: str) -> None:
        """Register a file the script wrote; `path` is relative to the working folder."""
        self.emit(
            AssetEvent(
                version="0",
                request_id=self._request_id,
                asset_id=asset_id,
                kind=kind,
                media_type=media_type,
                path=path,
            )
        )

    def offer_choices(self, choices: list[str]) -> None:
        """Offer the player options, as a `narrative_choice` interface event."""
        self.emit(
            UiEvent(
                version="0",
                request_id=self._request_id,
                event="narrative_choice",
                payload={"choices": choices},
            )
        )

    def error(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        """Report a problem. It does not end the run."""
        event = ErrorEvent(
            version="0",
            request_id=self._request_id,
            error_code=code[:64],
            error_message=_fit(message),
        )
        if details is not None:
            event.details = details
        self.emit(event)

    def done(self, ok: bool, summary: str | None = None) -> None:
        event = DoneEvent(version="0", request_id=self._request_id, ok=ok)
        if summary is not None:
            event.summary = _fit(summary)
        self.emit(event)


def _fit(text: str) -> str:
    """Texts in events hold at most 4000 characters; longer ones are cut with a mark."""
    return text if len(text) <= 4000 else text[:3997] + "..."


def run_script(
    main: Callable[[ToolRequest, Reply], str | None],
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> NoReturn:
    """Read the request, run `main(request, reply)`, end the run, and exit.

    `main` returns the summary for `done` (or None), or raises ScriptFailure.
    A request that is not a valid `tool-request` ends the run with `done` ok
    false. Any other exception is a crash: its traceback goes to standard
    error, an `error` event names it, and the script exits 1 without `done`,
    which the executor reports as a process error.
    """
    source = sys.stdin.buffer if stdin is None else stdin
    reply = Reply("", sys.stdout.buffer if stdout is None else stdout)
    try:
        request = _request_decoder.decode(source.read())
    except msgspec.DecodeError as error:
        reply.error("bad_request", f"standard input is not a tool request: {error}")
        reply.done(False, "the request could not be read")
        raise SystemExit(0) from None
    reply = Reply(request.request_id, reply._out)
    try:
        summary = main(request, reply)
    except ScriptFailure as failure:
        if not reply.finished:
            reply.error(failure.code, failure.message, failure.details)
            reply.done(False, failure.message)
        raise SystemExit(0) from None
    except Exception as crash:
        traceback.print_exc()
        if not reply.finished:
            reply.error("crashed", f"{type(crash).__name__}: {crash}")
        raise SystemExit(1) from None
    if not reply.finished:
        reply.done(True, summary)
    raise SystemExit(0)
