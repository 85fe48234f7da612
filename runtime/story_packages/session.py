"""A draft session: one story draft, changed only by calls of the eight story tools.

    from plancontracts.runtime.story_packages.session import Session

    session = Session()                       # a new draft, its package id a random UUID
    done = session.call("proposeStoryPremise", {...})
    done.ok, done.result, done.message        # True, StoryPremiseResult(ok=True, ...), '...'
    session.draft                             # the draft now, a StoryDraft

Every call that succeeds makes a new draft; a refused call returns its error
and leaves the draft as it was, the very same object. Given a `DraftStore`,
the session saves the draft after every successful call, before it adopts
it (a draft that cannot be saved refuses the call), and `Session.resume`
loads one back; given a folder, `finalizePackage` saves the package there as
JSON too. Nothing is written anywhere else.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from ...generated.story_packages import StoryDraft, StoryPackage
from ..core.contracts import field_bound
from ..core.errors import StoreError, ToolValidationError
from .assets import AssetHook, RecordingAssets
from .drafts import new_draft
from .handlers import HANDLERS, Context
from .storage import DraftStore, write_package
from .tools import TOOLS

__all__ = ["CallResult", "Session"]

_MOST_MS = field_bound(StoryDraft, "generation_ms", "le")


@dataclass(frozen=True)
class CallResult:
    """What one tool call did: its result, or the error that refused it, and the draft after it."""

    tool: str
    "The name of the tool called."
    result: msgspec.Struct | None
    "What the tool returned (`{ok: true, ...}` of its result contract), or None if refused."
    error: ToolValidationError | None
    "Why the call was refused, or None if it succeeded."
    message: str
    "One line for the model: what the call did, or the error's text."
    draft: StoryDraft
    "The draft after the call: the same object as before it when the call was refused."
    package: StoryPackage | None = None
    "The package a successful `finalizePackage` made; None for every other call."

    @property
    def ok(self) -> bool:
        """Whether the call succeeded."""
        return self.error is None


class Session:
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
        self._draft = draft if draft is not None else new_draft(locale)
        self._context = Context(assets or RecordingAssets(), now or (lambda: datetime.now(UTC)))
        self._store = store
        self._packages = packages

    @classmethod
    def resume(cls, store: DraftStore, session: str, **options: Any) -> Session:
        """The session of the draft saved in `store` as `session` (its package id), to go on with.

        `options` are the other arguments of `Session`. Raises `StoreError`
        when the store has no such draft or holds one that breaks its contract.
        """
        return cls(store.load_draft(session), store=store, **options)

    @property
    def draft(self) -> StoryDraft:
        """The draft now."""
        return self._draft

    def call(self, tool: str, arguments: Any) -> CallResult:
        """Call the tool named `tool` with `arguments`, a parsed JSON value (normally a dict).

        Never raises for a bad call: an unknown tool, arguments that break its
        contract, a step out of order, a package that fails its checks and a
        draft that cannot be saved are all a result whose `error` says why.
        """
        latest = self._draft
        started = time.monotonic()
        try:
            handler = HANDLERS[TOOLS.named(tool).name]  # UnknownToolError names the tools
            handled = handler(latest, arguments, self._context)
            spent = round((time.monotonic() - started) * 1000)
            draft = msgspec.structs.replace(
                handled.draft, generation_ms=min(_MOST_MS, handled.draft.generation_ms + spent)
            )
            self._save(tool, draft, handled.package)
        except ToolValidationError as error:
            return CallResult(tool, None, error, str(error), latest)
        self._draft = draft
        return CallResult(tool, handled.result, None, handled.message, draft, handled.package)

    def _save(self, tool: str, draft: StoryDraft, package: StoryPackage | None) -> None:
        """Save the package, if any, then the draft. Raises `ToolValidationError` on failure."""
        try:
            if package is not None and self._packages is not None:
                write_package(package, self._packages)
            if package is not None and self._store is not None:
                self._store.save_package(package)
            if self._store is not None:
                self._store.save_draft(draft)
        except OSError as error:
            reason = error.strerror or str(error)
            raise ToolValidationError(tool, None, f"cannot save the package: {reason}") from None
        except StoreError as error:
            raise ToolValidationError(tool, None, str(error)) from None
