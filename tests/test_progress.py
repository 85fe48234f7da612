"""The progress line a model command draws on a terminal, and nothing anywhere else.

On a terminal (a pseudo-terminal here, the command's standard error on it)
a model command shows what it writes: the answer, the attempt, the call n of
N, the tokens so far and the seconds, redrawn in place and cleared when the
writing ends. With standard error a pipe, or `TQDM_DISABLE` set, its output
is what it always was, byte for byte. The stub model server answers slowly
(`Reply.delay`, `Reply.every`) so that the line has time to show.
"""

from __future__ import annotations

import dataclasses
import fcntl
import importlib
import io
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from local_servers import ModelServer, Reply, conforming, model_server

from plancontracts import ContractSet, load_contracts, write
from plancontracts.runtime.commandkit import progress as progress_module
from plancontracts.runtime.commandkit.progress import (
    Progress,
    current_progress,
    showing_progress,
)
from plancontracts.runtime.model.writer import Piece
from plancontracts.runtime.model.writing import watching_attempts

PATIENCE = 300.0
"Seconds a command may take on a busy machine: only a hang reaches it; no test claims a speed."

# The command as the console script runs it, with Ctrl-C as from a terminal (a suite
# started in the background inherits SIGINT ignored, and Python keeps it so).
_COMMAND = (
    "import signal, sys\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "from plancontracts.runtime.cli.main import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)

LINE = re.compile(rb"think: writing the planning block \xc2\xb7 attempt 1/2 \xc2\xb7 (\d+) tokens")


# The loop's watchers ---------------------------------------------------------------------


class _TwoAnswers:
    """A writer that answers `first`, then `second`, each in pieces of 4 characters."""

    def __init__(self, first: str, second: str) -> None:
        self.answers = [first, second]

    async def write_chat(self, *args: Any, **options: Any) -> dict[str, Any]:
        raise AssertionError("the loop streams its answers")

    def refused(self) -> None:
        pass

    async def stream_chat(self, *args: Any, **options: Any) -> Any:
        text = self.answers.pop(0)
        for start in range(0, len(text), 4):
            await trio.lowlevel.checkpoint()
            yield Piece(text[start : start + 4], 1)


@pytest.fixture
def counters(tmp_path: Path) -> ContractSet:
    schema = {
        "title": "Counter",
        "type": "object",
        "required": ["count"],
        "properties": {"count": {"type": "integer", "minimum": 1}},
    }
    (tmp_path / "counter.schema.json").write_text(json.dumps(schema))
    return load_contracts(tmp_path / "counter.schema.json")


def test_the_loop_tells_a_watcher_as_each_answer_starts_and_ends(counters: ContractSet) -> None:
    seen: list[tuple[Any, ...]] = []

    class Watcher:
        def started(self, number: int, attempts: int, answer: str) -> None:
            seen.append(("started", number, attempts, answer))

        def ended(self) -> None:
            seen.append(("ended",))

    async def written() -> Any:
        with watching_attempts(Watcher()):
            writer = _TwoAnswers('{"count": 0}', '{"count": 2}')
            return await write(counters["counter"], "Count", writer=writer, attempts=3)

    assert trio.run(written) == {"count": 2}
    assert seen == [
        ("started", 1, 3, "JSON"),
        ("ended",),
        ("started", 2, 3, "JSON"),
        ("ended",),
    ]


# The line ----------------------------------------------------------------------------------


def test_the_line_says_the_answer_the_call_the_attempt_the_tokens_and_the_seconds() -> None:
    progress = Progress("session drive", io.StringIO())
    progress.call(2, 8)
    progress.started(1, 2, "Tool call JSON")
    progress.tokens(200)
    progress.tokens(14)
    assert re.fullmatch(
        r"session drive: writing the tool call · call 2 of 8 · attempt 1/2 · 214 tokens · \d+ s",
        progress.text(),
    )
    progress.ended()
    with progress.doing("loading the model"):
        assert re.fullmatch(
            r"session drive: loading the model · call 2 of 8 · \d+ s", progress.text()
        )


def test_a_call_past_the_last_is_shown_as_the_last() -> None:
    progress = Progress("story build", io.StringIO())
    progress.call(9, 8)
    progress.started(1, 2, "JSON")
    assert "call 8 of 8 · attempt 1/2 · 0 tokens" in progress.text()


def test_answers_written_at_once_are_counted_together() -> None:
    progress = Progress("plan", io.StringIO())
    progress.started(1, 2, "Plan JSON")
    progress.tokens(3)
    progress.started(1, 2, "Plan JSON")
    progress.tokens(4)
    assert "plan: writing the plan · 2 answers at once · 7 tokens" in progress.text()
    progress.ended()
    assert "attempt 1/2 · 7 tokens" in progress.text()  # one is still written
    progress.ended()
    progress.draw()  # nothing is written: nothing is drawn


