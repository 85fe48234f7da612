"""`plancontracts story play PACKAGE`: a finished package played, choice by choice.

The play itself is `play` (pure functions); this module reads the package
and the choices, writes each state, and keeps the playthrough in a file.

On a pipe, standard input holds one choice per line, as NDJSON:
`{"choose": N}` (the number an offer was printed with), `{"choose": ID}` (an
encounter's, location's or event's id) or `{"choose": {"kind": K, "id": ID}}`
(as the playthrough's log writes it). Each state is printed as one line,
`{"state": PLAYTHROUGH, "choices": N, "offered": [...], "happened": [...]}`,
the first before any choice, the state without its log (only `--full-state`
prints it: a line would otherwise grow with every choice made, and the
output with their square); a choice refused is one line `{"line": N,
"refused": MESSAGE}`, the state unchanged, and play goes on (the exit status
is then 1). Play stops when the story ends or the input does.

On a terminal, the state is a short summary and a numbered menu; a number or
an id chooses, an empty line or end of input leaves.

`--state FILE` resumes the playthrough kept there (after checking that it is
one of this package, and that its log replays to it) or starts a new one, and
replaces the file with the state, atomically, under the file's lock: on a
pipe, once the choices since the last save number a sixteenth of the log
saved then, and always when play stops, so the bytes written stay linear in
the choices; on a terminal, after every choice. A file
an older version of the contract wrote is upgraded on open, as `think
--state` upgrades its session.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET

from ...generated import STORY_PACKAGE, STORY_PLAYTHROUGH
from ...generated.story_packages import Choice, StoryPackage, StoryPlaythrough
from ..commandkit import (
    EXIT_INVALID,
    EXIT_OK,
    Output,
    add_max_bytes,
    complain,
    label,
    lines_of,
    opened,
    read_at_most,
    reason,
    standard_input,
    standard_lines,
    unreadable,
)
from ..commandkit.state import holding_the_state, read_state
from ..core.errors import (
    ContractError,
    MalformedJSON,
    PlayRefused,
    StreamError,
    UsageError,
    Violation,
    printable,
    shown,
)
from ..core.files import replace_file
from ..core.jsontext import parse
from ..core.validation import decode
from .play import Offer, choose, happenings, offered, resolve, resumed, start

__all__ = ["CHOICE_SHAPE", "add_play"]

CHOICE_SHAPE = '{"choose": N or ID or {"kind": K, "id": ID}}'
"What a line of choices holds."

_KINDS = ("encounter", "move", "event")


def add_play(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `story play` to the `story` group."""
    play = group.add_parser(
        "play",
        help="play a finished story package as its Director would: choices as NDJSON on "
        "stdin (a numbered menu on a terminal), each state printed as NDJSON",
    )
    play.add_argument(
        "package", metavar="PACKAGE", help="a finalized story-package JSON file to play"
    )
    play.add_argument(
        "--state",
        metavar="FILE",
        help="a story-playthrough file: resumed when it exists, and every state saved to it",
    )
    play.add_argument(
        "--full-state",
        action="store_true",
        help="print each state with its log of every choice made, not only their count "
        "(the output then grows with the square of the choices)",
    )
    add_max_bytes(play, "the package or a line of choices")
    play.set_defaults(run=_play)


def _play(args: argparse.Namespace, out: Output) -> int:
    if args.package == "-":
        raise UsageError("PACKAGE must be a file: standard input carries the choices")
    package = _package(args.package, args.max_bytes)
    if package is None:
        return EXIT_INVALID
    with holding_the_state(args.state, "another play holds it"):
        state = start(package) if args.state is None else _read_state(args.state, package)
        _save(args.state, state)
        if standard_input().isatty():
            return _menu(package, state, args.state, out)
        return _lines(package, state, args.state, args.max_bytes, args.full_state, out)


