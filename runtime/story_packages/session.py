"""A draft session: one story draft, changed only by calls of the eight story tools.

    from plancontracts.runtime.story_packages import DraftSession

    session = DraftSession()                       # a new draft, its package id a random UUID
    done = session.call("proposeStoryPremise", {...})
    done.ok, done.result, done.message        # True, StoryPremiseResult(ok=True, ...), '...'
    session.draft                             # the draft now, a StoryDraft

Every call that succeeds makes a new draft; a refused call returns its error
and leaves the draft as it was, the very same object. Given a `DraftStore`,
the session saves the draft after every successful call, before it adopts
it (a draft that cannot be saved refuses the call), and `DraftSession.resume`
loads one back; given a folder, `finalizePackage` saves the package there as
JSON too, only once the call is accepted. Nothing is written anywhere else.
Runs sharing a store each read the session's latest draft at every call
(`DraftSession.perform`), so several may call one session at once.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from ...generated.story_packages import StoryDraft, StoryPackage
from ..core.contracts import field_bound
from ..core.errors import StoreError, ToolValidationError
from ..core.files import staged_file
from ..core.sessions import CallResult, Handled, ToolSession
from .assets import AssetHook, RecordingAssets
from .drafts import new_draft
from .handlers import HANDLERS, Finalized, Workshop
from .storage import DraftStore, package_file, package_text, write_package

__all__ = ["DraftSession"]

_MAX_MS = field_bound(StoryDraft, "generation_ms", "le")


class DraftSession(ToolSession[StoryDraft, Workshop]):
    """One story draft, saved where the caller says.

    `draft` is the draft to go on with (default: a new one in `locale`, `en`
    unless named). `assets` makes the files the steps ask for (default: a
    `RecordingAssets`, which makes none). `store` is where the draft is saved
    after every successful call and the finalized package too; `packages` a
    folder where `finalizePackage` saves the package as `<id>.json`; with
    neither, nothing is written. `now` gives the time a package is finalized
    (default: the clock, in UTC).
    """

    def __init__(
        self,
        draft: StoryDraft | None = None,
        *,
        locale: str = "en",
        assets: AssetHook | None = None,
        store: DraftStore | None = None,
        packages: Path | None = None,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        workshop = Workshop(assets or RecordingAssets(), now or (lambda: datetime.now(UTC)))
        super().__init__(HANDLERS, draft if draft is not None else new_draft(locale), workshop)
        self._store = store
        self._packages = packages
        self._started = time.monotonic()
        self._staged: tuple[Path, Path] | None = None
        "A package file written under a temporary name, and its name once the store commits."
        self.package: StoryPackage | None = None
        "The package `finalizePackage` made; None until it succeeds."

    @classmethod
    def resume(cls, store: DraftStore, session: str, **options: Any) -> DraftSession:
        """The session of the draft saved in `store` as `session` (its package id), to go on with.

        `options` are the other arguments of `DraftSession`. Raises `StoreError`
        when the store has no such draft or holds one that breaks its contract.
        """
        return cls(store.load_draft(session), store=store, **options)

    @property
    def draft(self) -> StoryDraft:
        """The draft now."""
        return self.state

    @property
    def conversation_id(self) -> str:
        """The draft's package id: the session's name (`--session`), on its calls' spans."""
        return self._state.package_id

    def perform(self, tool: str, arguments: Any) -> CallResult[StoryDraft]:
        """Make a call of `tool` with `arguments` (see `ToolSession.call`); never raises.

        With a store, the call reads the session's draft saved there, changes
        it and saves it in one write transaction, so runs calling one session
        at once each build on the other's saves and none is lost: a version
        check instead would refuse, after its work, a call that this way only
        waits a few milliseconds. A store that cannot be used refuses the call.
        """
        # The draft counts the time its successful calls take, asset generation included.
        self._started = time.monotonic()
        if self._store is None:
            return super().perform(tool, arguments)
        store, before, package = self._store, self._state, self.package
        try:
            store.begin()
        except StoreError as error:
            return self.refused(tool, ToolValidationError(tool, None, str(error)))
        try:
            latest = store.find_draft(before.package_id)
        except StoreError as error:
            store.rollback()
            return self.refused(tool, ToolValidationError(tool, None, str(error)))
        # None: a new session, saved by its first successful call; an equal draft
        # is kept as it is, so a call refused with nobody else's change leaves the same object.
        if latest is not None and latest != before:
            self._state = latest
        done = super().perform(tool, arguments)
        if not done.ok:
            store.rollback()
            self._unstage()
            return done
        try:
            store.commit()
        except StoreError as error:
            self._unstage()
            self._state, self.package = before, package
            return self.refused(tool, ToolValidationError(tool, None, str(error)))
        if self._staged is not None:
            # Renamed only once the store has the package: a run killed before
            # leaves a hidden temporary file, never a package the store lacks.
            part, path = self._staged
            self._staged = None
            try:
                os.replace(part, path)
            except OSError as error:
                part.unlink(missing_ok=True)
                reason = error.strerror or str(error)
                message = f"the package is saved in the database; its file is not: {reason}"
                return self.refused(tool, ToolValidationError(tool, None, message))
        return done

    def adopt(self, tool: str, handled: Handled[StoryDraft]) -> StoryDraft:
        """The new draft, its time counted, saved with the package it made, if any.

        A draft or package that cannot be saved refuses the call. The package
        file is written last, once the store has taken both, so a refused
        call leaves no file.
        """
        spent = round((time.monotonic() - self._started) * 1000)
        ms = min(_MAX_MS, handled.state.generation_ms + spent)
        draft = msgspec.structs.replace(handled.state, generation_ms=ms)
        package = handled.package if isinstance(handled, Finalized) else None
        try:
            if package is not None and self._store is not None:
                self._store.save_package(package)
            if self._store is not None:
                self._store.save_draft(draft)
            if package is not None and self._packages is not None:
                if self._store is None:
                    write_package(package, self._packages)
                else:  # renamed into place by `call` once the store commits
                    path = package_file(package, self._packages)
                    self._staged = (staged_file(path, package_text(package)), path)
        except OSError as error:
            reason = error.strerror or str(error)
            raise ToolValidationError(tool, None, f"cannot save the package: {reason}") from None
        except StoreError as error:
            raise ToolValidationError(tool, None, str(error)) from None
        if package is not None:
            self.package = package
        return draft

    def _unstage(self) -> None:
        """Remove the package file this call staged, the store not having kept the package."""
        if self._staged is not None:
            with contextlib.suppress(OSError):
                self._staged[0].unlink()
            self._staged = None