def test_lines_written_while_the_line_shows_go_above_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress_module, "DELAY", 0.0)
    terminal = io.StringIO()
    progress = Progress("think", terminal)
    progress.started(1, 2, "Planning block JSON")
    progress.tokens(5)
    progress.draw()
    drawn = terminal.getvalue()
    assert drawn.startswith("\rthink: writing the planning block · attempt 1/2 · 5 tokens · ")
    progress.written(terminal, "think: a line of the command's\n")
    after = terminal.getvalue()[len(drawn) :]
    # Cleared (spaces over the line, back to its start), then the line of the command's.
    assert re.fullmatch(r"\r *\rthink: a line of the command's\n", after)
    progress.written(terminal, "half a line, ")
    progress.draw()  # not over an unfinished line
    assert terminal.getvalue().endswith("half a line, ")
    progress.written(terminal, "its end\n")
    progress.draw()  # drawn again below
    assert re.search(r"its end\n\rthink: writing [^\r\n]* 5 tokens · \d+ s$", terminal.getvalue())
    progress.close()
    assert re.search(r"\r *\r$", terminal.getvalue())  # the terminal is left clean


def test_without_a_terminal_nothing_is_changed() -> None:
    before = sys.stderr
    with showing_progress("think") as progress:
        assert not progress.enabled
        assert sys.stderr is before
        assert not current_progress().enabled
        progress.started(1, 2, "JSON")  # hooks run for nothing
        progress.tokens(3)
        progress.draw()
        progress.ended()
    assert sys.stderr is before


# Commands on a terminal --------------------------------------------------------------------


def _slowly(delay: float, every: float) -> Callable[[int, dict[str, Any]], Reply]:
    def answer(number: int, body: dict[str, Any]) -> Reply:
        return dataclasses.replace(conforming(number, body), delay=delay, every=every, piece=8)

    return answer


def _run(
    arguments: list[str],
    *,
    on_terminal: bool = True,
    environ: dict[str, str] | None = None,
    when: tuple[bytes, Callable[[subprocess.Popen[bytes]], None]] | None = None,
) -> tuple[int, bytes, bytes]:
    """Run `plancontracts ARGUMENTS`: exit status, standard output, standard error.

    Standard error is a pseudo-terminal's (what it shows, as the terminal
    gives it: `\\n` as `\\r\\n`) or, with `on_terminal` False, a pipe.
    `when` is a text and what to do once the terminal shows it.
    """
    env = dict(os.environ)
    env.pop("TQDM_DISABLE", None)
    env.update(environ or {})
    command = [sys.executable, "-c", _COMMAND, *arguments]
    if not on_terminal:
        done = subprocess.run(
            command, capture_output=True, stdin=subprocess.DEVNULL, env=env, timeout=PATIENCE
        )
        return done.returncode, done.stdout, done.stderr
    # A pseudo-terminal of 24 rows and 200 columns, the line never cut to its width.
    controller, terminal = pty.openpty()
    try:
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal, env=env
        )
    finally:
        os.close(terminal)  # the command holds it now
    try:
        assert process.stdout is not None
        shown = b""
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.05)
            if ready:
                try:
                    data = os.read(controller, 65536)
                except OSError:  # the terminal's last holder closed it
                    break
                if not data:
                    break
                shown += data
                if when is not None and when[0] in shown:
                    when[1](process)
                    when = None
            elif process.poll() is not None:
                break
        else:
            process.kill()
            raise AssertionError(f"the command did not end in {PATIENCE} s: {shown!r}")
        status = process.wait(timeout=PATIENCE)
        return status, process.stdout.read(), shown
    finally:
        os.close(controller)


def _served(server: ModelServer) -> bytes:
    return f"model: stub-model served at {server.url}/v1 (--server)".encode()


@pytest.mark.process  # the command's standard error on a terminal
@pytest.mark.slow  # the command run twice against a server that answers slowly
def test_think_shows_the_answer_the_attempt_and_the_tokens_on_a_terminal() -> None:
    with model_server(_slowly(delay=1.0, every=0.02)) as server:
        arguments = ["think", "--server", server.url, "--seed", "1", "A goblin guards the bridge"]
        status, stdout, shown = _run(arguments)
        piped_status, piped_stdout, piped_stderr = _run(arguments, on_terminal=False)
    assert status == piped_status == 0
    assert stdout == piped_stdout  # standard output is the same
    assert piped_stderr == _served(server) + b"\n"  # nothing more where it is not a terminal
    assert shown.startswith(_served(server) + b"\r\n")
    counts = [int(count) for count in LINE.findall(shown)]
    assert counts, shown
    assert counts == sorted(counts)  # the tokens as they come
    assert counts[-1] > 0
    # Cleared when the block is written: spaces over the line, back to its start.
    assert re.search(rb"\r +\r$", shown), shown[-300:]


@pytest.mark.process  # the command's standard error on a terminal
def test_tqdm_disable_leaves_the_terminal_as_it_was() -> None:
    with model_server(_slowly(delay=1.0, every=0.0)) as server:
        arguments = ["think", "--server", server.url, "A goblin guards the bridge"]
        status, _, shown = _run(arguments, environ={"TQDM_DISABLE": "1"})
    assert status == 0
    assert shown == _served(server) + b"\r\n"