def _package(name: str, limit: int) -> StoryPackage | None:
    """The finalized package in file `name`, or None once it said in one line why there is none.

    Raises UsageError when the file cannot be read, as every command does;
    a package that is not JSON, breaks its contract or its rules, is one
    line on standard error, as `validate` judges it (exit status 1).
    """
    try:
        with opened(name) as stream:
            data = read_at_most(stream, limit)
    except OSError as error:
        raise UsageError(f"{label(name)}: {unreadable(error)}") from None
    if isinstance(data, Violation):
        complain(f"{label(name)}: {data.message}")
        return None
    try:
        package: StoryPackage = decode(STORY_PACKAGE, data)
    except ContractError as error:
        problems = error.violations
        complain(
            f"{label(name)}: not a finalized story-package ({problems.summary()}), "
            f"the first: {problems[0]}; `plancontracts validate story-package` lists them all"
        )
        return None
    return package


# Choices on a pipe -------------------------------------------------------------------


def _lines(
    package: StoryPackage,
    state: StoryPlaythrough,
    keep: str | None,
    limit: int,
    full: bool,
    out: Output,
) -> int:
    """Play the NDJSON choices of standard input, printing each state; the exit status.

    The state file `keep` is saved when the choices since its last save
    reach a sixteenth of the log saved then (so the saves' sizes make a
    geometric series: the bytes written are at most 17 times the last
    file's), and when play stops for any reason, an error included.
    Raises StreamError when standard input cannot be read or the state
    cannot be saved.
    """
    status = EXIT_OK
    _print(out, _record(package, state, state, full))
    if state.ended is not UNSET:
        return status
    stream = standard_input().buffer
    saved = len(state.log)  # the caller saved the state play starts from
    try:
        for number, line in lines_of(stream, limit):
            try:
                wanted = _wanted(line)
                after = choose(package, state, resolve(package, state, wanted))
            except PlayRefused as refusal:
                _print(out, {"line": number, "refused": str(refusal)})
                status = EXIT_INVALID
                continue
            if len(after.log) - saved >= max(1, saved // 16):
                _save(keep, after)
                saved = len(after.log)
            _print(out, _record(package, state, after, full))
            state = after
            if state.ended is not UNSET:
                break
    except OSError as error:
        raise StreamError(f"cannot read standard input: {reason(error)}") from None
    finally:
        if len(state.log) != saved:
            _save(keep, state)
    return status


def _wanted(line: bytes | Violation) -> int | str | Choice:
    """What a line of choices names; PlayRefused, in one line, when it is no choice."""
    if isinstance(line, Violation):
        raise PlayRefused(line.message)
    try:
        value = parse(line)
    except MalformedJSON as error:
        raise PlayRefused(error.message) from None
    if not isinstance(value, dict) or set(value) != {"choose"}:
        raise PlayRefused(f"a line of choices is {CHOICE_SHAPE}")
    wanted = value["choose"]
    if isinstance(wanted, int) and not isinstance(wanted, bool):
        return wanted
    if isinstance(wanted, str):
        return wanted
    if isinstance(wanted, dict) and set(wanted) == {"kind", "id"}:
        kind, name = wanted["kind"], wanted["id"]
        if kind in _KINDS and isinstance(name, str):
            return Choice(kind=kind, id=name)
        raise PlayRefused(f"a choice's kind is one of {', '.join(_KINDS)}, and its id a string")
    raise PlayRefused(f"{shown(wanted)} names no choice: a line of choices is {CHOICE_SHAPE}")


def _record(
    package: StoryPackage, before: StoryPlaythrough, after: StoryPlaythrough, full: bool
) -> dict[str, Any]:
    """The line printed for state `after`: with its log only when `full`, since that grows."""
    shown_state: Any = after
    if not full:
        shown_state = msgspec.to_builtins(msgspec.structs.replace(after, log=[]))
        del shown_state["log"]
    return {
        "state": shown_state,
        "choices": len(after.log),
        "offered": [
            {
                "number": number,
                "kind": offer.choice.kind,
                "id": offer.choice.id,
                "title": offer.title,
                "detail": offer.detail,
            }
            for number, offer in enumerate(offered(package, after), 1)
        ],
        "happened": happenings(package, before, after),
    }


def _print(out: Output, record: dict[str, Any]) -> None:
    out.write(msgspec.json.encode(record).decode() + "\n")
    out.flush()  # a program driving the play reads each state before its next choice


# Choices on a terminal ---------------------------------------------------------------


def _menu(package: StoryPackage, state: StoryPlaythrough, keep: str | None, out: Output) -> int:
    """Play from a terminal: a summary and a numbered menu, a number or an id typed."""
    lines = standard_lines()
    before = state
    while True:
        for happened in happenings(package, before, state):
            out.write(f"* {printable(happened)}\n")
        out.write("\n".join(_summary(package, state)) + "\n")
        if state.ended is not UNSET:
            return EXIT_OK
        choices = offered(package, state)
        for number, offer in enumerate(choices, 1):
            out.write(f"  {number}. {_shown_offer(offer)}\n")
        while True:
            out.write("> ")
            out.flush()
            typed = next(lines, "").strip()
            if not typed:
                out.write("\n")
                return EXIT_OK
            wanted: int | str = int(typed) if typed.isascii() and typed.isdigit() else typed
            try:
                after = choose(package, state, resolve(package, state, wanted))
            except PlayRefused as refusal:
                out.write(f"{printable(str(refusal))}\n")
                continue
            break
        _save(keep, after)
        before, state = state, after


def _summary(package: StoryPackage, state: StoryPlaythrough) -> Iterator[str]:
    index = len(state.acts) - 1
    act = package.plot.acts[index]
    now = state.acts[-1]
    yield f"{printable(act.title)} (act {index + 1} of {len(package.plot.acts)}): " + printable(
        act.objective
    )
    where = next(place for place in act.sandbox_locations if place.id == state.location)
    trackers = []
    if act.global_progression is not UNSET:
        tracker = act.global_progression
        trackers.append(f"{tracker.tracker_label} {now.progression}/{tracker.required_value}")
    if act.opposing_force is not UNSET:
        clock = act.opposing_force
        trackers.append(f"{clock.tracker_label} {now.doom}/{clock.required_value}")
    yield printable(f"At {where.title}." + (f" {'; '.join(trackers)}" if trackers else ""))
    if state.ended is not UNSET:
        yield f"The story has ended (by {state.ended})."


def _shown_offer(offer: Offer) -> str:
    kind = offer.choice.kind
    text = {
        "encounter": offer.title,
        "move": f"go to {offer.title}",
        "event": f"fire: {offer.title}",
    }
    detail = f" ({offer.detail})" if offer.detail else ""
    return printable(text[kind] + detail)


# The playthrough file ---------------------------------------------------------------


def _read_state(name: str, package: StoryPackage) -> StoryPlaythrough:
    """The playthrough kept in file `name`, checked against `package`; a new one when none is.

    The caller holds the file's lock: a playthrough an older version stored
    is upgraded and written back, the old kept beside it. Raises UsageError,
    in one line, when the file cannot be read, is no playthrough, or is one
    of another package (or one its log does not lead to); StreamError when
    an upgrade cannot be written.
    """
    state = read_state(name, STORY_PLAYTHROUGH, "a story playthrough")
    if state is None:
        return start(package)
    try:
        return resumed(package, state)
    except PlayRefused as refusal:
        raise UsageError(f"--state {label(name)}: {refusal}") from None


def _save(name: str | None, state: StoryPlaythrough) -> None:
    """Replace file `name` (nothing when None) with `state`, whole or not at all; StreamError."""
    if name is None:
        return
    try:
        replace_file(Path(name), msgspec.json.encode(state) + b"\n")
    except OSError as error:
        raise StreamError(
            f"cannot write the playthrough to {label(name)}: {reason(error)}"
        ) from None
