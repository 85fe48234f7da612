"""What a model command shows on a terminal while a model writes: one line, redrawn in place.

    with showing_progress("think", out) as progress:
        with progress.doing("loading the model"):
            writer = load_writer(...)
        progress.call(1, 8)                     # session drive, story build
        run_trio(...)                           # the writing is watched by itself

While a model writes an answer (`model.writing.watching_attempts`), standard
error shows, after half a second, a line such as

    think: writing the planning block · attempt 1/2 · 214 tokens · 12 s

counting the tokens as they come (`model.writer.watching_tokens`), cleared
when the answer is written. It is drawn by tqdm, and only where standard
error is a terminal, tqdm is installed and `TQDM_DISABLE` is not set:
otherwise `showing_progress` does nothing at all, so scripts and tests see
the output they always saw, byte for byte. While the line is shown, the
command's own lines (on standard error, and on standard output when that is
the same terminal) are written above it: the line is cleared first and drawn
again after.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from contextvars import ContextVar
from typing import Any, TextIO, cast

from .base import Output, StandardOutput

__all__ = ["DELAY", "INTERVAL", "Progress", "current_progress", "showing_progress"]

DELAY = 0.5
"Seconds a step runs before its line is drawn: a quick answer shows nothing."
INTERVAL = 0.2
"Seconds between redraws: the tokens and the seconds move while the model reads or writes."


class Progress:
    """The progress line of one command: what it is doing, and the tqdm line that shows it.

    Every method may be called whether or not a line is shown: a command
    given a disabled `Progress` (standard error not a terminal) runs its
    hooks for nothing. Thread-safe: tokens are counted in trio's thread,
    the line is redrawn from a thread of its own.
    """

    def __init__(self, command: str, stream: TextIO | None = None) -> None:
        self.command = command
        self.stream = stream
        "Where the line is drawn: the terminal on standard error; None when nothing is shown."
        self.lock = threading.RLock()
        self._calls: tuple[int, int] | None = None
        self._attempt: tuple[int, int] | None = None
        self._doing: str | None = None
        self._tokens = 0
        self._started = 0.0
        self._bar: Any = None
        "The tqdm line while a step is shown (tqdm has no type hints)."
        self._drawn = False
        self._held = False
        "Whether a line written above the bar is not finished yet: the bar waits for its end."
        self._writing = 0
        "Answers being written: more than one where a command writes several at once."
        self._shown: tuple[str, int] = ("", 0)
        "The text and width last drawn."

    @property
    def enabled(self) -> bool:
        """Whether anything is ever drawn."""
        return self.stream is not None

    def call(self, number: int, of: int) -> None:
        """The command is at call `number` of at most `of` (`session drive`, `story build`)."""
        with self.lock:
            self._calls = (min(number, of), of)

    @contextmanager
    def doing(self, what: str) -> Iterator[None]:
        """Within the block, the line says the command is doing `what` (`loading the model`)."""
        self._begin(what, None)
        try:
            yield
        finally:
            self._clear()

    # The AttemptWatcher of `model.writing`: each answer a model writes.
    def started(self, number: int, attempts: int, answer: str) -> None:
        """Answer `number` of `attempts`, named `answer` (`Planning block JSON`), is written."""
        with self.lock:
            if self._writing == 0:
                self._begin(f"writing {_what(answer)}", (number, attempts))
            else:  # answers written at once (`plan` against a server): counted together
                self._doing, self._attempt = f"writing {_what(answer)}", (number, attempts)
            self._writing += 1

    def ended(self) -> None:
        """An answer is written: once none is being written, the line is cleared."""
        with self.lock:
            self._writing = max(0, self._writing - 1)
            if self._writing == 0:
                self._clear()

    def _clear(self) -> None:
        with self.lock:
            self._doing = None
            self._hide()
            if self._bar is not None:
                bar, self._bar = self._bar, None
                with suppress(OSError, ValueError):
                    bar.close()

    def close(self) -> None:
        """Clear the line for good: nothing is drawn after."""
        with self.lock:
            self._writing = 0
            self._clear()
            self.stream = None

    def tokens(self, count: int) -> None:
        """`count` more tokens were written (the `watching_tokens` callback)."""
        with self.lock:
            self._tokens += count

    def _begin(self, what: str, attempt: tuple[int, int] | None) -> None:
        with self.lock:
            self._clear()
            self._doing, self._attempt = what, attempt
            self._tokens, self._started = 0, time.monotonic()
            # A line left unfinished (a prompt the user answered) no longer holds the bar back.
            self._held = False

    def text(self) -> str:
        """The line as it reads now, before tqdm fits it to the terminal's width."""
        with self.lock:
            parts = [f"{self.command}: {self._doing}"]
            if self._calls is not None:
                parts.append(f"call {self._calls[0]} of {self._calls[1]}")
            if self._writing > 1:
                parts.append(f"{self._writing} answers at once")
            elif self._attempt is not None:
                parts.append(f"attempt {self._attempt[0]}/{self._attempt[1]}")
            if self._attempt is not None:
                parts.append(f"{self._tokens} token{'' if self._tokens == 1 else 's'}")
            parts.append(f"{int(time.monotonic() - self._started)} s")
            return " · ".join(parts)

    def draw(self) -> None:
        """Draw the line again, once its step has run for `DELAY` seconds."""
        with self.lock:
            if self.stream is None or self._doing is None or self._held:
                return
            if time.monotonic() - self._started < DELAY:
                return
            try:
                if self._bar is None:
                    self._bar = _line(self.stream)
                if _other_bars(self._bar):
                    # huggingface_hub's download bar: it has the line while it runs.
                    self._hide()
                    return
                text, width = self.text(), _width(self.stream)
                if self._drawn and (text, width) == self._shown:
                    return  # the terminal shows it already
                self._bar.ncols = width
                self._bar.set_description_str(text, refresh=False)
                self._bar.refresh()
                self._drawn, self._shown = True, (text, width)
            except (OSError, ValueError):  # the terminal is gone: nothing more is drawn
                self.stream = None

    def _hide(self) -> None:
        if self._drawn and self._bar is not None:
            self._drawn = False
            with suppress(OSError, ValueError):
                self._bar.clear()

    def written(self, stream: TextIO, text: str) -> int:
        """Write `text` on `stream` above the line: cleared first, drawn again at the next tick."""
        with self.lock:
            self._hide()
            count = stream.write(text)
            stream.flush()
            if text:
                self._held = not text.endswith("\n")
            return count