@pytest.mark.process  # the command's standard error on a terminal
@pytest.mark.slow  # the command run twice against a server that answers slowly
def test_session_drive_shows_the_call_n_of_n() -> None:
    with model_server(_slowly(delay=1.0, every=0.0)) as server:
        arguments = ["session", "drive", "--server", server.url, "--max-calls", "2", "Ship it"]
        status, stdout, shown = _run(arguments)
        _, piped_stdout, piped_stderr = _run(arguments, on_terminal=False)
    assert status == 0
    assert stdout == piped_stdout
    assert piped_stderr == _served(server) + b"\n"
    text = shown.decode()
    assert "session drive: writing the tool call · call 1 of 2 · attempt 1/2 · " in text
    assert "session drive: writing the tool call · call 2 of 2 · attempt 1/2 · " in text


@pytest.mark.process  # Ctrl-C to the command
def test_ctrl_c_while_the_line_shows_clears_it_and_ends_in_one_line() -> None:
    with model_server(_slowly(delay=60.0, every=0.0)) as server:
        arguments = ["session", "drive", "--server", server.url, "--max-calls", "2", "Ship it"]
        status, _, shown = _run(
            arguments,
            when=(b"call 1 of 2", lambda process: process.send_signal(signal.SIGINT)),
        )
    assert status == 130
    assert b"call 1 of 2" in shown
    # The line cleared, then the command's one last line.
    assert re.search(rb"\r +\rplancontracts: interrupted\r\n$", shown), shown[-300:]


@pytest.mark.process  # the command's standard error on a terminal, and Ctrl-C to it
def test_story_build_shows_the_call_n_of_its_bound() -> None:
    with model_server(_slowly(delay=1.0, every=0.0)) as server:
        arguments = ["story", "build", "--server", server.url, "A lighthouse keeper's last night"]
        status, _, shown = _run(
            arguments,
            when=(b"call 2 of", lambda process: process.send_signal(signal.SIGINT)),
        )
    assert status == 130
    text = shown.decode()
    # Without --max-calls, N is the build's own bound: the pipeline's calls and the spare ones.
    assert re.search(r"story build: writing the (arguments|tool call) · call 1 of \d+ · ", text)
    assert re.search(r"story build: writing the (arguments|tool call) · call 2 of \d+ · ", text)
    assert re.search(r"\r +\rplancontracts: interrupted\r\n$", text), text[-300:]


@pytest.mark.process  # the command's standard error on a terminal
def test_write_shows_its_attempts_and_says_each_refusal_above_the_line() -> None:
    def answer(number: int, body: dict[str, Any]) -> Reply:
        # The first answer breaks the plan's rules beyond its schema; the second is kept.
        reply = _slowly(delay=1.0, every=0.0)(number, body)
        return reply if number else dataclasses.replace(reply, content='{"count": 0}')

    with model_server(answer) as server:
        arguments = ["write", "plan", "Roll a die", "--server", server.url, "--attempts", "2"]
        status, _, shown = _run(arguments)
    text = shown.decode()
    assert "write: writing the answer · attempt 1/2 · " in text
    refusal = text.index("plancontracts: attempt 1 refused")
    # The refusal is said on a line of its own, the progress line cleared before it.
    assert re.search(r"\r +\rplancontracts: attempt 1 refused", text), text
    assert "write: writing the answer · attempt 2/2 · " in text[refusal:]
    assert status == 0


class _Terminal(io.StringIO):
    """Standard error as a terminal says it is one."""

    def isatty(self) -> bool:
        return True


def test_on_a_terminal_the_line_is_shown_and_everything_is_put_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    with showing_progress("think") as progress:
        assert progress.enabled
        assert current_progress() is progress
        assert sys.stderr is not terminal  # its lines go above the line
    assert sys.stderr is terminal
    assert not current_progress().enabled


@pytest.mark.parametrize(
    ("environ", "tqdm_installed"), [({"TQDM_DISABLE": "1"}, True), ({}, False)]
)
def test_tqdm_disabled_or_not_installed_leaves_a_terminal_as_it_is(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], tqdm_installed: bool
) -> None:
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    if not tqdm_installed:
        monkeypatch.setitem(sys.modules, "tqdm", None)  # as if not installed
    with showing_progress("think") as progress:
        assert not progress.enabled
        assert sys.stderr is terminal
        progress.started(1, 2, "JSON")
        progress.draw()
    assert terminal.getvalue() == ""


def test_another_tqdm_bar_has_the_line_while_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    tqdm: Any = importlib.import_module("tqdm").tqdm  # tqdm has no type hints

    monkeypatch.setattr(progress_module, "DELAY", 0.0)
    terminal = io.StringIO()
    progress = Progress("think", terminal)
    with progress.doing("loading the model"):
        download = tqdm(total=10, file=io.StringIO(), desc="Phi-3.5-mini-instruct-Q4_K_M.gguf")
        try:
            progress.draw()
            assert "loading the model" not in terminal.getvalue()
        finally:
            download.close()
        progress.draw()
        assert "think: loading the model" in terminal.getvalue()
    progress.close()
