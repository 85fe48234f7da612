"""The tool protocol from a skill script's side, for scripts written in Python.

A script reads one `tool-request` object from standard input and answers with
`tool-event` lines on standard output, the last of them `done`. `run_script`
does the reading and the ending; the script's own function only does its job::

    from .script_io import Reply, ScriptFailure, run_script

    def main(request, reply):
        target = request.input["target"]      # look.input.json requires it
        if target == "sun":
            raise ScriptFailure("too_bright", "the sun cannot be looked at")
        reply.patch_state({"looked_at": target})
        return f"You look at the {target}."   # the done event's summary

    run_script(main, input_schema=Path(__file__).with_name("look.input.json"))

Scripts in other languages speak the same protocol without this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, BinaryIO, Literal, NoReturn

import msgspec

from ...generated.tool_plans import (
    AssetEvent,
    DoneEvent,
    ErrorEvent,
    LogEvent,
    SkillScript,
    StatePatchEvent,
    ToolEvent,
    ToolRequest,
    UiEvent,
)
from ..core.contracts import field_bound
from ..core.errors import ScriptFailure

__all__ = ["DataFile", "Reply", "ScriptFailure", "fit_text", "run_script"]

_encoder = msgspec.json.Encoder()
# The executor wrote the request from a validated plan, so msgspec's own checks
# (types and bounds; the patterns were checked when the plan was) suffice here:
# the full validation module would cost every script its import.
_request_decoder = msgspec.json.Decoder(ToolRequest)


def fit_text(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else its start cut to `limit` with "..."."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


_MESSAGE_LENGTH = field_bound(LogEvent, "message", "max_length")
_ERROR_CODE_LENGTH = field_bound(ErrorEvent, "error_code", "max_length")
_ERROR_MESSAGE_LENGTH = field_bound(ErrorEvent, "error_message", "max_length")
_SUMMARY_LENGTH = field_bound(DoneEvent, "summary", "max_length")


class _UnusableSchema(Exception):
    """The input schema a script names cannot be used: the script is broken, not its input."""


class Reply:
    """Writes events for one request to a binary stream, one JSON line each."""

    def __init__(self, request_id: str, out: BinaryIO) -> None:
        self._request_id = request_id
        self.out = out
        self.finished = False

    def emit(self, event: ToolEvent) -> None:
        """Write one event. Raises RuntimeError after `done`, which must be the last line."""
        if self.finished:
            raise RuntimeError("the run already ended with a done event")
        self.out.write(_encoder.encode(event) + b"\n")
        self.out.flush()
        self.finished = isinstance(event, DoneEvent)

    def log(self, message: str, level: Literal["debug", "info", "warn", "error"] = "info") -> None:
        self.emit(
            LogEvent(
                version="0",
                request_id=self._request_id,
                level=level,
                message=fit_text(message, _MESSAGE_LENGTH),
            )
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
            error_code=code[:_ERROR_CODE_LENGTH],
            error_message=fit_text(message, _ERROR_MESSAGE_LENGTH),
        )
        if details is not None:
            event.details = details
        self.emit(event)

    def done(self, ok: bool, summary: str | None = None) -> None:
        event = DoneEvent(version="0", request_id=self._request_id, ok=ok)
        if summary is not None:
            event.summary = fit_text(summary, _SUMMARY_LENGTH)
        self.emit(event)


def run_script(
    main: Callable[[ToolRequest, Reply], str | None],
    *,
    input_schema: Path | None = None,
    stdin: BinaryIO | None = None,
    stdout: BinaryIO | None = None,
) -> NoReturn:
    """Read the request, run `main(request, reply)`, end the run, and exit.

    `main` returns the summary for `done` (or None), or raises ScriptFailure.
    A request that is not a valid `tool-request`, or whose input breaks
    `input_schema` (the script's JSON Schema file, the one its manifest
    names), ends the run with `done` ok false and error code `bad_request`
    or `bad_input`, before `main` runs. The schema is loaded as skill
    discovery loads it: its references reach only files of the skill folder
    (the nearest folder above it with a `skill.json`, else its own folder),
    and checking stops after the time a script may take by default. A
    schema that cannot be used is the script's fault: the reason goes to
    standard error and to an `unusable_input_schema` error event, and the
    script exits 1 without `done`. Any other exception is a crash: its
    traceback goes to standard error, an `error` event names it, and the
    script exits 1 without `done`. The executor reports either as a process
    error.
    """
    reply = Reply("", sys.stdout.buffer if stdout is None else stdout)
    try:
        request = _request_decoder.decode((sys.stdin.buffer if stdin is None else stdin).read())
        reply = Reply(request.request_id, reply.out)
        if input_schema is not None:
            _check_input(request.input, input_schema)
        summary = main(request, reply)
    except msgspec.DecodeError as error:
        reply.error("bad_request", f"standard input is not a tool request: {error}")
        reply.done(False, "the request could not be read")
        raise SystemExit(0) from None
    except _UnusableSchema as broken:
        print(broken, file=sys.stderr)
        reply.error("unusable_input_schema", str(broken))
        raise SystemExit(1) from None
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


def _check_input(value: dict[str, Any], schema_file: Path) -> None:
    # The executor checks inputs before a plan runs; this keeps a script safe
    # when something else starts it, by the same rules: the schema is loaded as
    # discovery loads it (references only to files of the skill folder,
    # patterns matched with a time limit). Imported here: a script without an
    # input schema does without jsonschema.
    from .input_schemas import check_input, input_validator
    from .skill_files import reason

    file = Path(os.path.abspath(schema_file))
    # The skill folder is the nearest one above that holds a manifest.
    root = next((folder for folder in file.parents if (folder / "skill.json").is_file()), None)
    root = root or file.parent
    name = os.path.relpath(file, root)
    try:
        validator = input_validator(root.resolve(), name)
    except (OSError, ValueError) as error:
        raise _UnusableSchema(
            f"the input schema {schema_file} cannot be used: {reason(error)}"
        ) from None
    # Started by the executor, a script is stopped at its deadline anyway; started
    # otherwise, its check takes at most what a script may take by default.
    seconds = _default_timeout_ms() / 1000
    problem = check_input(
        validator, name, value, seconds=seconds, until=f"the {seconds:g} s a script may take"
    )
    if problem is not None:
        raise ScriptFailure("bad_input", problem.message)


def _default_timeout_ms() -> int:
    """How long a script may run when its manifest does not say (the skill-manifest's default)."""
    timeout: int = next(
        field.default for field in msgspec.structs.fields(SkillScript) if field.name == "timeout"
    )
    return timeout


class DataFile:
    """One JSON file in the skill's data folder, read and replaced whole under a lock.

        with DataFile(request, "standings.json") as standings:
            table = standings.load(default={}, valid=lambda data: isinstance(data, dict))
            table["guild"] = 10
            standings.save(table)

    The lock (an exclusive `flock` on a hidden file beside it) keeps two runs
    of one parallel plan from undoing each other's change. A missing file
    loads as `default`; a file that is not JSON, or that `valid` rejects,
    fails the run with `corrupt_data` and is left as it is, so nothing is
    overwritten by accident. `save` replaces the file in one step.
    """

    def __init__(self, request: ToolRequest, name: str) -> None:
        self.folder = Path(request.data_dir)
        if not self.folder.is_absolute() or not self.folder.is_dir():
            raise ScriptFailure(
                "no_data_dir", f"the data folder {self.folder} is not an existing folder"
            )
        self.name = name
        self.path = self.folder / name
        self._lock: IO[str] | None = None

    def __enter__(self) -> DataFile:
        try:
            self._lock = open(self.folder / f".{self.name}.lock", "a")
        except OSError as error:
            raise ScriptFailure("data_unwritable", f"cannot lock {self.name}: {error}") from None
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._lock is not None:
            self._lock.close()

    def load(self, default: Any, valid: Callable[[Any], bool]) -> Any:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return default
        except OSError as error:
            raise ScriptFailure("data_unreadable", f"cannot read {self.name}: {error}") from None
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            data = _NOT_JSON
        if data is _NOT_JSON or not valid(data):
            raise ScriptFailure(
                "corrupt_data",
                f"{self.name} in the data folder is not what this skill wrote; "
                "move it away to start afresh",
                {"file": str(self.path)},
            )
        return data

    def save(self, data: Any) -> None:
        handle, temporary = tempfile.mkstemp(dir=self.folder, prefix=f".{self.name}-")
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                json.dump(data, out, ensure_ascii=False, indent=1, sort_keys=True)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, self.path)
        except OSError as error:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise ScriptFailure("data_unwritable", f"cannot write {self.name}: {error}") from None


_NOT_JSON = object()
