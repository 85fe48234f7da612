"""`plancontracts story`: the story-package commands, a group of subcommands.

`story run CALLS` applies NDJSON tool calls to one draft, in order, and
prints one NDJSON line per call. Nothing is written unless asked: `--db PATH`
keeps the draft (saved after every successful call) and the finalized
package in a SQLite database, `--session ID` goes on with a draft saved
there, and `--out DIR` saves the finalized package as `DIR/<id>.json`.
"""

from __future__ import annotations

import argparse
import uuid
from contextlib import ExitStack
from functools import partial
from pathlib import Path

from ..cli.base import Output, UsageError, label
from ..cli.calls import NoCall, read_call, run_calls
from ..cli.options import RulesOption, add_max_bytes
from ..core.errors import Violation, shown
from ..core.tools import ToolValidationError
from .session import CallResult, Session
from .storage import DraftStore, StoreError
from .tools import TOOLS

__all__ = ["RULES_OPTIONS", "register"]

RULES_OPTIONS: tuple[RulesOption, ...] = ()
"Story packages are judged by their schemas and their one set of rules: no option chooses others."


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `story` group and its subcommands."""
    story = commands.add_parser("story", help="plan a visual-novel story package through its tools")
    group = story.add_subparsers(required=True, metavar="SUBCOMMAND")
    run = group.add_parser(
        "run", help="apply NDJSON tool calls to one story draft, printing each outcome as NDJSON"
    )
    run.add_argument(
        "calls",
        metavar="CALLS",
        help='a file of tool calls, one per line: {"tool": NAME, "arguments": {...}}; - for stdin',
    )
    run.add_argument(
        "--db",
        type=Path,
        metavar="PATH",
        help="a SQLite database (made if missing) that keeps the draft after every successful "
        "call and the finalized package; without it, nothing is kept",
    )
    run.add_argument(
        "--session",
        metavar="ID",
        help="go on with the draft saved in --db under this id (its package id)",
    )
    run.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="an existing folder where the finalized package is saved as <package id>.json",
    )
    add_max_bytes(run, "a line")
    run.set_defaults(run=_run)


def _run(args: argparse.Namespace, out: Output) -> int:
    if args.session is not None and args.db is None:
        raise UsageError("--session needs --db: drafts are kept only in a database")
    if args.out is not None and not args.out.is_dir():
        raise UsageError(f"--out {label(str(args.out))}: not an existing folder")
    with ExitStack() as stack:
        session = _session(args, stack)
        return run_calls(
            args.calls,
            args.max_bytes,
            out,
            partial(_call, session),
            lambda done: {"session": session.draft.package_id},
        )


def _session(args: argparse.Namespace, stack: ExitStack) -> Session:
    """The session the calls go to: a new draft, or the one `--session` names in `--db`."""
    if args.db is None:
        return Session(packages=args.out)
    try:
        store = stack.enter_context(DraftStore(args.db))
        if args.session is None:
            return Session(store=store, packages=args.out)
        return Session.resume(store, _session_id(args.session), packages=args.out)
    except StoreError as error:
        raise UsageError(str(error)) from None


def _session_id(text: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise UsageError(f"--session {shown(text)}: not a UUID") from None


def _call(session: Session, line: bytes | Violation) -> CallResult:
    """Apply one line's call; a line that is no call is refused as a call of no tool."""
    names = ", ".join(tool.name for tool in TOOLS)
    call = read_call(line, f"a story tool: {names}")
    if isinstance(call, NoCall):
        name = call.tool or ""
        error = ToolValidationError(name, None, call.message)
        return CallResult(name, None, error, call.message, session.draft)
    return session.call(call.tool, call.arguments)
