"""`plancontracts migrate CONTRACT FILE...`: stored documents brought to their contract's version.

Each file's document is read, upgraded by the contract's migration steps
(see `runtime.core.migrations`) and printed as one JSON line, or, with
`--in-place`, written back: to a temporary file beside it, renamed over it,
so the old document stays until the new one is whole. Each step taken is one
line on standard error (`FILE: plan version 0 -> 1 (...): what it did`).
A file already current says so. Exit status 0 when every file is current or
upgraded, 1 when one is not a document of the contract that any step
recognizes (or a step fails), 2 for a usage error, such as a file that
cannot be read.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import msgspec

from ..commandkit import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    Output,
    add_max_bytes,
    complain,
    label,
    opened,
    read_at_most,
    reason,
    say,
    stdin_at_most_once,
    unreadable,
)
from ..core.contracts import contract_name, root_type
from ..core.errors import ContractError, MigrationFailed, StreamError, UsageError, Violation
from ..core.files import locked, replace_file
from ..core.migrations import current_version
from ..core.validation import migrate, parse_document

__all__ = ["register"]


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `migrate` command."""
    command = commands.add_parser(
        "migrate",
        help="upgrade stored documents of a contract's older versions to its current one",
        usage="%(prog)s CONTRACT FILE... [--in-place] [options]",
    )
    command.add_argument("contract", metavar="CONTRACT", help="the contract's name")
    command.add_argument(
        "files", metavar="FILE", nargs="+", help="a stored JSON file, or - for stdin"
    )
    command.add_argument(
        "--in-place",
        action="store_true",
        help="write each upgraded document back to its file, atomically, instead of printing it",
    )
    command.add_argument(
        "--calendar",
        metavar="START",
        help="the campaign's start as an ISO 8601 date and time (1492-03-01T08:00:00), for "
        "WorldArchitect's world-time strings in frozen-plans and planning-session",
    )
    command.add_argument(
        "--horizon",
        metavar="H[,H...]",
        help="goal-planning-system: the horizon (short, mid, long) of every goal, or of each "
        "goal in order, which jenbina's to_dict did not store (default: short)",
    )
    command.add_argument(
        "--skills",
        action="append",
        type=Path,
        metavar="DIR",
        help="plan: a folder of skill folders to resolve Narratoria's tools/<skill> paths in "
        "(repeat for more; default: the bundled skills)",
    )
    add_max_bytes(command)
    command.set_defaults(run=_migrate, files_after_options=True)


def _options(args: argparse.Namespace) -> dict[str, str]:
    """The steps' options the command line gives, by the names the steps read."""
    options: dict[str, str] = {}
    if args.calendar is not None:
        options["calendar"] = args.calendar
    if args.horizon is not None:
        options["horizon"] = args.horizon
    if args.skills:
        options["skills"] = os.pathsep.join(str(folder) for folder in args.skills)
    return options


def _migrate(args: argparse.Namespace, out: Output) -> int:
    root_type(args.contract)  # an unknown contract is a usage error, before any file is read
    contract = contract_name(args.contract)
    stdin_at_most_once(args.files)
    if args.in_place and "-" in args.files:
        raise UsageError("--in-place writes files back: standard input (-) has no file")
    options = _options(args)
    status = EXIT_OK
    for name in args.files:
        status = max(status, _one(contract, name, args, options, out))
    return status


def _one(
    contract: str, name: str, args: argparse.Namespace, options: dict[str, str], out: Output
) -> int:
    """Migrate the file `name`; its exit status. Writes its lines; raises StreamError."""
    if not args.in_place:
        return _migrated(contract, name, args, options, out, None)
    # Through a link, the file it names is locked and upgraded, and the link kept. The
    # stores take the same lock: one writer at a time.
    target = Path(os.path.realpath(name))
    try:
        with locked(target):
            return _migrated(contract, name, args, options, out, target)
    except OSError as error:
        complain(f"{label(name)}: cannot lock it: {reason(error)}")
        return EXIT_USAGE


def _migrated(
    contract: str,
    name: str,
    args: argparse.Namespace,
    options: dict[str, str],
    out: Output,
    target: Path | None,
) -> int:
    """Migrate the file `name`, printing the result, or writing it to `target` (in place)."""
    try:
        with opened(name) as stream:
            data = read_at_most(stream, args.max_bytes)
    except OSError as error:
        complain(f"{label(name)}: {unreadable(error)}")
        return EXIT_USAGE
    if isinstance(data, Violation):
        complain(f"{label(name)}: {data.message}")
        return EXIT_INVALID
    try:
        value = parse_document(contract, data)
    except ContractError as error:  # not one strict JSON document: nothing to migrate
        complain(f"{label(name)}: {error.violations[0]}")
        return EXIT_INVALID
    try:
        migrated = migrate(contract, value, options=options)
    except ContractError as error:
        first, more = error.violations[0], len(error.violations) - 1
        others = f" (and {more} more)" if more else ""
        complain(
            f"{label(name)}: not a {contract} document, and no migration recognizes it: "
            f"{first}{others}"
        )
        return EXIT_INVALID
    except MigrationFailed as error:
        complain(f"{label(name)}: {error}")
        return EXIT_INVALID
    if migrated.current:
        version = current_version(contract)
        say(f"{label(name)}: {contract} version {version}, current: nothing to do")
    for line in migrated.lines():
        say(f"{label(name)}: {line}")
    encoded = msgspec.json.encode(migrated.value)
    if target is None:
        out.write(encoded.decode() + "\n")
        out.flush()
        return EXIT_OK
    if migrated.current:
        return EXIT_OK  # nothing changed: the file is left as it was, not rewritten
    try:
        replace_file(target, msgspec.json.format(encoded, indent=2) + b"\n")
    except OSError as error:
        raise StreamError(f"cannot write {label(name)}: {reason(error)}") from None
    say(f"{label(name)}: written in place")
    return EXIT_OK
