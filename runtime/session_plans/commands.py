"""`plancontracts session`: the session-plan commands, a group of subcommands.

`session run CALLS` applies NDJSON tool calls to one session, in order, and
prints one NDJSON line per call; `session drive OBJECTIVE` lets the local
model make the calls; `session section` and `session tools` come from
`prompt_commands`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from typing import TypeAlias

import msgspec

from ..commandkit import (
    EXIT_INVALID,
    EXIT_OK,
    NoCall,
    Output,
    RulesOption,
    add_max_bytes,
    add_model_options,
    bounded_int,
    label,
    model_choice,
    outcome,
    read_call,
    require_extra,
    run_calls,
    run_trio,
    say,
    writer_extra,
)
from ..core.errors import GenerationFailed, ToolValidationError, UsageError, Violation
from .prompt import PlanningStrategy
from .prompt_commands import add_prompt_commands
from .session import CallResult, Session
from .steps import MAX_OBJECTIVE
from .tools import TOOLS

__all__ = ["RULES_OPTIONS", "register"]

RULES_OPTIONS: tuple[RulesOption, ...] = ()
"Session plans are judged by their schemas and their one set of rules: no option chooses others."

Subcommands: TypeAlias = "Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]"
"A function that adds subcommands to the `session` group."


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `session` group and every subcommand of `_SUBCOMMANDS` to it."""
    session = commands.add_parser(
        "session", help="keep a session plan through the six planning tools"
    )
    group = session.add_subparsers(required=True, metavar="SUBCOMMAND")
    for add in _SUBCOMMANDS:
        add(group)


def _add_run(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = group.add_parser(
        "run",
        help="apply NDJSON tool calls to one session, printing each call's outcome as NDJSON",
    )
    run.add_argument(
        "calls",
        metavar="CALLS",
        help='a file of tool calls, one per line: {"tool": NAME, "arguments": {...}}; - for stdin',
    )
    add_max_bytes(run, "a line")
    run.set_defaults(run=_run)


MAX_CALLS = 50
"The most calls a drive may be given: enough for a plan, few enough for the model's context."
DEFAULT_CALLS = 10


def _add_drive(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    drive = group.add_parser(
        "drive",
        help="let the local model keep a plan for an objective through the tools, "
        "printing each call as NDJSON",
    )
    drive.add_argument(
        "objective",
        metavar="OBJECTIVE",
        help=f"what the plan is for, at most {MAX_OBJECTIVE} characters",
    )
    drive.add_argument(
        "--max-calls",
        type=bounded_int(1, MAX_CALLS),
        default=DEFAULT_CALLS,
        metavar="N",
        help=f"the most tool calls the model makes, 1 to {MAX_CALLS} (default {DEFAULT_CALLS}); "
        "it stops sooner once the plan is completed",
    )
    drive.add_argument(
        "--strategy",
        choices=[strategy.value for strategy in PlanningStrategy],
        default=PlanningStrategy.REACT.value,
        help=f"the planning section's mindset (default: {PlanningStrategy.REACT.value})",
    )
    add_model_options(drive, seed="seed of the sampling")
    drive.set_defaults(run=_drive)


_SUBCOMMANDS: tuple[Subcommands, ...] = (_add_run, _add_drive, add_prompt_commands)
"Every subcommand of `session`, each added by the function of the module that owns it."


def _run(args: argparse.Namespace, out: Output) -> int:
    session = Session(keep=1)  # each line shows the plan: no need to keep the others
    apply = partial(_call, session)
    return run_calls(args.calls, args.max_bytes, out, apply, lambda done: {"plan": session.latest})


def _call(session: Session, line: bytes | Violation) -> CallResult:
    """Apply one line's call; a line that is no call is refused as a call of no tool."""
    names = ", ".join(tool.name for tool in TOOLS)
    call = read_call(line, f"a planning tool: {names}")
    if isinstance(call, NoCall):
        return _refused(session, call.tool, call.message)
    return session.call(call.tool, call.arguments)


def _refused(session: Session, tool: str | None, message: str) -> CallResult:
    """A line refused before any tool saw it: the plan stays as it was."""
    name = tool or ""
    error = ToolValidationError(name, None, message)
    return CallResult(name, None, error, message, session.latest)


def _drive(args: argparse.Namespace, out: Output) -> int:
    require_extra(writer_extra(args), "session drive")
    from ..model.choice import load_writer
    from .drive import Drive, Driver, ToolCall, checked_objective

    try:
        objective = checked_objective(args.objective)
    except ValueError as error:
        raise UsageError(str(error)) from None
    driver = Driver(load_writer(model_choice(args), needs="a drive needs one"))
    drive = Drive(objective)

    def printed(call: ToolCall) -> None:
        record = {"call": len(drive.calls), **outcome(call.result), "arguments": call.arguments}
        out.write(msgspec.json.encode(record).decode() + "\n")
        out.flush()  # each call shows as it is made

    work = partial(
        driver.drive,
        objective,
        max_calls=args.max_calls,
        strategy=PlanningStrategy(args.strategy),
        seed=args.seed,
        on_call=printed,
        drive=drive,
    )
    status = EXIT_OK
    try:
        run_trio(work)
    except GenerationFailed as failure:
        say(f"the drive stopped after {len(drive.calls)} calls: {label(str(failure))}")
        status = EXIT_INVALID
    out.write(msgspec.json.encode({"plan": drive.session.latest}).decode() + "\n")
    return status
