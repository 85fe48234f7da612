"""Stores migrate on open: a file of an older version of its contract is upgraded, the old kept.

    with locked(path):                          # the store's own lock, around read and write
        data = path.read_bytes()
        data = current_document(PLANNING_SESSION, path, data, say=say)
        session = decode(PLANNING_SESSION, data)

A current document is returned as it is, and the file is not written. An
old one is migrated (see `runtime.core.migrations`), the old document kept
beside the file as `NAME.vVERSION.bak` and the file replaced atomically
(`migrations.keep_and_replace`), one line per step said. The store holds
its lock around the read and this call, so a second run opening the same
old file waits, then reads the upgraded one: it is current, and nothing is
migrated twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import msgspec

from .contracts import AnyContract, contract_name
from .errors import ContractError
from .migrations import Migrated, keep_and_replace, reads_valid
from .validation import decode, migrate, parse_document

__all__ = ["current_document", "upgraded_if_old"]


def current_document(
    contract: AnyContract,
    path: Path,
    data: bytes,
    *,
    say: Callable[[str], None],
    options: Mapping[str, str] | None = None,
) -> bytes:
    """The text of the document `data`, read from `path`, at `contract`'s current version.

    `data` itself when it is current, or when it is no document of the
    contract that any step recognizes (the caller's decode says what is
    wrong). Otherwise the upgraded text, which has replaced `path`, the old
    kept as a backup; `say` is given one line per step taken and one naming
    the backup. The caller holds `path`'s lock. Raises `MigrationFailed`
    naming the step when a step fails (the file is left as it was), and
    OSError when the backup or the new file cannot be written.
    """
    migrated = upgraded_if_old(contract, data, options=options)
    if migrated is None:
        return data
    new = msgspec.json.encode(migrated.value) + b"\n"
    backup = keep_and_replace(path, data, new, migrated.steps[0].step.reads)
    for line in migrated.lines():
        say(f"{path}: {line}")
    name = contract_name(contract)
    say(f"{path}: upgraded to {name}'s current version; the old document kept as {backup}")
    return new


def upgraded_if_old(
    contract: AnyContract, data: bytes | str, *, options: Mapping[str, str] | None = None
) -> Migrated | None:
    """The stored text `data` migrated, or None when it is current or no step recognizes it.

    What no step recognizes is left for the store's own decode to refuse.
    Raises `MigrationFailed` naming the step when a step fails.
    """
    if not reads_valid(contract):
        try:
            decode(contract, data)  # a valid document is current: nothing more is done
            return None
        except ContractError:
            pass
    try:
        migrated = migrate(contract, parse_document(contract, data), options=options)
    except ContractError:
        return None
    return None if migrated.current else migrated
