"""`plancontracts session`: the session-plan commands, a group of subcommands.

`session run CALLS` applies NDJSON tool calls to one session, in order, and
prints one NDJSON line per call, then the plan; `session drive OBJECTIVE` lets the local
model make the calls; both append each call's event to `--events FILE`
(`events`). `session section` and `session tools` print the
planning tools' prompt section and their definitions for function calling.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from functools import partial
from typing import Any, TypeAlias

import msgspec

from ...generated.session_plans import SessionPlan
from ..commandkit import (
    EXIT_INVALID,
    EXIT_OK,
    Output,
    RulesOption,
    add_max_bytes,
    add_model_options,
    bounded_int,
    label,
    model_choice,
    outcome,
    require_extra,
    run_calls,
    run_trio,
    say,
    user_text,
    writer_extra,
)
from ..commandkit.progress import current_progress, showing_progress
from ..core.errors import GenerationFailed, UsageError
from ..core.sessions import ToolCall
from .events import EventLog, events_file
from .prompts import PlanningStrategy, planning_section, tool_definitions
from .session import PlanSession
from .steps import MAX_OBJECTIVE

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
    run.add_argument(
        "--plan-after-each",
        action="store_true",
        help="print the plan after each call too, not only once at the end "
        "(the output then grows with the plan's size times the calls)",
    )
    _add_events(run)
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
        type=user_text,
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
    _add_strategy(drive, "the planning section's mindset")
    _add_events(drive)
    add_model_options(drive, seed="seed of the sampling")
    drive.set_defaults(run=_drive)


def _add_prompt_commands(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    section = group.add_parser(
        "section", help="print the planning tools' prompt section, in Markdown"
    )
    _add_strategy(section, "the mindset the section nudges the model toward")
    section.set_defaults(run=_section)
    tools = group.add_parser(
        "tools", help="print the planning tools' definitions for function calling, as JSON"
    )
    tools.set_defaults(run=_tools)


def _add_strategy(command: argparse.ArgumentParser, what: str) -> None:
    default = PlanningStrategy.REACT.value
    command.add_argument(
        "--strategy",
        choices=[strategy.value for strategy in PlanningStrategy],
        default=default,
        help=f"{what} (default: {default})",
    )


def _add_events(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--events",
        metavar="FILE",
        help="append each tool call's session-tool-event to FILE, one JSON line each, "
        "written as the call is done (FILE is created if missing; what it holds is kept)",
    )


_SUBCOMMANDS: tuple[Subcommands, ...] = (_add_run, _add_drive, _add_prompt_commands)
"Every subcommand of `session`, each added by the function of the module that owns it."


def _run(args: argparse.Namespace, out: Output) -> int:
    session = PlanSession(keep=1)  # only the latest plan is ever printed
    with events_file(args.events, inputs=[args.calls]) as log:
        if log is not None:
            session.subscribe(log)

        def after() -> dict[str, Any]:
            if log is not None:
                log.check()  # an event that could not be written ends the run here
            # Each call's line says what it changed (its result); the whole plan goes
            # once at the end. Printed after every call, a plan that grows with each
            # note made the output quadratic: 1.2 MB of note calls printed 1 GB.
            return {"plan": session.latest} if args.plan_after_each else {}

        status = run_calls(args.calls, args.max_bytes, out, session, after)
    out.write(msgspec.json.encode({"plan": session.latest}).decode() + "\n")
    return status


def _drive(args: argparse.Namespace, out: Output) -> int:
    with showing_progress("session drive", out):
        require_extra(writer_extra(args), "session drive")
        from .agent import checked_objective

        try:
            objective = checked_objective(args.objective)
        except ValueError as error:
            raise UsageError(str(error)) from None
        # Opened before the model loads: a file that cannot be opened is said at once.
        with events_file(args.events) as log:
            return _drive_with(args, out, objective, log)


def _drive_with(args: argparse.Namespace, out: Output, objective: str, log: EventLog | None) -> int:
    from ..model.choice import load_writer
    from .agent import Drive, Driver

    progress = current_progress()
    with progress.doing("loading the model"):
        driver = Driver(load_writer(model_choice(args), needs="a drive needs one"))
    drive = Drive(objective)
    if log is not None:
        drive.session.subscribe(log)
    progress.call(1, args.max_calls)

    def printed(call: ToolCall[SessionPlan | None]) -> None:
        if log is not None:
            log.check()  # an event that could not be written ends the drive here
        record = {"call": len(drive.calls), **outcome(call.result), "arguments": call.arguments}
        out.write(msgspec.json.encode(record).decode() + "\n")
        out.flush()  # each call shows as it is made
        progress.call(len(drive.calls) + 1, args.max_calls)

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


def _section(args: argparse.Namespace, out: Output) -> int:
    out.write(planning_section(PlanningStrategy(args.strategy)))
    return EXIT_OK


def _tools(args: argparse.Namespace, out: Output) -> int:
    out.write(json.dumps(tool_definitions(), indent=2) + "\n")
    return EXIT_OK
