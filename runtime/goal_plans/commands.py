"""`plancontracts goals`: the goal-planning commands, a group of subcommands.

`goals simulate SCRIPT` runs NDJSON events (`goal-event` documents) through
one planning system, in order, and prints one NDJSON line per event: what
it did, the directive the action decision would read after it, and the
active plans; with `--state FILE` the simulation goes on from the
`goal-planning-system` document FILE holds, and is written back to it after
every event. `goals stats FILE` counts what a saved simulation (any
`goal-planning-system` document) has done, as jenbina's `get_planning_stats`
did, and `goals prompt --state FILE` prints the action decision's prompt for
it. `goals plan GOAL` prints one plan for one goal. (A model's answer is
repaired as the upstream tolerated it by `plancontracts normalize
goal-plan-output FILE`, which finds this family's `repairs.NORMALIZERS`.)

The model is loaded only when a plan is due and no scripted answer is
left; without one (the model extra missing when no model or server was
named, no model loading, or `--fallback`), the fallback decomposition
writes the plans, as said on standard error. A model or server named whose
extra is missing stops the command, exit 2, as every other command.
"""

from __future__ import annotations

import argparse
import os
from functools import partial
from pathlib import Path
from typing import Any

import msgspec

from ...generated import GOAL_EVENT, GOAL_PLANNING_SYSTEM
from ...generated.goal_plans import (
    ContextEvent,
    Goal,
    GoalEvent,
    GoalPlanningSystem,
    NewGoalEvent,
)
from ..commandkit import (
    DEFAULT_MAX_BYTES,
    EXIT_INVALID,
    EXIT_OK,
    Output,
    RulesOption,
    add_max_bytes,
    add_model_options,
    complain,
    label,
    lines_of,
    missing_modules,
    model_choice,
    opened,
    read_at_most,
    reason,
    run_trio,
    say,
    unreadable,
    user_text,
    writer_extra,
)
from ..commandkit.extras import missing_extra, require_extra
from ..commandkit.options import uses_server
from ..commandkit.progress import current_progress, showing_progress
from ..commandkit.state import Upgrade, holding_the_state, read_state, upgraded_in_memory
from ..core.contracts import field_bound
from ..core.errors import (
    ContractError,
    MalformedJSON,
    MigrationFailed,
    StreamError,
    TooManyGoals,
    UsageError,
    Violation,
)
from ..core.files import replace_file
from ..core.jsontext import parse
from ..core.typed_patterns import conforming
from ..core.validation import convert, decode
from .agent import GoalPlanner
from .migrations import HORIZON_OPTION, horizon_choice
from .prompts import Circumstances, PlanRequest, action_messages
from .session import HORIZONS, PlanningSystem
from .simulation import CycleReport, Person
from .stats import planning_stats

__all__ = ["RULES_OPTIONS", "register"]

