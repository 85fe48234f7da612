"""The tool-plan commands: execute a plan, plan player input, play turn after turn."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import partial
from typing import TYPE_CHECKING, Any

import msgspec

from ...generated import PLAN
from ...generated.tool_plans import ExecutionResult, Plan, PlanAttempt, UiEvent
from ..commandkit import (
    DEFAULT_MAX_BYTES,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    Output,
    RulesOption,
    add_json,
    add_model_options,
    add_skill_options,
    bounded_int,
    json_for_people,
    label,
    model_choice,
    opened,
    positive_int,
    read_at_most,
    reason,
    require_extra,
    run_trio,
    say,
    seconds,
    standard_input,
    standard_lines,
    stdin_at_most_once,
    texts,
    to_stderr,
    unreadable,
    user_text,
    writer_extra,
)
from ..commandkit.progress import current_progress, showing_progress
from ..core.errors import ContractError, StreamError, UsageError, Violation, Violations, printable
from ..core.validation import decode
from ..engine.limits import MAX_GENERATIONS
from ..engine.skills import SkillSet

if TYPE_CHECKING:
    from .agent import Planner
    from .narrator import Turn

__all__ = ["RULES_OPTIONS", "register"]

RULES_OPTIONS: tuple[RulesOption, ...] = ()
"The family's rules (`rules.py`) have no variants to choose between."


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `execute`, `plan` and `play`."""
    execute = commands.add_parser(
        "execute", help="run a plan with skills and print its execution result"
    )
    execute.add_argument("plan", metavar="PLAN", help="a plan JSON file, or - for stdin")
    add_skill_options(execute)
    add_json(execute, "the execution-result document itself")
    execute.add_argument(
        "--concurrency", type=positive_int, metavar="N", help="most tools at once (default: CPUs)"
    )
    execute.add_argument(
        "--timeout", type=seconds, default=60.0, metavar="S", help="plan deadline (default 60)"
    )
    execute.add_argument(
        "--grace",
        type=seconds,
        default=5.0,
        metavar="S",
        help="wait between SIGTERM and SIGKILL when stopping a script (default 5)",
    )
    execute.set_defaults(run=_execute)

    plan = commands.add_parser(
        "plan", help="write a plan for player input with the local model (or the patterns)"
    )
    plan.add_argument(
        "inputs",
        metavar="TEXT",
        type=user_text,
        nargs="+",
        help="player input; - reads one input per line",
    )
    plan.add_argument(
        "--execute",
        action="store_true",
        help="run each plan with the replan loop and print the narration (traces on stderr)",
    )
    play = commands.add_parser("play", help="play turn after turn, reading actions from stdin")
    for command in (execute, plan, play):
        command.add_argument(
            "-v",
            "--verbose",
            action="count",
            default=0,
            help="show the tools' info log events in the trace (-vv: debug too); "
            "error events and warn and error logs are always shown",
        )
    for command in (plan, play):
        add_model_options(command, seed="sampling seed, for repeatable plans")
        add_skill_options(command)
        command.add_argument(
            "--plans",
            type=bounded_int(1, MAX_GENERATIONS),
            default=MAX_GENERATIONS,
            metavar="N",
            help=f"most plans written for one input before the narrator gives up "
            f"(1 to {MAX_GENERATIONS}, default {MAX_GENERATIONS})"
            + (" (with --execute)" if command is plan else ""),
        )
        command.add_argument(
            "--log",
            metavar="FILE",
            help="append each plan attempt's plan-attempt record to FILE, one JSON line each"
            + (" (with --execute)" if command is plan else ""),
        )
    plan.set_defaults(run=_plan)
    play.set_defaults(run=_play)


# execute ------------------------------------------------------------------------


def _execute(args: argparse.Namespace, out: Output) -> int:
    from ..engine.executor import default_data_root, execute_plan
    from ..engine.limits import Limits
    from ..engine.trace import render_trace

    plan = _read_plan(args.plan)
    if isinstance(plan, Violations):
        to_stderr(f"{label(args.plan)}: not a usable plan, so nothing ran:\n")
        for violation in plan:
            to_stderr(f"  {label(str(violation))}\n")
        return EXIT_USAGE
    skills = _skills(args)
    concurrency = {"max_concurrency": args.concurrency} if args.concurrency else {}
    limits = Limits(plan_timeout=args.timeout, shutdown_grace=args.grace, **concurrency)
    result: ExecutionResult = run_trio(
        partial(
            execute_plan,
            plan,
            skills=skills,
            limits=limits,
            data_root=args.data or default_data_root(),
        )
    )
    if args.json:
        out.write(json_for_people(msgspec.json.encode(result)) + "\n")
    else:
        out.write(render_trace(result, verbosity=args.verbose))
    if result.error:
        return EXIT_USAGE
    return EXIT_OK if result.success else EXIT_INVALID


