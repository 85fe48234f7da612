"""The planning-block commands: think, choose, and `validate --mode` (which `normalize` shares)."""

from __future__ import annotations

import argparse
import json
import random
from contextlib import AbstractContextManager
from functools import partial
from pathlib import Path
from typing import Any, get_args

import msgspec

from ...generated import PLANNING_SESSION
from ...generated.planning_blocks import ParallelAnalysis, PlanningBlock, PlanningSession
from ..commandkit import (
    EXIT_INVALID,
    EXIT_OK,
    Output,
    RulesOption,
    add_json,
    add_max_bytes,
    add_model_options,
    bounded_int,
    label,
    model_choice,
    opened,
    read_at_most,
    reason,
    require_extra,
    run_trio,
    say,
    stdin_at_most_once,
    texts,
    unreadable,
    user_text,
    writer_extra,
)
from ..commandkit.progress import current_progress, showing_progress
from ..commandkit.state import Upgrade, holding_the_state, read_state, require_a_writable_folder
from ..core.errors import (
    ContractError,
    GenerationFailed,
    StreamError,
    UsageError,
    Violation,
)
from ..core.files import replace_file
from ..core.rules import Rules
from ..core.validation import decode
from .mechanics import (
    ABILITIES,
    AVERAGE_SCORE,
    DC_BOUNDS,
    MAX_SCORE,
    DcAdjustment,
    EarlyBreak,
    ParallelRoll,
    choice_dc,
    is_parallel,
    mode_of,
    roll_parallel,
    thaw,
    topic_key,
)
from .rules import PLANNING_BLOCK, rules_in
from .session import MINUTE, after_thought, may_think, new_session

__all__ = ["RULES_OPTIONS", "register"]

MODES = ("think", "story")
STORY_MINUTES = 10
"Game minutes a Story-mode turn of `think --state` takes unless `--minutes` says otherwise."
MAX_STORY_MINUTES = 525_600
"A year of game minutes: the most one turn may take."


def _add_mode(validate: argparse.ArgumentParser) -> None:
    validate.add_argument(
        "--mode",
        choices=MODES,
        help=f"{PLANNING_BLOCK.name} only: judge in Think mode (stricter) "
        "or Story mode (the default)",
    )


def _chosen_rules(args: argparse.Namespace, contract: str) -> Rules | None:
    if args.mode is None:
        return None
    if contract != PLANNING_BLOCK.name:
        raise UsageError(f"--mode applies to {PLANNING_BLOCK.name} only, not {contract}")
    return rules_in(args.mode)