RULES_OPTIONS: tuple[RulesOption, ...] = ()
"Goal plans are judged by their schemas and their one set of rules: no option chooses others."


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `goals` group and its subcommands."""
    goals = commands.add_parser(
        "goals", help="decompose goals into plans and follow them cycle by cycle"
    )
    group = goals.add_subparsers(required=True, metavar="SUBCOMMAND")
    simulate = group.add_parser(
        "simulate",
        help="run NDJSON events through one planning system, printing one NDJSON line per event",
    )
    simulate.add_argument(
        "script",
        metavar="SCRIPT",
        help="a file of goal-event lines, one event each "
        '({"event": "goal"|"context"|"cycle"|"model_output", ...}); - for stdin',
    )
    add_max_bytes(simulate, "a line")
    simulate.add_argument(
        "--state",
        metavar="FILE",
        help="the simulation to go on from (a goal-planning-system document) and to write "
        "back after every event; a missing FILE starts a new one",
    )
    simulate.add_argument(
        "--horizon",
        metavar="H[,H...]",
        help="with --state: the horizon (short, mid, long) of every goal, or of each goal in "
        "order, of a state jenbina's to_dict wrote, upgraded on open (default: short)",
    )
    _add_writers(simulate)
    simulate.set_defaults(run=_simulate)
    stats = group.add_parser(
        "stats",
        help="count a saved simulation's goals, plans, steps and cycles, as one JSON object",
        usage="%(prog)s FILE [--horizon H[,H...]]\n       %(prog)s --state FILE",
    )
    stats.add_argument(
        "file",
        metavar="FILE",
        nargs="?",
        help="a goal-planning-system JSON file (jenbina's to_dict too), or - for stdin",
    )
    stats.add_argument(
        "--state",
        metavar="STATE",
        help="the state file of goals simulate --state, read as a simulation reads it",
    )
    stats.add_argument(
        "--horizon",
        metavar="H[,H...]",
        help="the horizon (short, mid, long) of every goal, or of each goal in order, of a "
        "document jenbina's to_dict wrote (default: short)",
    )
    add_max_bytes(stats)
    stats.set_defaults(run=_stats)
    prompt = group.add_parser(
        "prompt",
        help="print the action decision's prompt for a saved simulation, as JSON chat messages",
    )
    prompt.add_argument(
        "--state",
        metavar="FILE",
        required=True,
        help="the state file of goals simulate --state, read as a simulation reads it",
    )
    prompt.add_argument(
        "--horizon",
        metavar="H[,H...]",
        help="the horizon (short, mid, long) of every goal, or of each goal in order, of a "
        "state jenbina's to_dict wrote (default: short)",
    )
    prompt.set_defaults(run=_prompt)
    plan = group.add_parser("plan", help="print one plan for one goal, written by the local model")
    most = field_bound(NewGoalEvent, "description", "max_length")
    plan.add_argument(
        "goal", metavar="GOAL", type=user_text, help=f"the goal, at most {most} characters"
    )
    plan.add_argument(
        "--horizon", choices=HORIZONS, default="short", help="the goal's horizon (default: short)"
    )
    plan.add_argument(
        "--needs",
        metavar="JSON",
        type=user_text,
        help="each need's satisfaction in percent, such as '{\"hunger\": 30}'",
    )
    _add_writers(plan)
    plan.set_defaults(run=_plan)


def _add_writers(command: argparse.ArgumentParser) -> None:
    add_model_options(command, seed="seed of the sampling")
    command.add_argument(
        "--fallback",
        action="store_true",
        help="write plans with the fallback decomposition, never loading a model",
    )


def _planner(args: argparse.Namespace, command: str) -> GoalPlanner:
    """Scripted answers first, then the model (loaded when first needed), then the fallback.

    Raises UsageError (exit 2), naming `command`, when --model, --server or
    $PLANCONTRACTS_SERVER asked for a model whose extra is not installed.
    """
    if args.fallback:
        return GoalPlanner(say=say)
    extra = writer_extra(args)
    missing = missing_modules(extra)
    if missing:
        # A model or server asked for by name is what the user wants: as every other command,
        # stop (exit 2). With none asked for, the fallback writes, as documented.
        if args.model is not None or uses_server(args):
            require_extra(extra, command)
        say(f"goals: the {extra} extra is not installed {missing_extra(extra, missing)}")
        return GoalPlanner(say=say)

    from ..model.choice import load_first_writer
    from ..model.writer import Writer

    def load() -> Writer | None:
        with current_progress().doing("loading the model"):
            return load_first_writer(model_choice(args), say=say)

    return GoalPlanner(load=load, say=say, seed=args.seed)


def _check_horizon(given: str | None) -> None:
    """UsageError, in one line, when `--horizon`'s value `given` names no horizon.

    Called first, before any file is read: whether the file needs it (an
    old one), and has as many goals, is known only once it is read, but a
    value that names no horizon is wrong whatever the file.
    """
    if given is None:
        return
    try:
        horizon_choice(given)
    except ValueError as error:
        raise UsageError(f"--horizon: {error}") from None


def _simulate(args: argparse.Namespace, out: Output) -> int:
    with showing_progress("goals simulate", out):
        return _simulate_with(args, out)


def _simulate_with(args: argparse.Namespace, out: Output) -> int:
    _check_horizon(args.horizon)
    if args.state is None and args.horizon is not None:
        raise UsageError("--horizon applies to a saved simulation: give --state FILE")
    try:
        script = opened(args.script)
    except OSError as error:
        raise UsageError(f"{label(args.script)}: {unreadable(error)}") from None
    planner = _planner(args, "goals simulate")
    status = EXIT_OK
    # A simulation is its script's events in order: two runs on one state take
    # turns as wholes, the second going on from what the first saved.
    holder = "another run is simulating with it"
    with script as stream, holding_the_state(args.state, holder):
        if args.state is None:
            person = Person(PlanningSystem(), planner)
        else:
            person = Person.from_contract(_read_state(args.state, args.horizon), planner)
        try:
            for number, line in lines_of(stream, args.max_bytes):
                record = _event(person, line)
                if record["ok"] and args.state is not None:
                    _write_state(args.state, person)  # before it is printed: printed is saved
                out.write(msgspec.json.encode({"line": number, **record}).decode() + "\n")
                out.flush()  # a reader of a pipe sees each event as it is run
                if not record["ok"]:
                    status = EXIT_INVALID
        except OSError as error:
            raise StreamError(f"cannot read {label(args.script)}: {reason(error)}") from error
    return status


def _read_state(name: str, horizon: str | None, *, write: bool = True) -> GoalPlanningSystem:
    """The saved simulation in file `name`, or a new one when there is no such file.

    A document an older version stored (jenbina's `to_dict`) is upgraded
    (`horizon` is the step's option): with `write`, as a simulation opens
    it, the upgrade is written back and the old kept beside it (the caller
    holds the file's lock); without, it is upgraded in memory only, each
    step said. Raises UsageError and StreamError as `read_state` does.
    """
    options = {} if horizon is None else {"horizon": horizon}
    upgrade: Upgrade = "in place" if write else "in memory"
    what = f"a {GOAL_PLANNING_SYSTEM.name}"
    state = read_state(name, GOAL_PLANNING_SYSTEM, what, upgrade=upgrade, options=options)
    return GoalPlanningSystem(goals=[], plans=[]) if state is None else state


def _stats(args: argparse.Namespace, out: Output) -> int:
    _check_horizon(args.horizon)
    if (args.file is None) == (args.state is None):
        raise UsageError("give one FILE, or --state FILE")
    if args.state is not None:
        state = _saved(args.state, args.horizon)
    else:
        try:
            with opened(args.file) as stream:
                data = read_at_most(stream, args.max_bytes)
        except OSError as error:
            raise UsageError(f"{label(args.file)}: {unreadable(error)}") from None
        try:
            if isinstance(data, Violation):
                raise ContractError(GOAL_PLANNING_SYSTEM.name, [data])
            options = {} if args.horizon is None else {"horizon": args.horizon}
            current = upgraded_in_memory(GOAL_PLANNING_SYSTEM, args.file, data, options)
            state = decode(GOAL_PLANNING_SYSTEM, current)
        except ContractError as error:
            first = error.violations[0]
            more = len(error.violations) - 1
            complain(
                f"{label(args.file)}: not a {GOAL_PLANNING_SYSTEM.name}: {first}"
                + (f" (and {more} more)" if more else "")
            )
            return EXIT_INVALID
        except MigrationFailed as error:
            if error.reason.startswith(HORIZON_OPTION):  # the option's fault: as with --state
                raise UsageError(f"{label(args.file)}: {error}") from None
            complain(f"{label(args.file)}: {error}")
            return EXIT_INVALID
    out.write(msgspec.json.encode(planning_stats(state)).decode() + "\n")
    return EXIT_OK


def _saved(name: str, horizon: str | None) -> GoalPlanningSystem:
    """The simulation saved in file `name`, read and never written (see `_read_state`).

    Raises UsageError when there is no such file: a simulation's counts or
    prompt are asked of one that exists, and a new one would hide a typo.
    """
    if not os.path.lexists(name):
        raise UsageError(f"--state {label(name)}: no such file")
    return _read_state(name, horizon, write=False)


def _prompt(args: argparse.Namespace, out: Output) -> int:
    _check_horizon(args.horizon)
    person = Person.from_contract(_saved(args.state, args.horizon), GoalPlanner())
    messages = action_messages(person.system, person.context)
    out.write(msgspec.json.encode(messages).decode() + "\n")
    return EXIT_OK


def _write_state(name: str, person: Person) -> None:
    """Replace file `name` with `person`'s state, checked against its contract, atomically.

    Written to a file made exclusively beside it and renamed over it, so a
    reader (or a crash) sees the state before the event or after it, never
    half. Raises StreamError when it cannot be written, or when it would be
    larger than the next run reads.
    """
    data = msgspec.json.encode(person.to_contract())
    # Its types and bounds checked, the cheap part of its contract: a state the simulation
    # made breaks none (a bug if so), and the next run reads it. The rules beyond the schema,
    # whose check grows with every plan, are kept by the planning system after every event
    # (tests/test_goal_plans.py checks them on random scripts).
    conforming(msgspec.json.decode(data), GoalPlanningSystem)
    if len(data) >= DEFAULT_MAX_BYTES:
        raise StreamError(
            f"--state {label(name)}: the state would be larger than {DEFAULT_MAX_BYTES} bytes, "
            "the most a run reads back"
        )
    try:
        replace_file(Path(name), data + b"\n")
    except OSError as error:
        raise StreamError(f"cannot write the state to {label(name)}: {reason(error)}") from None


def _event(person: Person, line: bytes | Violation) -> dict[str, Any]:
    """Run one line's event; what it did, or why it was refused, then the state after it."""
    record: dict[str, Any]
    try:
        event = _decoded(line)
        done = run_trio(partial(person.run_event, event))
    except ContractError as error:
        record = {"event": _kind(line), "ok": False, "error": _error(error.violations)}
    except TooManyGoals as error:
        record = {"event": "goal", "ok": False, "error": {"message": str(error)}}
    else:
        record = {"event": event.__struct_config__.tag, "ok": True}
        if isinstance(done, CycleReport):
            record["outcome"] = done.outcome.value
            done = done.happened
        record["happened"] = done
    system = person.system
    return {**record, "directive": system.directive(), "plans": system.active_plans()}


def _decoded(line: bytes | Violation) -> GoalEvent:
    if isinstance(line, Violation):
        raise ContractError(GOAL_EVENT.name, [line])
    return decode(GOAL_EVENT, line)


def _kind(line: bytes | Violation) -> str | None:
    """The line's `"event"`, when it is an object naming one."""
    if isinstance(line, Violation):
        return None
    try:
        value = parse(line)
    except MalformedJSON:
        return None
    kind = value.get("event") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else None


def _error(violations: tuple[Violation, ...]) -> dict[str, Any]:
    first = violations[0]
    return {
        "message": str(first) if len(violations) == 1 else f"{len(violations)} violations: {first}",
        "violations": [{"pointer": each.pointer, "message": each.message} for each in violations],
    }


def _plan(args: argparse.Namespace, out: Output) -> int:
    with showing_progress("goals plan", out):
        return _plan_with(args, out)


def _plan_with(args: argparse.Namespace, out: Output) -> int:
    try:
        if not args.goal.strip():
            raise UsageError("GOAL: is blank")
        goal = _goal(args.goal.strip(), args.horizon)
        context = _context(args.needs)
    except ContractError as error:
        raise UsageError(_usage(error)) from None
    planner = _planner(args, "goals plan")
    output, source = run_trio(partial(planner.steps, PlanRequest(goal, context)))
    plan = PlanningSystem([goal]).start_plan(0, output.steps)
    say(f"goals: the plan's steps were written by the {source}")
    out.write(msgspec.json.encode(plan).decode() + "\n")
    return EXIT_OK


def _goal(description: str, horizon: str) -> Goal:
    """The goal of `goals plan`, checked by the goal event's contract."""
    event = convert(GOAL_EVENT, {"event": "goal", "description": description, "horizon": horizon})
    assert isinstance(event, NewGoalEvent)
    return Goal(description=event.description, horizon=event.horizon)


def _context(needs: str | None) -> Circumstances:
    if needs is None:
        return Circumstances()
    try:
        value = parse(needs.encode())
    except MalformedJSON as error:
        raise UsageError(f"--needs: {error.message}") from None
    event = convert(GOAL_EVENT, {"event": "context", "needs": value})
    assert isinstance(event, ContextEvent)
    return Circumstances(needs=dict(event.needs or {}))


def _usage(error: ContractError) -> str:
    """A refused argument in one line: the first violation, named by its option."""
    first = error.violations[0]
    if first.pointer.startswith("/needs"):
        return f"--needs{first.pointer[len('/needs') :]}: {first.message}"
    return f"GOAL: {first.message}"
