"""The planning-block commands: think, normalize, and `validate --mode`."""

from __future__ import annotations

import argparse
import json
from functools import partial
from typing import Any

import msgspec

from ..cli.base import (
    EXIT_INVALID,
    EXIT_OK,
    Output,
    UsageError,
    json_for_people,
    json_name,
    label,
    say,
    to_stderr,
)
from ..cli.extras import require_extra
from ..cli.inputs import opened, read_at_most, stdin_at_most_once, texts, unreadable
from ..cli.options import RulesOption, add_json, add_max_bytes, add_model_options, bounded_int
from ..cli.reports import violations_as_json
from ..cli.signals import run_trio
from ..core.contracts import root_type
from ..core.errors import ContractError, Violation, Violations
from ..core.rules import Rules
from ..core.validation import parse_document
from .blocks import ABSENT, Normalized, normalize_block
from .mechanics import ABILITIES, AVERAGE_SCORE, MAX_SCORE, mode_of
from .rules import PLANNING_BLOCK, rules_in

__all__ = ["RULES_OPTIONS", "register"]

MODES = ("think", "story")


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
"`validate --mode think|story`: the planning protocol's rules in that mode."


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `think` and `normalize`."""
    think = commands.add_parser(
        "think", help="write a planning block for a situation with the local model"
    )
    think.add_argument(
        "situations",
        metavar="SITUATION",
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
    think.set_defaults(run=_think)

    normalize = commands.add_parser(
        "normalize",
        help="repair what the planning protocol allows in a planning block, reporting each repair",
    )
    normalize.add_argument("contract", metavar="CONTRACT", help=PLANNING_BLOCK.name)
    normalize.add_argument("file", metavar="FILE", help="a JSON file, or - for stdin")
    normalize.add_argument(
        "--mode", choices=MODES, default="story", help="the mode to judge the result in"
    )
    add_json(normalize, "one JSON object: repairs, errors and the block")
    add_max_bytes(normalize)
    normalize.set_defaults(run=_normalize)


def _think(args: argparse.Namespace, out: Output) -> int:
    require_extra("model", "think")
    from ..model.generation import GenerationFailed, NoModel
    from .thinking import Thinker

    stdin_at_most_once(args.situations)
    for text in args.situations:
        if text != "-" and not mode_of(text, args.mode)[1]:
            raise UsageError(f"an empty situation: {label(text)!r}")
    try:
        thinker = Thinker.start(args.model, download=not args.no_download)
    except NoModel as error:
        say(str(error))
        return EXIT_INVALID
    abilities = {ability: getattr(args, ability.lower()) for ability in ABILITIES}
    status = EXIT_OK
    for situation in texts(args.situations):
        think = partial(thinker.think, situation, args.mode, abilities=abilities, seed=args.seed)
        try:
            thought = run_trio(think)
        except (GenerationFailed, ValueError) as failure:  # ValueError: an empty situation
            say(f"no block for {label(situation[:80])!r}: {label(str(failure))}")
            status = EXIT_INVALID
            continue
        out.write(msgspec.json.encode(thought.block).decode() + "\n")
        out.flush()
    return status


def _normalize(args: argparse.Namespace, out: Output) -> int:
    root_type(args.contract)
    if args.contract != PLANNING_BLOCK.name:
        raise UsageError(
            f"only {PLANNING_BLOCK.name} documents can be normalized, not {args.contract}"
        )
    try:
        with opened(args.file) as stream:
            data = read_at_most(stream, args.max_bytes)
    except OSError as error:
        data = Violation("", unreadable(error))
    result: Normalized | None = None
    if isinstance(data, Violation):
        problems = Violations((data,))
    else:
        try:
            result = normalize_block(parse_document(PLANNING_BLOCK, data), args.mode)
            problems = result.violations
        except ContractError as error:  # not JSON at all
            problems = error.violations
    repairs = result.repairs if result else ()
    if args.json:
        record: dict[str, Any] = {"file": json_name(args.file), "valid": not problems}
        record["repairs"] = [
            {
                "pointer": r.pointer,
                **({} if r.before is ABSENT else {"before": r.before}),
                "after": r.after,
                "reason": r.reason,
            }
            for r in repairs
        ]
        record.update(violations_as_json(problems))
        record["block"] = result.block if result else None
        # Written from a shallower frame than the parse, so as deep as it accepted.
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        return EXIT_INVALID if problems else EXIT_OK
    name = label(args.file)
    if result is not None:
        to_stderr(f"{name}: {len(repairs)} repair{'s' if len(repairs) != 1 else ''}\n")
    for repair in repairs:
        to_stderr(f"  {label(str(repair))}\n")
    if problems:
        verdict = "still invalid" if result is not None else "cannot be read"
        to_stderr(f"{name}: {verdict} ({problems.summary()}), so nothing is printed\n")
        for violation in problems:
            to_stderr(f"  {label(str(violation))}\n")
        return EXIT_INVALID
    assert result is not None
    out.write(json_for_people(msgspec.json.encode(result.block)) + "\n")
    return EXIT_OK
