"""What every command shares: exit statuses, errors, standard streams, and one-line messages."""

from __future__ import annotations

import re
import sys
from contextlib import suppress
from typing import Protocol, TextIO

import msgspec

from ..core.errors import StreamError, UsageError, printable

__all__ = [
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_USAGE",
    "Output",
    "StandardOutput",
    "StreamError",
    "UsageError",
    "complain",
    "json_for_people",
    "json_name",
    "label",
    "reason",
    "say",
    "standard_input",
    "to_stderr",
]

EXIT_OK, EXIT_INVALID, EXIT_USAGE = 0, 1, 2


class Output(Protocol):
    """Where a command writes its results: standard output, as `StandardOutput` wraps it."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


class StandardOutput:
    """Standard output, whose failures to write end the command as a `StreamError`."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str, /) -> int:
        try:
            return self.stream.write(text)
        except OSError as error:
            raise StreamError(f"cannot write to standard output: {reason(error)}") from error

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as error:
            raise StreamError(f"cannot write to standard output: {reason(error)}") from error


PRETTY_DEPTH = 16
"Output nesting deeper than this is written on one line: indentation would grow as depth x lines."
_NESTING = re.compile(rb'"(?:[^"\\]++|\\.)*+"|[\[\]{}]')


def json_for_people(encoded: bytes) -> str:
    """JSON text to print: indented by two spaces, or on one line when it nests deeply.

    Indented text grows with the depth of every line: a value nesting 900
    levels deep, repeated, would print gigabytes. Past `PRETTY_DEPTH` levels
    the text is printed as it is, so output stays proportional to the value.
    """
    depth = 0
    for token in _NESTING.finditer(encoded):
        mark = token.group()
        if mark in (b"[", b"{"):
            depth += 1
            if depth > PRETTY_DEPTH:
                return encoded.decode()
        elif mark in (b"]", b"}"):
            depth -= 1
    return msgspec.json.format(encoded, indent=2).decode()


def standard_input() -> TextIO:
    """Standard input, or a `StreamError` when the command was started with it closed (`<&-`)."""
    if sys.stdin is None:
        raise StreamError("standard input is closed")
    return sys.stdin


def reason(error: OSError) -> str:
    """What went wrong, in the system's words, lower-cased to sit inside a sentence."""
    return (error.strerror or str(error)).lower()


def say(line: str) -> None:
    """Write `plancontracts: line` on standard error, if there is one to write to.

    After SIGHUP the terminal may be gone, and a command may start with
    standard error closed: then the exit status alone tells.
    """
    if sys.stderr is not None:
        with suppress(OSError, ValueError):
            sys.stderr.write(f"plancontracts: {line}\n")
            sys.stderr.flush()


def to_stderr(text: str) -> None:
    """Write `text` as it is on standard error (traces, reports), if there is one to write to."""
    if sys.stderr is not None:
        with suppress(OSError, ValueError):
            sys.stderr.write(text)
            sys.stderr.flush()


def complain(message: str) -> None:
    """Write `message` as the command's one error line on standard error."""
    say(f"error: {printable(message)}")


def label(name: str) -> str:
    """How a file named on the command line is shown: `<stdin>` for `-`, always printable."""
    return printable("<stdin>" if name == "-" else name)


def json_name(name: str) -> str:
    """A file name for a JSON report, its bytes that are not UTF-8 escaped as text mode does.

    Python reads such bytes of a name as lone surrogates (U+DC80 to U+DCFF),
    which UTF-8 cannot encode: they are written as the text `\\udcXX`.
    """
    return "".join(f"\\u{ord(ch):04x}" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in name)
