"""Where drafts and packages are kept: SQLite through the standard library, and JSON files.

A `DraftStore` is one SQLite database holding a table of drafts, one row per
session (its package id) with the draft as its contract JSON, and a table of
finalized packages, one row per package id. `write_package` saves a package
as a JSON file named after its id in a folder. Whatever is read back is
judged by its contract (`story-draft`, `story-package`) before it is used,
and decodes to a value equal to the one saved.

Several runs may change one database at once: `begin` opens a write
transaction (SQLite's `BEGIN IMMEDIATE`), which waits up to `BUSY_SECONDS`
for the others', so a session reads its draft, changes it and saves it with
no other run's save in between (`DraftSession.call`), and every run's calls
are kept.

    store = DraftStore(Path("stories.db"))
    store.save_draft(draft)
    store.load_draft(draft.package_id) == draft     # True
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack, closing
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import msgspec

from ...generated import STORY_DRAFT, STORY_PACKAGE, Contract
from ...generated.story_packages import StoryDraft, StoryPackage
from ..commandkit import label, say
from ..core.errors import MigrationFailed, PlanContractsError, StoreError, UsageError, shown
from ..core.files import replace_file
from ..core.migrations import Migrated, backup_path, steps_of
from ..core.stored import upgraded_if_old
from ..core.validation import decode

__all__ = [
    "DraftStore",
    "kept_note",
    "opened_store",
    "read_package",
    "session_id",
    "write_package",
]

_Stored = TypeVar("_Stored")
_Done = TypeVar("_Done")

BUSY_SECONDS = 60.0
"""Seconds a run waits for another's write transaction before it is told the database is busy.