def _read_plan(name: str) -> Plan | Violations:
    """The plan in file `name` (or stdin for -), or the violations that say why there is none.

    Raises `UsageError`, in one line, when a named file cannot be read.
    """
    try:
        with opened(name) as stream:
            data = read_at_most(stream, DEFAULT_MAX_BYTES, option=None)
    except OSError as error:
        if name != "-":  # as in every command (docs/contracts.md#a-file-that-cannot-be-read)
            raise UsageError(f"{label(name)}: {unreadable(error)}") from None
        data = Violation("", unreadable(error))
    if isinstance(data, Violation):
        return Violations((data,))
    try:
        plan: Plan = decode(PLAN, data)
    except ContractError as error:
        return error.violations
    return plan


# plan, play ---------------------------------------------------------------------


def _plan(args: argparse.Namespace, out: Output) -> int:
    with showing_progress("plan", out):
        return _plan_with(args, out)


def _plan_with(args: argparse.Namespace, out: Output) -> int:
    require_extra(writer_extra(args), "plan")
    stdin_at_most_once(args.inputs)
    for text in args.inputs:
        if not text.strip():
            raise UsageError(f"an empty player input: {label(text)!r}")
    if args.log is not None and not args.execute:
        raise UsageError("--log records executed plans: give --execute too")
    with _attempt_log(args.log) as log:
        planner = _planner(args)
        if not args.execute and _served(planner):
            run_trio(partial(_plan_at_once, planner, texts(args.inputs), args, out))
            return EXIT_OK
        for player_input in texts(args.inputs):
            if args.execute:
                turn, _ = _turn(planner, player_input, args, out, state={}, log=log)
                if turn.fell_back:
                    say(f"the narrator gave up: {turn.why_it_fell_back}")
            else:
                plan = run_trio(partial(planner.plan, player_input, seed=args.seed))
                out.write(msgspec.json.encode(plan).decode() + "\n")
            out.flush()
    return EXIT_OK


def _served(planner: Planner) -> bool:
    from ..model.served import ServedModel

    return isinstance(planner.writer, ServedModel)


async def _plan_at_once(
    planner: Planner, inputs: Iterator[str], args: argparse.Namespace, out: Output
) -> None:
    """Plan `inputs` concurrently against a model server; print each plan in input order.

    The server's pool (`--in-flight`) bounds the requests out at once; the
    inputs read ahead are bounded too (twice as many), so a long stdin is
    never read whole into memory. A plan is printed as soon as it and every
    plan before it are done.
    """
    import trio

    ahead = trio.Semaphore(2 * args.in_flight)
    done: dict[int, Plan] = {}
    printed = 0

    async def plan_one(index: int, player_input: str) -> None:
        nonlocal printed
        try:
            done[index] = await planner.plan(player_input, seed=args.seed)
        finally:
            ahead.release()
        while printed in done:
            out.write(msgspec.json.encode(done.pop(printed)).decode() + "\n")
            printed += 1
        out.flush()

    async with trio.open_nursery() as nursery:
        index = 0
        while True:
            await ahead.acquire()
            # Read in a thread: a terminal's next line may take long to come.
            player_input = await trio.to_thread.run_sync(next, inputs, None, abandon_on_cancel=True)
            if player_input is None:
                return
            nursery.start_soon(plan_one, index, player_input)
            index += 1


def _play(args: argparse.Namespace, out: Output) -> int:
    require_extra(writer_extra(args), "play")
    standard_input()  # closed: say so before the model loads
    with _attempt_log(args.log) as log, showing_progress("play", out):
        return _play_with(args, out, log)


def _play_with(args: argparse.Namespace, out: Output, log: AttemptLog | None) -> int:
    planner = _planner(args)
    lines = standard_lines()
    state: dict[str, Any] = {}
    choices: list[str] = []
    off: list[str] = []  # skills turned off for the session: those of turns that gave up
    out.write("Type what you do; an empty line or end of input ends the game.\n")
    text: str | None = None  # an input to play without asking: a retry, or an action typed
    while True:
        if text is None:
            out.write("> ")
            out.flush()
            line = next(lines, "")
            if not line.strip():
                out.write("\n")
                return EXIT_OK
            text = line.strip()
            # isdigit() alone admits digits int() refuses, such as "²".
            if text.isascii() and text.isdigit() and 1 <= int(text) <= len(choices):
                text = choices[int(text) - 1]
                out.write(f"({text})\n")
        turn, choices = _turn(planner, text, args, out, state, log=log, disabled=off)
        if not turn.fell_back:
            text = None
            continue
        off = sorted(set(off) | set(turn.disabled))
        out.write(f"(the narrator gave up: {printable(turn.why_it_fell_back or '')})\n")
        recovery = _recovery(out, lines, text, off)
        if recovery is _END:
            out.write("\n")
            return EXIT_OK
        text = recovery


