"""`plancontracts diff`: what a change of schemas does to stored documents and their readers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..commandkit import EXIT_INVALID, EXIT_OK, Output, say
from ..core.diff import (
    BREAKING,
    UNKNOWN,
    ContractChange,
    bundles_at,
    bundles_to_compare,
    diff_bundles,
    unbumped,
)
from ..core.errors import UnusableSchema, UsageError, printable
from ..core.schema_sets import bundled

__all__ = ["register"]

DEFAULT_FOLDER = Path("schemas")
"The schema folder `--against` compares when none is named, as plancontracts' own is laid out."


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `diff`."""
    diff = commands.add_parser(
        "diff",
        help="classify every change between two versions of contracts, for readers and writers",
        description="Each change is judged for readers (new code reading old documents) and "
        "writers (old code reading new documents): compatible, breaking or unknown. Exit 0 "
        "when every change is compatible for both, 1 when any is not, 2 for a usage error.",
        usage="%(prog)s OLD NEW [--json] [--unless-bumped]\n"
        "       %(prog)s --against REV [FOLDER] [--json] [--unless-bumped]",
    )
    diff.add_argument(
        "paths",
        metavar="PATH",
        nargs="*",
        type=Path,
        help="two schema files, schema folders or generated packages: OLD then NEW; with "
        "--against, the folder (default schemas)",
    )
    diff.add_argument(
        "--against",
        metavar="REV",
        help="compare the folder in the working tree with the same folder at git revision REV",
    )
    diff.add_argument("--json", action="store_true", help="print one JSON object per change")
    diff.add_argument(
        "--unless-bumped",
        action="store_true",
        help="exit 0 where every contract with a change that is not compatible has a raised "
        "x-version",
    )
    diff.set_defaults(run=_diff)


def _diff(args: argparse.Namespace, out: Output) -> int:
    paths: list[Path] = args.paths
    try:
        if args.against is not None:
            if len(paths) > 1:
                raise UsageError("with --against, give one FOLDER (or none: schemas)")
            folder = paths[0] if paths else DEFAULT_FOLDER
            if not folder.is_dir():
                raise UsageError(printable(f"{folder}: no such folder (name the schema folder)"))
            old = bundles_at(args.against, folder)
            new = bundled(folder)
        else:
            if len(paths) != 2:
                raise UsageError(f"give OLD and NEW (or --against REV), not {len(paths)} paths")
            old, new = bundles_to_compare(*paths)
    except UnusableSchema as error:
        raise UsageError(printable(str(error))) from None
    changes = diff_bundles(old, new)
    for change in changes:
        text = json.dumps(change.to_json(), ensure_ascii=False) if args.json else change.line()
        out.write(printable(text) + "\n")
    say(_summary(changes))
    if args.unless_bumped:
        left = unbumped(changes, old, new)
        for name, (before, after) in left.items():
            say(
                printable(
                    f"{name}: a change that is not compatible, and x-version "
                    f"{_version(before)} -> {_version(after)}: raise it"
                )
            )
        return EXIT_INVALID if left else EXIT_OK
    return EXIT_OK if all(change.compatible for change in changes) else EXIT_INVALID


def _summary(changes: list[ContractChange]) -> str:
    if not changes:
        return "no change to any contract"
    counts = [
        (sum(getattr(change, side) == verdict for change in changes), f"{verdict} for {side}")
        for side in ("readers", "writers")
        for verdict in (BREAKING, UNKNOWN)
    ]
    told = ", ".join(f"{count} {what}" for count, what in counts if count)
    plural = "" if len(changes) == 1 else "s"
    return f"{len(changes)} change{plural}: {told or 'every one compatible for both'}"


def _version(version: int | None) -> str:
    return "none" if version is None else str(version)