A transaction holds one call's read, check and save (asset files aside,
milliseconds): a minute is dozens of runs queued, and a wait past it means
a run that hangs with the database open, which is said rather than waited on.
"""

_TRY_SECONDS = 0.05
"""How long SQLite itself waits for a lock in one try: its wait is in C, where
a signal is not handled, so a run waits in tries this short, up to
BUSY_SECONDS, and Ctrl-C or SIGTERM stops it between two."""

_TABLES = (
    "CREATE TABLE IF NOT EXISTS drafts (id TEXT PRIMARY KEY, draft TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS packages (id TEXT PRIMARY KEY, package TEXT NOT NULL)",
)


def require_draft_places(db: Path | None, session: str | None, out: Path | None) -> None:
    """Raise UsageError, in one line, for `--session` without `--db` or an `--out` no folder is at.

    The story commands that draft (`run`, `build`, `drive`) take the same
    three options: where the draft is kept, which draft, and where the
    finalized package goes.
    """
    if session is not None and db is None:
        raise UsageError("--session needs --db: drafts are kept only in a database")
    if out is not None and not out.is_dir():
        raise UsageError(f"--out {label(str(out))}: not an existing folder")


def session_id(text: str) -> str:
    """The draft id that `--session TEXT` names, in the form the store keeps: a UUID.

    Raises UsageError, in one line, for text that is not a UUID.
    """
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise UsageError(f"--session {shown(text)}: not a UUID") from None


class DraftStore:
    """The drafts and packages of one SQLite database, made at `path` if it is not there."""

    def __init__(
        self, path: Path, *, say: Callable[[str], None] = say, create: bool = True
    ) -> None:
        """Open (or make) the database at `path`, upgrading what older versions stored.

        A draft or package an older version of its contract stored is
        migrated on open (see `_upgrade`): `say` is given one line per step
        and one naming the backup of the old database. With `create` False,
        a database that is not there, or holds no story tables, is refused
        and nothing is made; with `create` True, a database holding other
        tables and neither story table is refused too, and left as it was.
        Raises `StoreError` when the database cannot be used or a stored
        document's migration fails.
        """
        self.path = path
        try:
            # isolation_level None: no transaction is opened behind the store's back;
            # `begin` opens one, and a save outside one commits on its own.
            if create:
                self._connection = sqlite3.connect(path, timeout=_TRY_SECONDS, isolation_level=None)
            else:  # mode=rw: SQLite opens the file only if it is there, never makes it
                uri = f"{Path(path).absolute().as_uri()}?mode=rw"
                self._connection = sqlite3.connect(
                    uri, timeout=_TRY_SECONDS, isolation_level=None, uri=True
                )
        except sqlite3.Error as error:
            raise StoreError(f"{path}: cannot be used as a story database: {error}") from None
        try:
            tables = self._tables()
            # A database of other tables is another program's: none is added to it.
            if create and (not tables or tables & {table for table, _, _ in _STORED}):
                for table in _TABLES:
                    self._execute(table)
            else:
                self._require_tables()
        except sqlite3.Error as error:
            self.close()
            raise StoreError(f"{path}: cannot be used as a story database: {error}") from None
        except BaseException:
            self.close()
            raise
        try:
            self._upgrade(say)
        except BaseException:
            self.close()
            raise

    def _upgrade(self, say: Callable[[str], None]) -> None:
        """Migrate every stored document an older version of its contract wrote, in one transaction.

        Only contracts whose family declares migration steps are read (none
        of the story contracts does yet: then opening reads no row). Under
        the write transaction, which another run's open waits for, the old
        database is first copied whole beside it as `NAME.vN.bak` (see
        `migrations.backup_path`), then the rows are replaced and the
        transaction committed: a signal before the commit leaves every old
        row in place. A current database is not written. Raises `StoreError`.
        """
        tables = [entry for entry in _STORED if steps_of(entry[2])]
        if not tables:
            return
        self.begin()
        try:
            changed: list[tuple[str, str, str, Migrated]] = []
            for table, column, contract in tables:
                rows = self._execute(f"SELECT id, {column} FROM {table} ORDER BY id").fetchall()
                for key, text in rows:
                    found = _migrated(contract, text)
                    if found is not None:
                        changed.append((table, column, key, found))
            if not changed:
                self.rollback()
                return
            backup = backup_path(self.path, min(m.steps[0].step.reads for *_, m in changed))
            # Read through a second connection: SQLite refuses a backup from the one writing
            # (SQLITE_LOCKED), and this transaction's lock still lets a reader in, no writer.
            with (
                closing(sqlite3.connect(self.path)) as source,
                closing(sqlite3.connect(backup)) as copy,
            ):
                source.backup(copy)
            for table, column, key, found in changed:
                self._save(table, column, key, msgspec.json.encode(found.value))
            self.commit()
        except MigrationFailed as error:
            self.rollback()
            raise StoreError(
                f"{self.path}: a stored document cannot be upgraded: {error}"
            ) from None
        except sqlite3.Error as error:
            self.rollback()
            raise StoreError(f"cannot upgrade {self.path}: {error}") from None
        except BaseException:
            self.rollback()
            raise
        for _, column, key, found in changed:
            for line in found.lines():
                say(f"{self.path}: the {column} {shown(key)}: {line}")
        say(f"{self.path}: upgraded; the old database kept as {backup}")

    def __enter__(self) -> DraftStore:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the database."""
        self._connection.close()

    def begin(self) -> None:
        """Open a write transaction, waiting for another run's to end. Raises `StoreError`.

        What is read and saved until `commit` or `rollback` is this run's
        alone: another run's `begin` waits for it (rollback journal or WAL).
        """
        try:
            self._execute("BEGIN IMMEDIATE")
        except sqlite3.Error as error:
            raise StoreError(f"cannot change {self.path}: {error}") from None

    def commit(self) -> None:
        """Keep what the transaction saved. Raises `StoreError` (then nothing is kept)."""
        try:
            _waited(self._connection.commit)  # a busy COMMIT leaves the transaction open
        except sqlite3.Error as error:
            self.rollback()
            raise StoreError(f"cannot save in {self.path}: {error}") from None

    def rollback(self) -> None:
        """Drop what the transaction saved."""
        if self._connection.in_transaction:
            self._connection.rollback()

    def find_draft(self, session: str) -> StoryDraft | None:
        """The draft saved for `session`, None if there is none. Raises `StoreError` if invalid."""
        row = self._row("drafts", "draft", session)
        return None if row is None else self._decoded("draft", session, row, STORY_DRAFT)

    def save_draft(self, draft: StoryDraft) -> None:
        """Save `draft` in its session's row, replacing what was there. Raises `StoreError`."""
        self._save("drafts", "draft", draft.package_id, msgspec.json.encode(draft))

    def load_draft(self, session: str) -> StoryDraft:
        """The draft saved for `session`. Raises `StoreError` if there is none or it is invalid."""
        return self._load("drafts", "draft", session, STORY_DRAFT)

    def save_package(self, package: StoryPackage) -> None:
        """Save `package` in its id's row, replacing what was there. Raises `StoreError`."""
        self._save("packages", "package", package.id, msgspec.json.encode(package))

    def load_package(self, package_id: str) -> StoryPackage:
        """The package saved as `package_id`. Raises `StoreError` if none is, or it is invalid."""
        return self._load("packages", "package", package_id, STORY_PACKAGE)

    def clear_draft(self, session: str) -> bool:
        """Delete the draft saved for `session`, in one transaction: the seed's `clearPlanSession`.

        Returns False when there is no such draft (nothing changes). A package
        the draft finalized stays in the store: it is a product, not the draft.
        Inside a transaction the caller opened, the delete is part of it.
        Raises `StoreError` when the database cannot be changed.
        """
        own = not self._connection.in_transaction
        if own:
            self.begin()
        try:
            deleted = self._execute("DELETE FROM drafts WHERE id = ?", (session,)).rowcount
            if own:
                self.commit()
        except sqlite3.Error as error:
            if own:
                self.rollback()
            raise StoreError(f"cannot change {self.path}: {error}") from None
        except BaseException:
            if own:
                self.rollback()
            raise
        return deleted > 0

    def has_package(self, package_id: str) -> bool:
        """True when a package is saved as `package_id`, valid or not. Raises `StoreError`."""
        return self._row("packages", "package", package_id) is not None

    def sessions(self) -> list[str]:
        """The ids of the drafts saved, sorted."""
        try:
            rows = self._execute("SELECT id FROM drafts ORDER BY id").fetchall()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read {self.path}: {error}") from None
        return [row[0] for row in rows]

    def is_empty(self) -> bool:
        """Whether the database holds no draft and no package. Raises `StoreError`."""
        try:
            found = self._execute(
                "SELECT EXISTS (SELECT 1 FROM drafts) OR EXISTS (SELECT 1 FROM packages)"
            ).fetchone()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read {self.path}: {error}") from None
        return not found[0]

    def _tables(self) -> set[str]:
        """The names of the database's tables; raises `sqlite3.Error`."""
        return {
            table
            for (table,) in self._execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
            ).fetchall()
        }

    def _require_tables(self) -> None:
        """Raise `StoreError` unless the database holds the tables a store makes."""
        names = self._tables()
        wanted = {table for table, _, _ in _STORED}
        if not wanted <= names:
            raise StoreError(f"{self.path}: not a story database (no drafts or packages table)")

    def _save(self, table: str, column: str, key: str, value: bytes) -> None:
        try:
            self._execute(
                f"INSERT INTO {table} (id, {column}) VALUES (?, ?) "
                f"ON CONFLICT (id) DO UPDATE SET {column} = excluded.{column}",
                (key, value.decode()),
            )
        except sqlite3.Error as error:
            raise StoreError(f"cannot save the {column} in {self.path}: {error}") from None

    def _row(self, table: str, column: str, key: str) -> tuple[object] | None:
        try:
            row: tuple[object] | None = self._execute(
                f"SELECT {column} FROM {table} WHERE id = ?",
                (key,),
            ).fetchone()
        except sqlite3.Error as error:
            raise StoreError(f"cannot read {self.path}: {error}") from None
        return row

    def _execute(self, statement: str, parameters: tuple[str, ...] = ()) -> sqlite3.Cursor:
        """`statement` run, waiting up to BUSY_SECONDS for another run's lock."""
        return _waited(lambda: self._connection.execute(statement, parameters))

    def _load(self, table: str, column: str, key: str, contract: Contract[_Stored]) -> _Stored:
        row = self._row(table, column, key)
        if row is None:
            raise StoreError(f"no {column} {shown(key)} in {self.path}")
        return self._decoded(column, key, row, contract)

    def _decoded(
        self, column: str, key: str, row: tuple[object], contract: Contract[_Stored]
    ) -> _Stored:
        text = row[0]
        try:
            if not isinstance(text, str | bytes):  # SQLite keeps whatever another program wrote
                raise PlanContractsError("not JSON text")
            return decode(contract, text)
        except PlanContractsError as error:
            raise StoreError(
                f"the {column} {shown(key)} in {self.path} is not valid: {error}"
            ) from None


