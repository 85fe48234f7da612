"""State files: the document a command keeps between runs (`--state FILE`), read in one way.

`think --state`, `goals simulate --state` and `story play --state` each keep
one contract's document in a file the user names. Reading it has the same
traps for all three: a FIFO or a device named as the file would block the
open, a huge file would fill memory, an older version's document must be
upgraded (written back, the old kept, or in memory only), and every problem
is one line naming the option. The caller holds the file's lock when the
upgrade is written back.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Literal, TypeVar

import msgspec

from ...generated import Contract
from ..core.errors import ContractError, MigrationFailed, StreamError, UsageError, Violation
from ..core.files import locked
from ..core.stored import current_document, upgraded_if_old
from ..core.validation import decode
from .base import label, reason, say
from .inputs import read_at_most, unreadable
from .options import DEFAULT_MAX_BYTES

__all__ = [
    "Upgrade",
    "holding_the_state",
    "read_state",
    "require_a_writable_folder",
    "upgraded_in_memory",
]

_T = TypeVar("_T")

Upgrade = Literal["in place", "in memory", "never"]
"""What becomes of an older version's document: upgraded and written back (the
old kept beside it), upgraded in memory only, or refused as it is."""


def require_a_writable_folder(name: str) -> None:
    """Raise UsageError, in one line, when the folder of the state file `name` cannot be written."""
    folder = Path(name).parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--state {label(name)}: cannot write in {label(str(folder))}")


@contextmanager
def holding_the_state(name: str | None, holder: str) -> Iterator[None]:
    """Hold the lock of state file `name` (none when None) while the block runs.

    Two runs keeping one file take turns, the second waiting (`holder` names
    what the first is doing, said once: "another play holds it") and then
    reading what the first wrote, so neither loses what the other did.
    Raises UsageError when the file's folder cannot be written in (said
    before a lock file is made there), StreamError when the lock cannot be had.
    """
    if name is None:
        yield
        return
    require_a_writable_folder(name)
    waiting = f"--state {label(name)}: {holder}; waiting for it"
    stack = ExitStack()
    try:
        stack.enter_context(locked(Path(name), waiting=lambda: say(waiting)))
    except OSError as error:
        raise StreamError(f"--state {label(name)}: cannot lock it: {reason(error)}") from None
    with stack:
        yield


def read_state(
    name: str,
    contract: Contract[_T],
    what: str,
    *,
    upgrade: Upgrade = "in place",
    options: dict[str, str] | None = None,
) -> _T | None:
    """The `contract` document kept in the state file `name`; None when there is no such file.

    Only a regular file is read (opened without blocking, so a FIFO is
    refused, never waited on), at most DEFAULT_MAX_BYTES of it. An older
    version's document is upgraded as `upgrade` says, `options` given to the
    steps, each step said on standard error. `what` names the document in
    errors ("a planning session"). Raises UsageError, in one line, when the
    file cannot be read, cannot be upgraded or is not a valid document, and
    StreamError when an upgrade cannot be written back.
    """
    where = f"--state {label(name)}"
    try:
        descriptor = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise UsageError(f"{where}: not a regular file")
            os.set_blocking(descriptor, True)
        except BaseException:
            os.close(descriptor)
            raise
        with open(descriptor, "rb") as stream:
            data = read_at_most(stream, DEFAULT_MAX_BYTES, option=None)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise UsageError(f"{where}: {unreadable(error)}") from None
    if isinstance(data, Violation):
        raise UsageError(f"{where}: {data.message}")
    try:
        if upgrade == "in place":
            data = current_document(contract, Path(name), data, say=say, options=options)
        elif upgrade == "in memory":
            data = upgraded_in_memory(contract, name, data, options)
    except MigrationFailed as error:
        raise UsageError(f"{where}: {error}") from None
    except OSError as error:
        raise StreamError(f"{where}: cannot upgrade it: {reason(error)}") from None
    try:
        return decode(contract, data)
    except ContractError as error:
        more = len(error.violations) - 1
        raise UsageError(
            f"{where}: not {what}: {error.violations[0]}" + (f" (and {more} more)" if more else "")
        ) from None


def upgraded_in_memory(
    contract: Contract[_T], name: str, data: bytes, options: dict[str, str] | None = None
) -> bytes:
    """`data`, read from file `name`, at `contract`'s current version; as it is when current.

    Each step taken is said on standard error, naming the file; nothing is
    written. Raises MigrationFailed naming the step when a step fails.
    """
    migrated = upgraded_if_old(contract, data, options=options)
    if migrated is None:
        return data
    for line in migrated.lines():
        say(f"{label(name)}: {line}")
    return msgspec.json.encode(migrated.value)
