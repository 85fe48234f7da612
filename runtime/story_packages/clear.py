"""`plancontracts story clear --db FILE --session ID`: delete a draft (`clearPlanSession`).

The draft's row goes in one transaction (`DraftStore.clear_draft`); a
package it finalized stays. The database is never made: a file that is not
there, or not a story database, is a usage error (exit 2); a session it does
not hold is one line and exit 1.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..commandkit import EXIT_INVALID, EXIT_OK, Output, complain, label
from ..core.errors import StoreError, UsageError, shown
from .storage import DraftStore, session_id

__all__ = ["add_clear"]


def add_clear(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `story clear` to the `story` group."""
    clear = group.add_parser(
        "clear", help="delete a story draft from a database, keeping any package it finalized"
    )
    clear.add_argument(
        "--db",
        type=Path,
        metavar="FILE",
        required=True,
        help="the SQLite database the draft is saved in (never made)",
    )
    clear.add_argument(
        "--session", metavar="ID", required=True, help="the draft's session id (its package id)"
    )
    clear.set_defaults(run=_clear)


def _clear(args: argparse.Namespace, out: Output) -> int:
    session = session_id(args.session)
    where = label(str(args.db))
    if not args.db.exists():
        raise UsageError(f"--db {where}: no such file (a database is never made to be cleared)")
    try:
        with DraftStore(args.db, create=False) as store:
            cleared = store.clear_draft(session)
            kept = cleared and store.has_package(session)
    except StoreError as error:
        raise UsageError(str(error)) from None
    if not cleared:
        complain(f"no draft {shown(session)} in {where}: nothing cleared")
        return EXIT_INVALID
    package = "; its finalized package is kept" if kept else ""
    out.write(f"cleared the draft {session} from {where}{package}\n")
    return EXIT_OK