_END = "\0end"
"What `_recovery` returns when the player ends the game."


def _recovery(out: Output, lines: Iterator[str], failed: str, off: list[str]) -> str | None:
    """Ask how to go on after a turn gave up: the input to play next, None to skip, or `_END`.

    `retry` plays `failed` again; `enable SKILL` turns a skill of `off` back on
    (changing `off`) and plays it again; `skip` goes back to the prompt; an
    empty line ends the game, and any other line is played as the next action.
    """
    while True:
        listed = ", ".join(off) or "none"
        out.write(
            f"Skills off for this session: {listed}. "
            "Type retry, skip, enable SKILL, or your next action.\n? "
        )
        out.flush()
        answer = " ".join(next(lines, "").split())
        command, _, name = answer.partition(" ")
        if not answer:
            return _END
        if answer == "retry":
            return failed
        if answer == "skip":
            return None
        if command != "enable":
            return answer
        if name in off:
            off.remove(name)
            return failed
        out.write(f"no skill named {printable(name)!r} is off\n")


AttemptLog = Callable[[PlanAttempt], None]


@contextmanager
def _attempt_log(name: str | None) -> Iterator[AttemptLog | None]:
    """The writer of `--log FILE`: each attempt's record appended as one JSON line, flushed.

    Opened before the model loads, so a file that cannot be opened is a
    usage error (exit 2) at once; a write that fails ends the command with
    one line (exit 1).
    """
    if name is None:
        yield None
        return
    try:
        stream = open(name, "ab")  # noqa: SIM115 (closed below, once the command is done)
    except OSError as error:
        raise UsageError(f"cannot open the log {label(name)}: {reason(error)}") from None

    def write(record: PlanAttempt) -> None:
        try:
            stream.write(msgspec.json.encode(record) + b"\n")
            stream.flush()
        except OSError as error:
            raise StreamError(f"cannot write to the log {label(name)}: {reason(error)}") from None

    try:
        yield write
    finally:
        with suppress(OSError):
            stream.close()


def _planner(args: argparse.Namespace) -> Planner:
    from ..model.choice import load_first_writer
    from .agent import Planner

    with current_progress().doing("loading the model"):
        writer = load_first_writer(model_choice(args))
    return Planner(writer, _skills(args))


def _skills(args: argparse.Namespace) -> SkillSet:
    """The skills of `--skills` (default: the bundled ones), warning of each one skipped."""
    from ..engine.skills import bundled_skills, discover_skills

    skills = discover_skills(args.skills) if args.skills else bundled_skills()
    for problem in skills.problems:
        say(f"warning: {label(problem)}")
    return skills


def _turn(
    planner: Planner,
    text: str,
    args: argparse.Namespace,
    out: Output,
    state: dict[str, Any],
    *,
    log: AttemptLog | None,
    disabled: Sequence[str] = (),
) -> tuple[Turn, list[str]]:
    """Play one turn: narration, a trace per attempt; the turn and the choices offered."""
    from ..engine.executor import default_data_root, merge_patch
    from ..engine.trace import render_trace
    from .narrator import choice_line, play_turn

    offered: list[str] = []

    def on_ui_event(tool_id: str, event: UiEvent) -> None:
        payload = event.payload if isinstance(event.payload, dict) else {}
        found = payload.get("choices") if event.event == "narrative_choice" else None
        if isinstance(found, list):
            offered.extend(str(choice) for choice in found)

    turn = run_trio(
        partial(
            play_turn,
            text,
            planner,
            state=state,
            data_root=args.data or default_data_root(),
            on_ui_event=on_ui_event,
            on_attempt=log,
            seed=args.seed,
            max_generations=args.plans,
            disabled=disabled,
        )
    )
    for attempt in turn.attempts:
        to_stderr(printable(choice_line(attempt.plan)) + "\n")
        to_stderr(render_trace(attempt.result, verbosity=args.verbose))
    out.write(printable(turn.narration) + "\n")
    for number, choice in enumerate(offered, 1):
        out.write(f"  {number}. {printable(choice)}\n")
    merge_patch(state, turn.state)
    return turn, offered
