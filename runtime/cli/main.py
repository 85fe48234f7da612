"""The entry point of the `plancontracts` command: the parser, and how a command ends."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

from ..commandkit import (
    EXIT_INVALID,
    EXIT_USAGE,
    StandardOutput,
    Stopped,
    complain,
    stop_signals,
    stopped,
)
from ..core.errors import NoModel, ProfileBug, StreamError, UnknownContractError, UsageError
from ..goal_plans import commands as goal_plan_commands
from ..planning_blocks import commands as planning_block_commands
from ..session_plans import commands as session_plan_commands
from ..story_packages import commands as story_package_commands
from ..tool_plans import commands as tool_plan_commands
from . import commands

__all__ = ["main"]

# Each family registers its own commands (and options of `validate`).
_FAMILIES = (
    tool_plan_commands,
    planning_block_commands,
    session_plan_commands,
    story_package_commands,
    goal_plan_commands,
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command with `argv` (default: `sys.argv[1:]`) and return its exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if sys.stdout is None:  # started with standard output closed (`>&-`)
            raise StreamError("standard output is closed")
        out = StandardOutput(sys.stdout)
        with stop_signals.installed():
            status: int = args.run(args, out)
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
    except KeyboardInterrupt:
        return stopped("interrupted", 130)
    except Stopped as stop:
        return stopped(f"stopped by {signal.Signals(stop.signum).name}", 128 + stop.signum)
    except StreamError as error:
        if not isinstance(error.__cause__, BrokenPipeError):  # the reader of `| head` knows
            complain(str(error))
        _settle_standard_output()
        return EXIT_INVALID


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="plancontracts",
        description="Schema-first contracts for LLM planning systems.",
    )
    subcommands = parser.add_subparsers(required=True, metavar="COMMAND")
    rules_options = [option for family in _FAMILIES for option in family.RULES_OPTIONS]
    commands.register(subcommands, rules_options)
    for family in _FAMILIES:
        family.register(subcommands)
    return parser