_STORED = (("drafts", "draft", STORY_DRAFT), ("packages", "package", STORY_PACKAGE))
"Each table, its column and the contract of the documents it keeps."


def opened_store(path: Path, stack: ExitStack) -> DraftStore:
    """The store at `path` (`--db`), closed when `stack` ends; removed then if this run made it.

    A database this run made that holds no draft and no package when the run
    ends, however it ends, is deleted with its journal: a run that failed
    before its first accepted call leaves nothing behind. Raises UsageError,
    in one line, for a database that cannot be used.
    """
    made = not os.path.lexists(path)
    empty: list[bool] = []
    if made:
        stack.callback(_remove_if_empty, path, empty)  # runs last: after the store is closed
    try:
        store = stack.enter_context(DraftStore(path))
    except StoreError as error:
        raise UsageError(str(error)) from None
    if made:
        stack.callback(_note_if_empty, store, empty)  # runs first: while the store is open
    return store


def _note_if_empty(store: DraftStore, empty: list[bool]) -> None:
    try:
        empty.append(store.is_empty())
    except StoreError:
        empty.append(False)  # what it holds is unknown: it is kept


def _remove_if_empty(path: Path, empty: list[bool]) -> None:
    """Delete the database at `path` and its journal when `empty` says so, or said nothing.

    Nothing said: the store could not be opened on the file this run made.
    """
    if empty and not empty[0]:
        return
    for name in (str(path), f"{path}-journal", f"{path}-wal", f"{path}-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)


def kept_note(store: DraftStore | None, session: str, db: str) -> str:
    """What a run that stopped says it kept: `; the draft is kept in DB as session ID` or
    `; nothing is kept: no call was accepted`; empty without a store.

    It asks the store, so it says what is there, not what a run hoped to save.
    """
    if store is None:
        return ""
    try:
        saved = store.find_draft(session) is not None
    except (StoreError, UsageError):
        return ""
    if not saved:
        return "; nothing is kept: no call was accepted"
    return f"; the draft is kept in {db} as session {session}"


def _migrated(contract: Contract[Any], text: object) -> Migrated | None:
    """The stored `text` upgraded, or None when it is current or not one a step recognizes.

    What no step recognizes is left for `load_draft` to refuse, as before.
    Raises `MigrationFailed` when a step fails.
    """
    return upgraded_if_old(contract, text) if isinstance(text, str | bytes) else None


def _waited(work: Callable[[], _Done]) -> _Done:
    """What `work()` returns, tried again while the database is locked, up to BUSY_SECONDS.

    Raises the last `sqlite3.OperationalError` past it, or any other at once.
    """
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            return work()
        except sqlite3.OperationalError as error:
            busy = error.sqlite_errorcode in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not busy or time.monotonic() >= deadline:
                raise


def package_file(package: StoryPackage, folder: Path) -> Path:
    """Where `write_package` saves `package` in `folder`: `<folder>/<package id>.json`."""
    return folder / f"{package.id}.json"


def package_text(package: StoryPackage) -> bytes:
    """The text of `package` as `write_package` saves it."""
    return msgspec.json.encode(package) + b"\n"


def write_package(package: StoryPackage, folder: Path) -> Path:
    """Save `package` as `<folder>/<package id>.json`, whole or not at all; return its path.

    The file is written to a file made exclusively beside it and renamed over
    it (`core.files.replace_file`), so a reader never sees half a package.
    Raises OSError when it cannot be written.
    """
    path = package_file(package, folder)
    replace_file(path, package_text(package))
    return path


def read_package(path: Path) -> StoryPackage:
    """The package saved at `path`, judged by its contract. Raises OSError or `ContractError`."""
    return decode(STORY_PACKAGE, path.read_bytes())
