"""`--events FILE`: each tool call of a session appended to FILE as one line of JSON, at once.

    with events_file(args.events, inputs=[args.calls]) as log:
        if log is not None:
            session.subscribe(log)
        ...                       # every call made: one line each
        if log is not None:
            log.check()           # after each call: a write that failed ends the command

Each line is a `session-tool-event` document. The file is opened for
appending (created if missing) before any call is made, so a file that
cannot be opened, or is no regular file (a FIFO, a device), is a usage
error at once; what an earlier run wrote stays,
and the runs' lines are told apart by their `session_id`; a file the
command made is removed again if the command fails before its first call.
Each line goes to the system in one write, unbuffered, as soon as its call
is done: a command stopped by a signal, or killed, has lost none of the
lines written before.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from io import FileIO
from typing import TextIO

import msgspec

from ...generated.session_plans import SessionToolEvent
from ..commandkit import label, reason
from ..core.errors import StreamError, UsageError
from ..core.files import kind_of

__all__ = ["EventLog", "events_file"]


class EventLog:
    """Writes each event it is given as one line of an open file; a subscriber of a session.

    A write that fails is kept, not raised (a session reports what its
    subscribers raise, and goes on): `check` raises it, as a StreamError.
    Nothing more is written after one failed.
    """

    def __init__(self, name: str, stream: FileIO) -> None:
        self.name = name
        self.written = 0
        "How many lines were written."
        self.failure: StreamError | None = None
        self._stream = stream
        self._encoder = msgspec.json.Encoder()

    def __call__(self, event: SessionToolEvent) -> None:
        if self.failure is not None:
            return
        line = self._encoder.encode(event) + b"\n"
        try:
            _write_all(self._stream, line)
        except OSError as error:
            self.failure = StreamError(
                f"cannot write to the events file {label(self.name)}: {reason(error)}"
            )
            return
        self.written += 1

    def check(self) -> None:
        """Raise the StreamError of a write that failed, if one did."""
        if self.failure is not None:
            raise self.failure


def _write_all(stream: FileIO, data: bytes) -> None:
    """Write every byte of `data` to the unbuffered `stream`: a line is one write, normally."""
    view = memoryview(data)
    while view:
        written = stream.write(view)
        view = view[written or 0 :]


@contextmanager
def events_file(name: str | None, *, inputs: Iterable[str] = ()) -> Iterator[EventLog | None]:
    """The `EventLog` of `--events NAME`, or None without the option; the file is closed after.

    Raises UsageError when NAME cannot be opened for appending, when it is
    `-`, or when it is one of the command's `inputs` (`-` standing for standard input) or
    the file standard output is redirected to: a file read or written while
    lines are appended to it would be read back, or overwritten.
    """
    if name is None:
        yield None
        return
    if name == "-":  # not standard output: the command's results are printed there
        raise UsageError("--events takes a file: standard output carries the results already")
    _refuse_the_same_file(name, inputs)
    existed = os.path.lexists(name)
    _refuse_no_regular_file(name, lambda: os.stat(name).st_mode)  # not even opened
    try:
        # Unbuffered: each line reaches the system in one write, so none waits in
        # a buffer for a signal or a kill to lose. O_NONBLOCK: a FIFO put in the
        # file's place since the check is opened without waiting, then refused.
        stream = open(name, "a+b", buffering=0, opener=_without_waiting)  # noqa: SIM115 (closed below, once the command is done)
    except OSError as error:
        raise UsageError(f"cannot open the events file {label(name)}: {reason(error)}") from None
    try:
        _refuse_no_regular_file(name, lambda: os.fstat(stream.fileno()).st_mode)
        os.set_blocking(stream.fileno(), True)
    except BaseException:
        stream.close()
        raise
    log = EventLog(name, stream)
    try:
        _end_a_cut_line(log, stream)
        yield log
    except BaseException:
        if not existed and log.written == 0:
            # A command that failed before its first call (its calls file missing,
            # say) leaves no empty file of its making behind.
            _remove_if_empty(name, stream)
        raise
    finally:
        with suppress(OSError):
            stream.close()


def _without_waiting(path: str, flags: int) -> int:
    """`open`'s opener: the file opened with O_NONBLOCK, so a FIFO does not hold the open."""
    return os.open(path, flags | os.O_NONBLOCK, 0o666)


def _refuse_no_regular_file(name: str, mode: Callable[[], int]) -> None:
    """UsageError unless `mode()` (the file's `st_mode`) is a regular file's; none there is fine.

    A FIFO nobody reads takes lines until its buffer is full and then holds
    the command for good; a device (/dev/null) drops them: only a regular
    file keeps the events, as `--state` files are held to.
    """
    try:
        found = mode()
    except FileNotFoundError:
        return
    except OSError:  # left to the open, which says why in its own words
        return
    # A folder is left to the open, which cannot open it and says so.
    if not (stat.S_ISREG(found) or stat.S_ISDIR(found)):
        raise UsageError(f"--events {label(name)}: not a regular file ({kind_of(found)})")


def _remove_if_empty(name: str, stream: FileIO) -> None:
    """Remove the file `name` if it is still the empty file `stream` has open."""
    with suppress(OSError):
        status = os.fstat(stream.fileno())
        if status.st_size == 0 and _identity(name) == (status.st_dev, status.st_ino):
            os.unlink(name)


def _end_a_cut_line(log: EventLog, stream: FileIO) -> None:
    """Start on a line of its own after a last line an earlier run left cut (a full disk, say).

    Without it the first new event would be glued to the cut one, and both
    lost to a reader.
    """
    try:
        status = os.fstat(stream.fileno())
        regular = stat.S_ISREG(status.st_mode) and status.st_size > 0
        if regular and os.pread(stream.fileno(), 1, status.st_size - 1) != b"\n":
            _write_all(stream, b"\n")
    except OSError as error:
        log.failure = StreamError(
            f"cannot write to the events file {label(log.name)}: {reason(error)}"
        )


def _refuse_the_same_file(name: str, inputs: Iterable[str]) -> None:
    """UsageError if `name` is the same file as one of `inputs` or as standard output."""
    events = _identity(name)
    if events is None:  # not there yet, or no regular file (a pipe, a terminal)
        return
    for each in inputs:
        if each == "-":
            if _identity_of_stream(sys.stdin) == events:
                raise UsageError(
                    f"the events file {label(name)} is standard input: name another file"
                )
        elif _identity(each) == events:
            raise UsageError(
                f"the events file {label(name)} is the calls file {label(each)}: name another file"
            )
    if _identity_of_stream(sys.stdout) == events:
        raise UsageError(
            f"the events file {label(name)} is where standard output goes: name another file"
        )


def _identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the regular file `path` leads to, or None for anything else."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


def _identity_of_stream(stream: TextIO | None) -> tuple[int, int] | None:
    """(device, inode) of the regular file behind a standard stream, or None for anything else."""
    if stream is None:  # started with it closed
        return None
    try:
        status = os.fstat(stream.fileno())
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None
