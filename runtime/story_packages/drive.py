"""`story tools` and `story drive`: the tools for an outside agent, and the model as co-author.

`story tools` prints the tools' definitions for function calling, as
`session tools` does for the planning tools. `story drive PREMISE` lets the
model choose each call (`agent.Driver`), printing one NDJSON line per call as
`story run` does, then the package once finalized; `--db PATH` keeps the
draft after every successful call, and `--db PATH --session ID` goes on with
a draft saved there, the model reading the story so far from it; `--out DIR`
saves the finalized package as `DIR/<package id>.json`.
"""

from __future__ import annotations

import argparse
import json
from contextlib import ExitStack
from functools import partial
from pathlib import Path

import msgspec

from ...generated.story_packages import StoryDraft
from ..commandkit import (
    EXIT_INVALID,
    EXIT_OK,
    Output,
    add_model_options,
    bounded_int,
    label,
    model_choice,
    outcome,
    require_extra,
    run_trio,
    say,
    user_text,
    writer_extra,
)
from ..commandkit.progress import current_progress, showing_progress
from ..core.errors import GenerationFailed, StoreError, UsageError
from ..core.sessions import ToolCall
from .agent import DRIVE_CALLS, MAX_DRIVE_CALLS, Drive
from .asset_files import add_asset_options, asset_hook_from
from .assets import AssetHook
from .session import DraftSession
from .storage import DraftStore, kept_note, opened_store, require_draft_places, session_id
from .tools import tool_definitions

__all__ = ["add_drive", "add_tools"]


def add_tools(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `story tools` to the `story` group."""
    tools = group.add_parser(
        "tools", help="print the eight story tools' definitions for function calling, as JSON"
    )
    tools.set_defaults(run=_tools)


def _tools(args: argparse.Namespace, out: Output) -> int:
    out.write(json.dumps(tool_definitions(), indent=2) + "\n")
    return EXIT_OK


def add_drive(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `story drive` to the `story` group."""
    drive = group.add_parser(
        "drive",
        help="let the model co-write a story package, choosing each tool call, "
        "printing each call as NDJSON, then the package",
    )
    drive.add_argument(
        "premise",
        metavar="PREMISE",
        nargs="?",
        type=user_text,
        help="the story in one or two sentences (with --session: the draft's own, or none)",
    )
    drive.add_argument(
        "--max-calls",
        type=bounded_int(1, MAX_DRIVE_CALLS),
        default=DRIVE_CALLS,
        metavar="N",
        help=f"the most tool calls the model makes, 1 to {MAX_DRIVE_CALLS} "
        f"(default {DRIVE_CALLS}); it stops sooner once the package is finalized",
    )
    drive.add_argument(
        "--db",
        type=Path,
        metavar="PATH",
        help="a SQLite database (made if missing, and removed if the drive saves nothing in "
        "it) that keeps the draft after every successful call and the finalized package; "
        "without it, nothing is kept",
    )
    drive.add_argument(
        "--session",
        metavar="ID",
        help="go on with the draft saved in --db under this id (its package id)",
    )
    drive.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="an existing folder where the finalized package is saved as <package id>.json",
    )
    add_model_options(drive, seed="seed of the sampling")
    add_asset_options(drive)
    drive.set_defaults(run=_drive)


def _drive(args: argparse.Namespace, out: Output) -> int:
    with showing_progress("story drive", out):
        return _drive_with(args, out)


def _drive_with(args: argparse.Namespace, out: Output) -> int:
    require_draft_places(args.db, args.session, args.out)
    if args.session is None and args.premise is None:
        raise UsageError("a PREMISE is needed to start a story (or --db and --session to go on)")
    assets = asset_hook_from(args)
    with ExitStack() as stack:
        store = None if args.db is None else opened_store(args.db, stack)
        drive = _opened(args, store, assets)
        require_extra(writer_extra(args), "story drive")
        from ..model.choice import load_writer
        from .agent import Driver

        progress = current_progress()
        with progress.doing("loading the model"):
            driver = Driver(load_writer(model_choice(args), needs="a story drive needs one"))
        session = drive.session.draft.package_id
        progress.call(1, args.max_calls)

        def printed(call: ToolCall[StoryDraft]) -> None:
            record = {
                "call": len(drive.calls),
                **outcome(call.result),
                "arguments": call.arguments,
                "session": session,
            }
            out.write(msgspec.json.encode(record).decode() + "\n")
            out.flush()  # each call shows as it is made
            progress.call(len(drive.calls) + 1, args.max_calls)

        work = partial(
            driver.drive, drive, max_calls=args.max_calls, seed=args.seed, on_call=printed
        )
        try:
            run_trio(work)
        except GenerationFailed as failure:
            kept = _kept(store, args.db, session)
            say(f"the drive stopped after {_calls(len(drive.calls))}: {label(str(failure))}{kept}")
            return EXIT_INVALID
        if drive.package is None:
            # As `session drive`: calls running out is where a drive stops, not a failure.
            kept = _kept(store, args.db, session)
            say(f"the drive made its {_calls(args.max_calls)}; the package is not finalized{kept}")
            return EXIT_OK
        out.write(msgspec.json.encode({"package": drive.package}).decode() + "\n")
        return EXIT_OK


def _opened(args: argparse.Namespace, store: DraftStore | None, assets: AssetHook | None) -> Drive:
    """The drive the options ask for: a new draft, kept in `store` (`--db`), or `--session`'s.

    Raises UsageError, in one line, for a session the store does not hold,
    or a premise that does not fit.
    """
    try:
        if store is None or args.session is None:
            new = DraftSession(store=store, packages=args.out, assets=assets)
            return Drive.started(args.premise, new)
        session = DraftSession.resume(
            store, session_id(args.session), packages=args.out, assets=assets
        )
        if args.premise is not None:
            return Drive.started(args.premise, session)
        return Drive.resumed(session)
    except StoreError as error:
        raise UsageError(str(error)) from None
    except ValueError as error:
        raise UsageError(str(error)) from None


def _kept(store: DraftStore | None, db: Path | None, session: str) -> str:
    """What a stopped drive says it kept, as the database has it, not as the run hoped."""
    if db is None:
        return "; nothing is kept (--db keeps the draft)"
    return kept_note(store, session, label(str(db)))


def _calls(count: int) -> str:
    return f"{count} call" + ("" if count == 1 else "s")