RULES_OPTIONS = (RulesOption(_add_mode, _chosen_rules),)
"`validate --mode think|story`, `normalize --mode`: the planning protocol's rules in that mode."


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `think` and `choose`."""
    think = commands.add_parser(
        "think", help="write a planning block for a situation with the local model"
    )
    think.add_argument(
        "situations",
        metavar="SITUATION",
        type=user_text,
        nargs="+",
        help="the situation; a THINK: prefix means Think mode; - reads one per line",
    )
    think.add_argument(
        "--mode",
        choices=MODES,
        default="story",
        help="Think mode (the planning check is rolled) or Story mode (the default)",
    )
    for ability in ABILITIES:
        think.add_argument(
            f"--{ability.lower()}",
            type=bounded_int(1, MAX_SCORE),
            default=AVERAGE_SCORE,
            metavar="N",
            help=f"the character's {ability} score, 1 to {MAX_SCORE} (default {AVERAGE_SCORE})",
        )
    add_model_options(think, seed="seed of the sampling and the roll")
    think.add_argument(
        "--state",
        metavar="FILE",
        help="the planning session (game clock and frozen plans) to read before each "
        "situation and write after it; a missing FILE starts a new one",
    )
    think.add_argument(
        "--topic",
        metavar="TEXT",
        type=user_text,
        help="with --state, in Think mode: the topic a failed check freezes and a frozen "
        "one refuses (default: the situation)",
    )
    think.add_argument(
        "--lift",
        choices=get_args(EarlyBreak),
        help="with --state: lift the topic's freeze early, for this reason",
    )
    think.add_argument(
        "--minutes",
        type=bounded_int(1, MAX_STORY_MINUTES),
        default=STORY_MINUTES,
        metavar="N",
        help=f"with --state: game minutes a Story-mode turn takes (default {STORY_MINUTES})",
    )
    think.add_argument(
        "--calendar",
        metavar="START",
        help="with --state: the campaign's start as an ISO 8601 date and time, to upgrade a "
        "session whose frozen plans hold WorldArchitect's world-time strings",
    )
    think.add_argument(
        "--narrate",
        action="store_true",
        help="Story mode: write a whole story response (the narrative, then the block), "
        "a story-response document, not the block alone",
    )
    think.set_defaults(run=_think)

    _add_choose(commands)


def _add_choose(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    choose = commands.add_parser(
        "choose",
        help="take a choice of a planning block: its execution DC, or the parallel option's "
        "coordination check and outcome",
    )
    choose.add_argument("file", metavar="BLOCK", help="a planning-block JSON file, or - for stdin")
    choose.add_argument("key", metavar="KEY", type=user_text, help="the choice taken")
    choose.add_argument(
        "--base-dc",
        type=bounded_int(*DC_BOUNDS),
        metavar="N",
        help=f"the situation's DC for the choice ({DC_BOUNDS[0]} to {DC_BOUNDS[1]}); the "
        "parallel option's own base_dc or coordination_dc when it states one",
    )
    for ability in ABILITIES:
        choose.add_argument(
            f"--{ability.lower()}",
            type=bounded_int(1, MAX_SCORE),
            default=AVERAGE_SCORE,
            metavar="N",
            help=f"the character's {ability} score, 1 to {MAX_SCORE} (default {AVERAGE_SCORE}); "
            "the coordination check is rolled with the higher of the two",
        )
    choose.add_argument(
        "--seed", type=int, metavar="N", help="seed of the coordination roll, to repeat it"
    )
    add_json(choose, "one JSON object: the DC, the roll and each task's outcome")
    add_max_bytes(choose)
    choose.set_defaults(run=_choose)


def _choose(args: argparse.Namespace, out: Output) -> int:
    try:
        with opened(args.file) as stream:
            data = read_at_most(stream, args.max_bytes)
    except OSError as error:
        raise UsageError(f"{label(args.file)}: {unreadable(error)}") from None
    if isinstance(data, Violation):
        say(f"{label(args.file)}: {data.message}")
        return EXIT_INVALID
    try:
        block = decode(PLANNING_BLOCK, data)
    except ContractError as error:
        first, more = error.violations[0], len(error.violations) - 1
        say(
            f"{label(args.file)}: not a valid planning block: {label(str(first))}"
            + (f" (and {more} more; validate lists them)" if more else "")
        )
        return EXIT_INVALID
    if args.key not in block.choices:
        offered = ", ".join(block.choices)
        raise UsageError(f"{label(args.file)} offers no choice {label(args.key)!r}: {offered}")
    record: dict[str, Any] = {"choice": args.key, "parallel": is_parallel(args.key)}
    try:
        if not is_parallel(args.key):
            if args.base_dc is None:
                raise UsageError(f"{label(args.key)} is not the parallel option: give --base-dc N")
            dc = choice_dc(block, args.key, args.base_dc)
            line = f"{args.key}: execution DC {_dc_line(dc, 'base')}"
            record.update(_dc_record(dc))
        else:
            # Coordinating is planning on the move: the better planning ability rolls.
            stat = max(ABILITIES, key=lambda ability: getattr(args, ability.lower()))
            rolled = roll_parallel(
                block,
                args.key,
                stat_used=stat,
                stat_value=getattr(args, stat.lower()),
                rng=random.Random(args.seed),
                base_dc=args.base_dc,
            )
            line = rolled.describe()
            if rolled.dc.dc != rolled.dc.base_dc or rolled.dc.modifiers:
                line += f" [DC {_dc_line(rolled.dc, 'coordination DC')}]"
            # The check starts from the coordination DC, which the base DC only
            # leads to (2 per task beyond the first, the complexity): both are said.
            record["base_dc"] = _parallel_base_dc(block, args.key, args.base_dc)
            record["coordination_dc"] = rolled.dc.base_dc
            record.update({k: v for k, v in _dc_record(rolled.dc).items() if k != "base_dc"})
            record.update(_roll_record(rolled))
    except ValueError as error:  # a parallel option without a DC, or past the bounds
        raise UsageError(f"{label(args.key)}: {error}") from None
    out.write(json.dumps(record, ensure_ascii=False) + "\n" if args.json else label(line) + "\n")
    return EXIT_OK


def _parallel_base_dc(block: PlanningBlock, key: str, given: int | None) -> int | None:
    """The base DC the coordination DC of parallel option `key` came from, as `--json` says it.

    `given` (`--base-dc`) when there is one, else the option's own
    `analysis.base_dc`; None when the option states only its
    `coordination_dc`, which is then taken as it is.
    """
    if given is not None:
        return given
    analysis = block.choices[key].analysis
    if isinstance(analysis, ParallelAnalysis) and isinstance(analysis.base_dc, int):
        return analysis.base_dc
    return None


def _dc_line(dc: DcAdjustment, base: str) -> str:
    """`13 (base 15, recommended approach -2)`: the DC, and what moved it from `base`."""
    moved = "".join(f", {m.reason} {m.change:+d}" for m in dc.modifiers)
    capped = "" if dc.dc - dc.base_dc == sum(m.change for m in dc.modifiers) else ", capped"
    return f"{dc.dc} ({base} {dc.base_dc}{moved}{capped})"


def _dc_record(dc: DcAdjustment) -> dict[str, Any]:
    return {
        "base_dc": dc.base_dc,
        "modifiers": [{"reason": m.reason, "change": m.change} for m in dc.modifiers],
        "dc": dc.dc,
    }


def _roll_record(rolled: ParallelRoll) -> dict[str, Any]:
    check, outcome = rolled.check, rolled.outcome
    return {
        "stat_used": check.stat_used,
        "stat_value": check.stat_value,
        "d20": check.d20,
        "modifier": check.modifier,
        "roll_result": check.roll_result,
        "margin": check.outcome.margin,
        "success": check.outcome.success,
        "result": outcome.result,
        "tasks": dict(outcome.tasks),
        # Exact fractions of the protocol's tables, as JSON numbers: 5/4 is 1.25.
        "time_factor": float(outcome.time_factor),
        "xp_multiplier": float(outcome.xp_multiplier),
    }


def _think(args: argparse.Namespace, out: Output) -> int:
    with showing_progress("think", out):
        return _think_with(args, out)


def _think_with(args: argparse.Namespace, out: Output) -> int:
    require_extra(writer_extra(args), "think")
    from ..model.choice import load_writer
    from .agent import Thinker

    stdin_at_most_once(args.situations)
    for text in args.situations:
        if text != "-" and not mode_of(text, args.mode)[1]:
            raise UsageError(f"an empty situation: {label(text)!r}")
    if args.narrate:
        if args.mode == "think":
            raise UsageError("--narrate writes Story mode's response: not with --mode think")
        for text in args.situations:
            if text != "-" and mode_of(text)[0] == "think":
                raise UsageError(
                    f"--narrate writes Story mode's response: {label(text[:80])!r} "
                    "is Think mode (THINK:)"
                )
    if args.state is None and (args.topic or args.lift or args.calendar):
        raise UsageError(
            "--topic, --lift and --calendar apply to a planning session: give --state FILE"
        )
    session = None
    if args.state is not None:
        with _turn(args.state):  # an old session is upgraded on open, under the file's lock
            session = _read_session(args.state, upgrade=True, calendar=args.calendar)
    thinker: Thinker | None = None  # loaded for the first situation that needs it
    abilities = {ability: getattr(args, ability.lower()) for ability in ABILITIES}
    status = EXIT_OK
    for situation in texts(args.situations):
        with _turn(args.state):
            if args.state is not None:
                # Read again under the lock: another run may have taken turns since.
                session = _read_session(args.state)
            mode, text = mode_of(situation, args.mode)
            if args.narrate and mode == "think":  # a line of standard input
                say(f"no response for {label(situation[:80])!r}: --narrate is Story mode's")
                status = EXIT_INVALID
                continue
            topic = topic_key(args.topic or text)
            if session is not None and mode == "think":
                breaks = [args.lift] if args.lift else []
                verdict, session = may_think(session, topic, breaks=breaks)
                if not verdict.allowed:
                    say(f"not thinking about {topic} again yet: {verdict.describe()}")
                    status = EXIT_INVALID
                    continue
            if thinker is None:
                with current_progress().doing("loading the model"):
                    writer = load_writer(model_choice(args), needs="planning blocks need one")
                thinker = Thinker(writer)
            elapsed = args.minutes * MINUTE if mode == "story" else None
            document: msgspec.Struct
            try:
                if args.narrate:
                    # The response carries the frozen plans still running once its turn is over.
                    after = None
                    if session is not None:
                        after = thaw(session.frozen_plans, session.time + args.minutes * MINUTE)
                    narration = run_trio(
                        partial(thinker.narrate, situation, seed=args.seed, frozen_plans=after)
                    )
                    thought, document = narration.as_thought(), narration.response
                else:
                    thought = run_trio(
                        partial(
                            thinker.think, situation, args.mode, abilities=abilities, seed=args.seed
                        )
                    )
                    document = thought.block
            except (GenerationFailed, ValueError) as failure:  # ValueError: an empty situation
                what = "response" if args.narrate else "block"
                say(f"no {what} for {label(situation[:80])!r}: {label(str(failure))}")
                status = EXIT_INVALID
                continue
            if session is not None and args.state is not None:
                session, frozen = after_thought(session, thought, topic, elapsed=elapsed)
                _write_session(args.state, session)
                if frozen is not None:
                    hours = frozen.freeze_hours
                    thinker.say(f"think: {topic} is frozen for {hours} h of game time")
            out.write(msgspec.json.encode(document).decode() + "\n")
            out.flush()
    return status


def _read_session(
    name: str, *, upgrade: bool = False, calendar: str | None = None
) -> PlanningSession:
    """The planning session in file `name`, or a new one when there is no such file.

    With `upgrade` (the caller holds the file's lock), a session an older
    version stored is migrated and written back, the old kept beside it
    (`calendar` is the steps' option). Raises UsageError and StreamError as
    `read_state` does, and UsageError when the file's folder cannot be
    written in (said before the model loads: the session is written after
    each situation).
    """
    require_a_writable_folder(name)
    options = {} if calendar is None else {"calendar": calendar}
    chosen: Upgrade = "in place" if upgrade else "never"
    session = read_state(
        name, PLANNING_SESSION, "a planning session", upgrade=chosen, options=options
    )
    return new_session() if session is None else session


def _write_session(name: str, session: PlanningSession) -> None:
    """Replace file `name` with `session`, checked against its contract first, atomically.

    The new text is written to a file made exclusively beside it and renamed
    over it, so a reader (or a crash) sees the old session or the new one,
    never half, and two runs never write one temporary file. Raises StreamError.
    """
    data = msgspec.json.encode(session)
    decode(PLANNING_SESSION, data)  # a session this command made breaks no rule: a bug if so
    try:
        replace_file(Path(name), data + b"\n")
    except OSError as error:
        raise StreamError(f"cannot write the session to {label(name)}: {reason(error)}") from None


def _turn(name: str | None) -> AbstractContextManager[None]:
    """Hold the lock of state file `name` (none when None) for one turn's read-modify-write.

    Two runs keeping one session take their turns one after the other, each
    reading the session the other wrote, so neither loses a turn: a check
    that the file did not change would refuse the second run's turn after
    its model had written it. Raises StreamError when the lock cannot be had.
    """
    return holding_the_state(name, "another run is taking a turn")
