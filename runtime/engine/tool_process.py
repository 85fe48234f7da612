"""One run of a skill script as a process: start it, stream its output, stop it cleanly.

The script runs with no shell, in a new session (so that it and everything it
starts share one process group), with the environment it is given. Its
standard output is split into lines as it arrives and each line is handed to
a callback; standard error is kept, up to a limit, for the error report.

Whatever ends the run (the script exiting, a protocol violation, a deadline,
an outside cancellation), nothing of the process group is left: the group
gets SIGTERM, then SIGKILL once the grace period has passed. A process that
leaves the group on purpose (with setsid) escapes this; that is a limit of
process groups, documented in docs/tool-plans.md.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import trio

from ..core.errors import ProtocolViolation

__all__ = ["ProcessEnd", "StreamLimits", "run_process"]

_POLL_SECONDS = 0.02


@dataclass(frozen=True)
class StreamLimits:
    max_line_bytes: int
    max_stderr_bytes: int
    shutdown_grace: float


@dataclass
class ProcessEnd:
    """How a run ended. `stderr` is filled as the run goes, so it survives a cancellation."""

    exit_code: int | None = None
    "The exit status; negative for a signal; None if the run was stopped before it exited."
    violation: ProtocolViolation | None = None
    stderr: bytearray = field(default_factory=bytearray)
    stderr_dropped: int = 0
    "How many bytes of standard error were dropped from the front to respect the limit."

    def stderr_text(self) -> str:
        """Standard error as kept, decoded; first a line saying how much was dropped, if any."""
        kept, dropped = bytes(self.stderr), self.stderr_dropped
        if dropped:
            # The cut may have split a UTF-8 character: its leftover bytes
            # (at most 3 continuation bytes) go with the dropped ones.
            split = 0
            while split < min(3, len(kept)) and 0x80 <= kept[split] < 0xC0:
                split += 1
            kept, dropped = kept[split:], dropped + split
        text = kept.decode("utf-8", "replace")
        return f"[{dropped} earlier bytes dropped]\n{text}" if dropped else text


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdin: bytes,
    on_line: Callable[[bytes], None],
    limits: StreamLimits,
    end: ProcessEnd,
) -> None:
    """Run `argv` to its end, calling `on_line` for each line of standard output.

    Fills `end` as it goes. Raises OSError when the process cannot start. A
    ProtocolViolation from `on_line`, or a line longer than the limit, stops
    the process group and is recorded in `end.violation`. Cancellation stops
    the process group before it propagates.
    """
    process = await trio.lowlevel.open_process(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
    )
    assert process.stdin
    assert process.stdout
    assert process.stderr
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_feed, process.stdin, stdin)
            nursery.start_soon(_keep_stderr, process.stderr, limits.max_stderr_bytes, end)
            nursery.start_soon(_read_lines, process, on_line, limits, end)
            end.exit_code = await process.wait()
            # The script is gone; whatever it started must not outlive it, and
            # its pipes close only when the last holder is gone.
            await _stop_group(process, limits.shutdown_grace)
    finally:
        with trio.CancelScope(shield=True):
            await _stop_group(process, limits.shutdown_grace)


async def _feed(stream: trio.abc.SendStream, data: bytes) -> None:
    # A script that exits without reading its input is not an error here.
    try:
        async with stream:
            await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def _keep_stderr(stream: trio.abc.ReceiveStream, limit: int, end: ProcessEnd) -> None:
    while chunk := await stream.receive_some(65536):
        end.stderr += chunk
        if len(end.stderr) > limit:
            # The end of standard error usually says why a script died.
            extra = len(end.stderr) - limit
            del end.stderr[:extra]
            end.stderr_dropped += extra


async def _read_lines(
    process: trio.Process,
    on_line: Callable[[bytes], None],
    limits: StreamLimits,
    end: ProcessEnd,
) -> None:
    assert process.stdout
    pending = bytearray()
    try:
        while chunk := await process.stdout.receive_some(65536):
            pending += chunk
            start = 0
            while (newline := pending.find(b"\n", start)) >= 0:
                on_line(bytes(pending[start:newline]))
                start = newline + 1
            del pending[:start]
            if len(pending) > limits.max_line_bytes:
                raise ProtocolViolation(
                    "line_too_long",
                    f"an output line is longer than {limits.max_line_bytes} bytes",
                )
        if pending:
            on_line(bytes(pending))
    except ProtocolViolation as violation:
        end.violation = violation
        await _stop_group(process, limits.shutdown_grace)


async def _stop_group(process: trio.Process, grace: float) -> None:
    """SIGTERM the process group, wait up to `grace` seconds, then SIGKILL what is left."""
    group = process.pid
    if not _group_alive(group):
        await process.wait()
        return
    _signal_group(group, signal.SIGTERM)
    with trio.move_on_after(grace):
        while _group_alive(group):
            await trio.sleep(_POLL_SECONDS)
    if _group_alive(group):
        _signal_group(group, signal.SIGKILL)
    await process.wait()


def _signal_group(group: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signum)


def _group_alive(group: int) -> bool:
    """Whether any process of `group` still runs; zombies do not count."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not sys.platform.startswith("linux"):
        return True
    # Orphans killed here stay zombies until their new parent reaps them, and
    # some init processes never do; only /proc tells a zombie from a live one.
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == group and fields[0] not in (b"Z", b"X"):
            return True
    return False
