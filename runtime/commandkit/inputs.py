"""Reading what commands are given: files or standard input, whole, by line, bounded."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import BinaryIO, TextIO

from ..core.errors import StreamError, UsageError, Violation
from .base import reason, say, standard_input

__all__ = [
    "lines_of",
    "opened",
    "read_at_most",
    "standard_lines",
    "stdin_at_most_once",
    "texts",
    "unreadable",
]

_CHUNK = 1024 * 1024


def opened(name: str) -> AbstractContextManager[BinaryIO]:
    """The file to read, or standard input for `-` (left open afterwards).

    Raises OSError when the file cannot be opened, `StreamError` when
    standard input is closed.
    """
    if name == "-":
        return nullcontext(standard_input().buffer)
    return Path(name).open("rb")


def read_at_most(
    stream: BinaryIO, limit: int, *, option: str | None = "--max-bytes"
) -> bytes | Violation:
    """The whole stream, or the violation that says it is larger than `limit` bytes.

    The violation names `option`, the command's option that sets `limit`,
    when the command has one. Read in chunks, so memory grows with what the
    stream holds, not with `limit`.
    """
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = stream.read(min(_CHUNK, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        see = f" (see {option})" if option else ""
        return Violation("", f"larger than {limit} bytes{see}")
    return b"".join(chunks)


def lines_of(stream: BinaryIO, limit: int) -> Iterator[tuple[int, bytes | Violation]]:
    """Numbered lines of an NDJSON stream, each read in at most `limit` + 1 bytes of memory.

    A line longer than `limit` is refused; the rest of it is skipped if it
    ends within `limit` more bytes, and otherwise the stream is read no
    further (it may never end: /dev/zero), which the line's violation says.
    """
    number = 0
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            too_long = f"line longer than {limit} bytes (see --max-bytes)"
            if not _skipped_to_line_end(stream, limit):
                ending = f"and it does not end within {limit} bytes more: the rest is not read"
                yield number, Violation("", f"{too_long}, {ending}")
                return
            yield number, Violation("", too_long)
        elif not line.strip():
            yield number, Violation("", "empty line: expected one JSON document per line")
        else:
            yield number, line


def _skipped_to_line_end(stream: BinaryIO, limit: int) -> bool:
    """Whether the current line ends (or the stream does) within `limit` more bytes, read past."""
    skipped = 0
    while skipped <= limit:
        rest = stream.readline(limit + 1 - skipped)
        if not rest or rest.endswith(b"\n"):
            return True
        skipped += len(rest)
    return False


def unreadable(error: OSError) -> str:
    """Why a file could not be read, as a violation's message."""
    if isinstance(error, IsADirectoryError):
        return "is a directory, not a JSON file"
    if isinstance(error, FileNotFoundError):
        return "no such file"
    return f"cannot read: {reason(error)}"


def stdin_at_most_once(names: list[str]) -> None:
    """Check, before any work, that standard input is named at most once and is open if named."""
    if names.count("-") > 1:
        raise UsageError("standard input (-) can be read only once")
    if "-" in names:
        standard_input()


def texts(arguments: list[str]) -> Iterator[str]:
    """Each argument, or for `-` each line of standard input, stripped; blank ones skipped."""
    for argument in arguments:
        for text in standard_lines() if argument == "-" else [argument]:
            if text.strip():
                yield text.strip()


MAX_TEXT_LINE = 64 * 1024
"Longest line of text (player input, a situation) read from standard input, in characters."


def standard_lines(limit: int = MAX_TEXT_LINE) -> Iterator[str]:
    """The lines of standard input, each read in bounded memory.

    A line longer than `limit` characters is skipped with a warning if it
    ends within `limit` more, and otherwise standard input is read no
    further (it may never end), which the warning says. A failure to read
    ends the command as a `StreamError`.
    """
    stream = standard_input()
    number = 0
    while True:
        line = _read_line(stream, limit + 1)
        if not line:
            return
        number += 1
        if len(line) <= limit or line.endswith("\n"):
            yield line
            continue
        skipped = 0
        while skipped <= limit and line and not line.endswith("\n"):
            line = _read_line(stream, limit + 1 - skipped)
            skipped += len(line)
        too_long = f"warning: line {number} of standard input is longer than {limit} characters"
        if line.endswith("\n") or not line:
            say(f"{too_long}: skipped")
            continue
        say(f"{too_long} and does not end within {limit} more: the rest is not read")
        return


def _read_line(stream: TextIO, size: int) -> str:
    try:
        return stream.readline(size)
    except OSError as error:
        raise StreamError(f"cannot read standard input: {reason(error)}") from error
