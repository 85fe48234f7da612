"""Stopping a command on a signal: every script stopped first, then exit 128 + the signal.

`run_trio` runs a command's async work. SIGINT, SIGTERM and SIGHUP cancel it;
cancellation stops every script's process group (SIGTERM, the grace, then
SIGKILL) and tells a model generation to stop; then KeyboardInterrupt (for
SIGINT) or `Stopped` is raised, which `main` turns into the exit status.
Outside trio (loading a model, reading standard input), SIGTERM and SIGHUP
raise `Stopped` at once, as Ctrl-C raises KeyboardInterrupt.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TypeVar, cast

from .base import say

__all__ = ["Stopped", "run_trio", "stop_signals", "stopped"]

T = TypeVar("T")


class Stopped(BaseException):
    """SIGTERM or SIGHUP arrived: the command stops, as Ctrl-C stops it.

    A BaseException, as KeyboardInterrupt is, so that no `except Exception`
    on the way takes it for an error to handle.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stopped(why: str, status: int) -> int:
    """Say why the command stopped and return `status`, or exit with it at once.

    Every script is stopped by now. A model generation cut short may still run
    in its thread until its next token, seconds away while it reads a prompt;
    the interpreter's teardown would free llama.cpp under it and crash, so
    then the process exits here, without that teardown.
    """
    from ..model.local import generating  # light: llama.cpp is imported on use

    say(why)
    if generating():
        if sys.stdout is not None:
            with suppress(OSError, ValueError):
                sys.stdout.flush()
        os._exit(status)
    return status


class _StopSignals:
    """SIGTERM and SIGHUP as `Stopped`: raised at once in plain code, held while trio runs.

    Inside trio, `run_trio`'s signal receiver takes them and cancels the
    work; a signal that comes just before the receiver opens or just after it
    closes is held here and raised once trio has returned, because raising
    it in the middle of trio's own machinery would break it.
    """

    def __init__(self) -> None:
        self.holding = False
        self.held: int | None = None

    @contextmanager
    def installed(self) -> Iterator[None]:
        previous = {signum: signal.signal(signum, self._handle) for signum in _STOP_SIGNALS[1:]}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _handle(self, signum: int, frame: object) -> None:
        if not self.holding:
            raise Stopped(signum)
        if self.held is None:
            self.held = signum


stop_signals = _StopSignals()
"Installed by `main` while a command runs."


def run_trio(function: Callable[[], Awaitable[T]]) -> T:
    """Run the async `function` with trio and return what it returns, as `trio.run` does.

    SIGINT, SIGTERM and SIGHUP cancel it: every script's process group is
    stopped (SIGTERM, the grace, then SIGKILL) and a worker thread's model
    generation is told to stop; then KeyboardInterrupt (for SIGINT) or
    `Stopped` is raised.
    """
    import trio

    caught: list[int] = []

    async def guarded() -> T | None:
        with trio.open_signal_receiver(*_STOP_SIGNALS) as signals:
            work = trio.CancelScope()
            if stop_signals.held is not None:  # it came before the receiver was open
                work.cancel()

            async def watch() -> None:
                # Signals that come while the work stops are taken here too,
                # so that none interrupts the stopping.
                async for signum in signals:
                    caught.append(signum)
                    work.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch)
                outcome: T | None = None
                with work:
                    outcome = await function()
                nursery.cancel_scope.cancel()
        return outcome

    stop_signals.holding = True
    try:
        outcome = trio.run(guarded)
    except BaseExceptionGroup as group:
        # The nurseries inside are a detail: Ctrl-C reported from inside them,
        # or one exception, is raised as itself.
        _, rest = group.split(KeyboardInterrupt)
        if rest is None:
            raise KeyboardInterrupt from None
        error: BaseException = group
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        # Its own cause stays: a StreamError from a broken pipe is told apart by it.
        raise error from error.__cause__
    finally:
        stop_signals.holding = False
    held, stop_signals.held = stop_signals.held, None
    first = caught[0] if caught else held
    if first == signal.SIGINT:
        raise KeyboardInterrupt
    if first is not None:
        raise Stopped(first)
    # No signal came, so the work was not cancelled: it returned.
    return cast(T, outcome)
