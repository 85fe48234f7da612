"""The entry point of the `plancontracts` command: the parser, and how a command ends.

This module imports nothing heavy: `main` takes the stop signals first and
only then imports the commands (a third of a second), so that a signal at any
moment from there on ends the command as one during its work does; one that
comes while the commands import is held until they have.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse
    from types import FrameType

    from ..commandkit import StandardOutput, Stopped

__all__ = ["main"]

# The signals that stop a command besides Ctrl-C, which Python already turns
# into KeyboardInterrupt (and which stays ignored where it was, as in `cmd &`).
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_ALL_STOP_SIGNALS = (signal.SIGINT, *_STOP_SIGNALS)


class _StoppedEarly(BaseException):
    """SIGTERM or SIGHUP arrived before the command kit's own handler was installed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with `argv` (default: `sys.argv[1:]`) and return its exit status.

    Raises SystemExit where argparse or a usage error exits (status 2); every
    other way a command ends, a signal included, is a returned status. Called
    without `argv`, as the console script and `python -m plancontracts` call
    it, the command is its process's: once it stops on a signal, further stop
    signals pass until the process has exited, its teardown included.
    """
    with _early_signals(restore_after_a_stop=argv is not None):
        try:
            return _run(argv)
        # While the commands are still importing, or after the command kit's
        # handler is gone: the kit may be half imported, so the line is
        # written here, as `commandkit.say` writes it.
        except (KeyboardInterrupt, _StoppedEarly, RuntimeError) as error:
            ending = _stop_of(error, _StoppedEarly)
            if ending is None:
                raise
            _stopping()
            return _said(*ending)


@contextmanager
def _early_signals(*, restore_after_a_stop: bool) -> Iterator[None]:
    """SIGTERM and SIGHUP raise `_StoppedEarly` inside; each stop signal's handler is back after.

    After a stop, with `restore_after_a_stop` false, the stop signals keep
    passing, and are blocked: Python's teardown puts back their default
    action, which would end the process by the signal, not with its status.
    """

    def stop(signum: int, frame: FrameType | None) -> None:
        _stopping()  # first, so that a second signal cannot interrupt the raise
        raise _StoppedEarly(signum)

    previous = {signum: signal.getsignal(signum) for signum in _ALL_STOP_SIGNALS}
    for signum in _STOP_SIGNALS:
        signal.signal(signum, stop)
    try:
        yield
    finally:
        if restore_after_a_stop or signal.getsignal(signal.SIGTERM) is not _let_pass:
            for signum, handler in previous.items():
                if handler is not None:
                    signal.signal(signum, handler)
        else:
            signal.pthread_sigmask(signal.SIG_BLOCK, _ALL_STOP_SIGNALS)


@contextmanager
def _held_signals() -> Iterator[None]:
    """Hold the stop signals inside; the first is raised once the block has ended.

    Inside, the commands import. A signal raised in the middle of an import
    can break an extension module (msgspec 0.22 crashes with SIGSEGV when
    KeyboardInterrupt lands while it builds a decoder) or come out as another
    error (a RuntimeError, from a `__set_name__`); held, it stops the command
    a moment later (a third of a second at most, on a quiet machine).
    A block that raises (argparse's exit) ends the command as it does.
    """
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    previous = {signum: signal.getsignal(signum) for signum in _ALL_STOP_SIGNALS}
    for signum, handler in previous.items():
        if callable(handler):  # not a signal ignored (Ctrl-C in `cmd &`) or left to the system
            signal.signal(signum, hold)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if callable(handler):
                signal.signal(signum, handler)
    if held and held[0] == signal.SIGINT:
        raise KeyboardInterrupt
    if held:
        raise _StoppedEarly(held[0])


def _stopping() -> None:
    """Let every stop signal pass from now on: the command is stopping.

    A second Ctrl-C, or a supervisor's SIGTERM after it, would otherwise
    interrupt the stopping (the scripts' stop, the one line) with a traceback
    or a second line. `_early_signals` puts the handlers back after.
    """
    for signum in _ALL_STOP_SIGNALS:
        if signal.getsignal(signum) is not None:  # None: not from Python, left as it is
            signal.signal(signum, _let_pass)


def _let_pass(signum: int, frame: FrameType | None) -> None:
    """A handler that does nothing: not SIG_IGN, which a script started now would inherit."""


def _unwrapped(error: BaseException) -> BaseException:
    """The signal's exception a RuntimeError wraps, or `error` itself.

    Python 3.11 wraps what a `__set_name__` raises in a RuntimeError: a signal
    that lands while a module defining a class with fields is imported.
    """
    cause = error.__cause__
    if isinstance(error, RuntimeError) and cause is not None and not isinstance(cause, Exception):
        return cause
    return error


def _stop_of(
    error: BaseException, signalled: type[_StoppedEarly] | type[Stopped]
) -> tuple[str, int] | None:
    """The line and exit status of the stop signal behind `error`; None when it is none.

    `signalled` is the exception a SIGTERM or SIGHUP raises at this point:
    `_StoppedEarly` while the commands import, the command kit's `Stopped` after.
    """
    stop = _unwrapped(error)
    if isinstance(stop, KeyboardInterrupt):
        return "interrupted", 130
    if isinstance(stop, signalled):
        return f"stopped by {signal.Signals(stop.signum).name}", 128 + stop.signum
    return None


def _said(why: str, status: int) -> int:
    """Write `plancontracts: why` on standard error, if there is one, and return `status`."""
    if sys.stderr is not None:
        with suppress(OSError, ValueError, RuntimeError):  # RuntimeError: a reentrant write
            sys.stderr.write(f"plancontracts: {why}\n")
            sys.stderr.flush()
    return status


def _run(argv: Sequence[str] | None) -> int:
    """Parse `argv`, run its command and return its exit status (see `main`)."""
    with _held_signals():
        from ..commandkit import (
            EXIT_INVALID,
            EXIT_USAGE,
            StandardOutput,
            Stopped,
            complain,
            stop_signals,
            stopped,
        )
        from ..core.errors import (
            NoModel,
            ProfileBug,
            StreamError,
            UnknownContractError,
            UsageError,
        )

        parser = _parser()
        args, extra = parser.parse_known_args(argv)
        _take_documents_after_options(parser, args, extra)
    try:
        if sys.stdout is None:  # started with standard output closed (`>&-`)
            raise StreamError("standard output is closed")
        out = StandardOutput(sys.stdout)
        with stop_signals.installed():
            status: int = _traced(args, out) if args.otel else args.run(args, out)
        out.flush()
        return status
    except (UsageError, UnknownContractError) as error:
        parser.exit(EXIT_USAGE, f"plancontracts: error: {error}\n")
    except NoModel as error:  # such as a model server that was asked for and does not answer
        complain(str(error))
        return EXIT_INVALID
    except ProfileBug as bug:
        # A model's answer its profile let through and its contract refused: a bug of
        # plancontracts, told in one line (the answer is not used), as every failure is.
        complain(f"{bug} (a bug in plancontracts' decoding profile: the answer is not used)")
        return EXIT_INVALID
    except StreamError as error:
        if not isinstance(error.__cause__, BrokenPipeError):  # the reader of `| head` knows
            complain(str(error))
        _settle_standard_output()
        return EXIT_INVALID
    except (KeyboardInterrupt, Stopped, RuntimeError) as error:
        ending = _stop_of(error, Stopped)
        if ending is None:
            raise
        _stopping()
        return stopped(*ending)


def _traced(args: argparse.Namespace, out: StandardOutput) -> int:
    """Run the command as `--otel` asks: one trace, exported when it ends."""
    from ..commandkit.telemetry import exporting

    with exporting(args.otel_command):
        status: int = args.run(args, out)
    return status


def _settle_standard_output() -> None:
    """Flush what the command wrote, or drop it where standard output is what failed.

    A failed stream keeps its buffer, which would fail again at exit with a
    traceback-like warning: it goes to /dev/null instead. Where another
    stream failed (a log, a session file), what was written reaches the reader.
    """
    if sys.stdout is None:
        return
    try:
        sys.stdout.flush()
    except ValueError:  # closed: nothing is left to fail at exit
        pass
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)


def _take_documents_after_options(
    parser: argparse.ArgumentParser, args: argparse.Namespace, extra: list[str]
) -> None:
    """Add to a command's `files` the arguments argparse left after its options, or refuse them.

    argparse gives a positional of many values (`FILE...`) only the arguments
    before the first option: `validate plan a.json --json b.json` would leave
    `b.json` unrecognized. A command whose defaults name `files_after_options`
    takes them, in order; any other leftover is the usage error argparse gives.
    """
    taken = getattr(args, "files_after_options", False)
    documents = [each for each in extra if taken and (each == "-" or not each.startswith("-"))]
    refused = [each for each in extra if each not in documents]
    if refused:
        parser.error(f"unrecognized arguments: {' '.join(refused)}")
    if documents:
        args.files += documents


def _version_action() -> type[argparse.Action]:
    """--version: the installed distribution's version, looked up only when asked (80 ms),
    and whether the native fast path (the `fast` extra) is installed."""
    import argparse

    class Version(argparse.Action):
        def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
            super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

        def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
            from importlib.metadata import PackageNotFoundError, version

            from ..core.native import native_state

            try:
                found = version("plancontracts")  # plancontracts.__version__, as pyproject reads it
            except PackageNotFoundError:  # a checkout that was never installed
                found = "(not installed)"
            # The verdicts are the same either way, only slower: said, never required.
            sys.stdout.write(f"{parser.prog} {found} (native fast path: {native_state()})\n")
            parser.exit()

    return Version


def _parser() -> argparse.ArgumentParser:
    """The parser of every command: the contracts' own, then each family's."""
    import argparse

    from ..commandkit.telemetry import add_otel
    from ..goal_plans import commands as goal_plan_commands
    from ..planning_blocks import commands as planning_block_commands
    from ..session_plans import commands as session_plan_commands
    from ..story_packages import commands as story_package_commands
    from ..tool_plans import commands as tool_plan_commands
    from . import commands, diffing, migrating, normalizing, writing

    # Each family registers its own commands (and options of `validate`).
    families = (
        tool_plan_commands,
        planning_block_commands,
        session_plan_commands,
        story_package_commands,
        goal_plan_commands,
    )
    parser = argparse.ArgumentParser(
        prog="plancontracts",
        description="Schema-first contracts for LLM planning systems.",
    )
    parser.add_argument("--version", action=_version_action(), help="print the version and exit")
    subcommands = parser.add_subparsers(required=True, metavar="COMMAND")
    rules_options = [option for family in families for option in family.RULES_OPTIONS]
    commands.register(subcommands, rules_options)
    writing.register(subcommands)
    diffing.register(subcommands)
    migrating.register(subcommands)
    # A family's package name (planning_blocks) keys its options, as the index names families.
    by_family = {family.__name__.split(".")[-2]: family.RULES_OPTIONS for family in families}
    normalizing.register(subcommands, by_family)
    for family in families:
        family.register(subcommands)
    add_otel(parser)
    return parser