class _Above:
    """A terminal stream whose writes go above the progress line (`Progress.written`)."""

    def __init__(self, stream: TextIO, progress: Progress) -> None:
        self._stream = stream
        self._progress = progress

    def write(self, text: str, /) -> int:
        return self._progress.written(self._stream, text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


_current: ContextVar[Progress | None] = ContextVar("plancontracts_progress", default=None)


def current_progress() -> Progress:
    """The `Progress` of the `showing_progress` block around the caller, or a disabled one.

    How a command's helpers (loading a model, a call made) reach the line
    without being handed it.
    """
    found = _current.get()
    return found if found is not None else Progress("")


def _what(answer: str) -> str:
    """What an answer is, as the line says it: `Planning block JSON` -> `the planning block`."""
    name = answer.removesuffix(" JSON").strip()
    if not name or name == "JSON":
        return "the answer"
    return f"the {name[0].lower()}{name[1:]}"


def _line(stream: TextIO) -> Any:
    """A tqdm line on `stream` that shows its description and draws only when asked."""
    # Imported by name: tqdm has no type hints, and the served extra may not have it.
    tqdm: Any = importlib.import_module("tqdm").tqdm

    class Line(tqdm):  # type: ignore[misc]
        monitor_interval = 0  # no tqdm monitor thread: `Progress` redraws on its own tick

    # Never drawn by tqdm itself (`delay`): only `Progress.draw` draws, under its lock.
    line = Line(
        file=stream,
        bar_format="{desc}",
        leave=False,
        position=0,
        delay=float("inf"),
        disable=False,
    )
    # Out of tqdm's list of bars, so that another (a model's download) takes the first row
    # instead of the one below, and `_other_bars` sees that it runs.
    tqdm._instances.discard(line)
    return line


def _other_bars(line: Any) -> bool:
    """Whether a tqdm bar other than `line` is shown, such as a model's download."""
    tqdm: Any = importlib.import_module("tqdm").tqdm
    with tqdm.get_lock():
        return any(bar is not line for bar in tqdm._instances)


def _width(stream: TextIO) -> int:
    """The columns the line may take: one less than the terminal's, so that it never wraps.

    A terminal that does not say its size (a bare pseudo-terminal says 0)
    is taken for 80 columns.
    """
    try:
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError):
        columns = 0
    return (columns if columns > 1 else 80) - 1


def _terminal() -> TextIO | None:
    """Standard error, where a progress line may be drawn on it; None where it may not."""
    stream = sys.stderr
    if stream is None or os.environ.get("TQDM_DISABLE", "").lower() not in ("", "0", "false"):
        return None
    try:
        if not stream.isatty():
            return None
    except (OSError, ValueError):
        return None
    if importlib.util.find_spec("tqdm") is None:  # the served extra may not have it
        return None
    return stream


@contextmanager
def showing_progress(command: str, out: Output | None = None) -> Iterator[Progress]:
    """A `Progress` for `command` (`think`), drawing on standard error while the block runs.

    Where standard error is a terminal (and tqdm is installed, and
    `TQDM_DISABLE` unset), every answer a model writes within the block is
    shown with its tokens and attempt (`watching_attempts`, `watching_tokens`),
    and standard error's lines, and those of `out` when it is the same kind of
    terminal, are written above the line. Elsewhere the `Progress` given is
    disabled and nothing is changed. The line is cleared when the block ends,
    however it ends (Ctrl-C included), before the command's last line.
    """
    from ..model.writer import watching_tokens
    from ..model.writing import watching_attempts

    terminal = _terminal()
    progress = Progress(command, terminal)
    if terminal is None:
        yield progress
        return
    shown = _current.set(progress)
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(INTERVAL):
            progress.draw()

    ticker = threading.Thread(target=tick, name="plancontracts progress", daemon=True)
    with ExitStack() as stack:
        stack.enter_context(watching_tokens(progress.tokens))
        stack.enter_context(watching_attempts(progress))
        sys.stderr = cast(TextIO, _Above(terminal, progress))
        stack.callback(setattr, sys, "stderr", terminal)
        if isinstance(out, StandardOutput) and _is_terminal(out.stream):
            stdout = out.stream
            out.stream = cast(TextIO, _Above(stdout, progress))
            stack.callback(setattr, out, "stream", stdout)
        ticker.start()
        try:
            yield progress
        finally:
            # Closed before the ticker is waited for: a second Ctrl-C during the wait
            # leaves a ticker that can no longer draw under the command's last line.
            stop.set()
            progress.close()
            _current.reset(shown)
            ticker.join()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False
