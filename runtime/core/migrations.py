"""Migrations: how a contract reads the documents its older versions stored.

A contract's version is its schema's root `x-version` (an integer, 1 when
the schema has none); a change that breaks stored documents bumps it. A
migration is a chain of steps, one per version: each reads one version and
writes a later one, and says what it did in lines a user reads, never
silently:

    migrated = migrate("goal-planning-system", old_document)  # plancontracts.migrate
    for taken in migrated.steps:
        print(taken.step.describe(), *taken.notes, sep="\\n  ")
    migrated.value          # a document of the current version, checked

Stored documents carry no version marker, so the document itself says where
the chain starts: a document valid under the contract is current, and
otherwise the earliest step whose `recognizes` accepts it starts the chain.
A step may also read documents that the current contract accepts
(`reads_valid`), such as Narratoria's plans, valid but naming their tools
`tools/<skill>`, which the executor refuses: for a valid document, only such
steps are asked, and their `recognizes` decides.

A family declares its steps in its own package, beside its rules, as a
module `migrations` of `plancontracts.runtime.<family>` with a mapping
`MIGRATIONS` from contract name to its steps; they are found through the
generated index and imported on first need (see `runtime.core.rules`), so
the core never names a family. A user's contract passes its own steps:
`migrate(contract, value, steps=[...])`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from ...generated import FAMILIES
from .contracts import (
    AnyContract,
    contract_name,
    contract_schema,
    declared_by_family,
    is_bundled,
    root_type,
)
from .errors import ContractError, MigrationFailed, Violation, Violations
from .files import replace_file, staged_file
from .jsontext import copy_json
from .plain_text import one_line
from .schema_tree import version_of

__all__ = [
    "Migrated",
    "MigrationStep",
    "Taken",
    "backup_path",
    "current_version",
    "keep_and_replace",
    "reads_valid",
    "recognized_as_valid",
    "steps_of",
    "upgraded",
]

Upgrade = Callable[[Any, Mapping[str, str]], tuple[Any, Sequence[str]]]
"""A step's work: given a document and the options, the upgraded document and what was done.

It returns a new value and leaves the one given alone; each line of what
was done is one sentence a user reads, such as `horizon not in the
document: set to short`. It raises ValueError, with one line, for a
document it cannot upgrade or an option it needs and lacks.
"""


@dataclass(frozen=True)
class MigrationStep:
    """One step of a contract's migration: it reads version `reads` and writes version `writes`."""

    contract: str
    "The name of the contract whose documents it upgrades."
    reads: int
    "The version it reads; the shapes plancontracts' contracts had before their first are 0."
    writes: int
    "The version it writes, later than `reads`."
    name: str
    "A short name of what it reads, such as `jenbina PlanningSystem.to_dict`."
    recognizes: Callable[[Any], bool]
    """Whether a parsed document has the shape this step reads.

    Cheap and total: it looks at a few fields, whatever else the value
    holds, and returns False for anything it does not know.
    """
    upgrade: Upgrade
    "The upgrade itself: see `Upgrade`."
    reads_valid: bool = False
    """Whether it also reads documents the current contract accepts.

    Such a step is asked about every valid document (its `recognizes` must
    then be as cheap as a glance), and upgrades those it recognizes.
    """
    options: Mapping[str, str] | None = None
    "The options it reads, each with one line saying what it is, for help and errors."

    def __post_init__(self) -> None:
        if not self.reads < self.writes:
            raise ValueError(
                f"the step {self.name!r} reads version {self.reads} and writes {self.writes}: "
                "a step writes a later version than it reads"
            )

    def describe(self) -> str:
        """One line: `goal-planning-system version 0 -> 2 (jenbina PlanningSystem.to_dict)`."""
        return f"{self.contract} version {self.reads} -> {self.writes} ({self.name})"


@dataclass(frozen=True)
class Taken:
    """One step a migration took, and what it did."""

    step: MigrationStep
    notes: tuple[str, ...]
    "What the step did, one line each."


@dataclass(frozen=True)
class Migrated:
    """A document brought to its contract's current version, and the steps that brought it.

    `value` is the parsed JSON document (dicts, lists...), valid under the
    contract; `steps` is empty when the document was current already.
    """

    contract: str
    value: Any
    steps: tuple[Taken, ...]

    @property
    def current(self) -> bool:
        """Whether the document was current already: no step was taken."""
        return not self.steps

    def lines(self) -> list[str]:
        """What was done, one line per step: `... version 0 -> 1 (name): note; note`."""
        return [
            f"{taken.step.describe()}: {'; '.join(taken.notes) or 'upgraded'}"
            for taken in self.steps
        ]


def current_version(contract: AnyContract) -> int:
    """The version of `contract`: its schema's root `x-version`, or 1 when it has none.

    Raises `UnknownContractError` for a name that is not a contract.
    """
    root_type(contract)
    if is_bundled(contract):
        return _bundled_version(contract_name(contract))
    return _version_in(contract_schema(contract))


@cache
def _bundled_version(name: str) -> int:
    return _version_in(contract_schema(name))


def _version_in(schema: Mapping[str, Any]) -> int:
    version = version_of(schema)
    return 1 if version is None else version


def steps_of(contract: AnyContract) -> tuple[MigrationStep, ...]:
    """The steps `contract`'s family declares for it (none for a user's contract).

    Raises `UnknownContractError` for a name that is not a contract.
    """
    root_type(contract)
    if not is_bundled(contract):
        return ()
    name = contract_name(contract)
    return tuple(_declared(FAMILIES[name]).get(name, ()))


def reads_valid(contract: AnyContract, steps: Iterable[MigrationStep] = ()) -> bool:
    """Whether any step of `contract` (declared, or among `steps`) reads valid documents."""
    name = contract_name(contract)
    return any(step.reads_valid for step in _steps(contract, name, steps))


def recognized_as_valid(
    contract: AnyContract, value: Any, steps: Iterable[MigrationStep] = ()
) -> bool:
    """Whether a step of `contract` that reads valid documents recognizes `value`.

    Only those steps' predicates are asked (each a glance), so a caller can
    tell a current document from a valid but old one before judging it.
    Raises `MigrationFailed` naming a step whose predicate fails.
    """
    name = contract_name(contract)
    valid_readers = [step for step in _steps(contract, name, steps) if step.reads_valid]
    return _first(valid_readers, value, name) is not None


def _declared(family: str) -> Mapping[str, tuple[MigrationStep, ...]]:
    return declared_by_family(family, "migrations", "MIGRATIONS")


def _steps(contract: AnyContract, name: str, given: Iterable[MigrationStep]) -> list[MigrationStep]:
    # A caller's steps come first: a user may replace a bundled step that reads the same shape.
    mine = [step for step in given if step.contract == name]
    return [*mine, *steps_of(contract)]


def upgraded(
    contract: AnyContract,
    value: Any,
    *,
    judge: Callable[[Any], Violations],
    options: Mapping[str, str] | None = None,
    steps: Iterable[MigrationStep] = (),
) -> Migrated:
    """`value` brought to `contract`'s current version, judged by `judge`: see `migrate`.

    `judge` gives a value's violations of the contract (validation's, which
    imports this module: `validation.migrate` passes it).
    """
    name = contract_name(contract)
    chosen = options or {}
    known = _steps(contract, name, steps)
    current = current_version(contract)
    problems = judge(value)
    candidates = known if problems else [step for step in known if step.reads_valid]
    start = _first(candidates, value, name)
    if start is None:
        if not problems:
            return Migrated(name, value, ())
        said = Violation("", f"no migration of {name} recognizes this document", "x-version")
        raise ContractError(name, Violations([*problems, said], complete=problems.complete))
    # Steps take a copy: the caller's value stays as it was, whatever a step does.
    document = copy_json(value)
    taken: list[Taken] = []
    step: MigrationStep | None = start
    while step is not None:
        document, notes = _run(step, document, chosen)
        taken.append(Taken(step, notes))
        if step.writes >= current:
            break
        written = step.writes
        step = _first([s for s in known if s.reads == written], document, name)
        if step is None:
            reason = f"no step reads version {taken[-1].step.writes} of this document"
            raise MigrationFailed(name, taken[-1].step.name, reason)
    last = taken[-1].step
    if last.writes != current:
        reason = f"writes version {last.writes}, but {name} is at version {current}"
        raise MigrationFailed(name, last.name, reason)
    wrong = judge(document)
    if wrong:
        more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
        reason = f"wrote a document {name} refuses: {wrong[0]}{more}"
        raise MigrationFailed(name, last.name, one_line(reason))
    return Migrated(name, document, tuple(taken))


def _first(steps: Sequence[MigrationStep], value: Any, contract: str) -> MigrationStep | None:
    """The earliest step (by the version it reads) among `steps` that recognizes `value`."""
    for step in sorted(steps, key=lambda step: step.reads):  # stable: a caller's first
        try:
            if step.recognizes(value):
                return step
        except Exception as error:  # a step's bug: said as one line naming it
            raise MigrationFailed(contract, step.name, f"failed to look: {_why(error)}") from None
    return None


def _run(
    step: MigrationStep, value: Any, options: Mapping[str, str]
) -> tuple[Any, tuple[str, ...]]:
    try:
        upgraded, notes = step.upgrade(value, options)
    except ValueError as error:  # what the step says it cannot do
        raise MigrationFailed(step.contract, step.name, one_line(str(error))) from None
    except Exception as error:  # a step's bug: said as one line naming it
        raise MigrationFailed(step.contract, step.name, f"failed: {_why(error)}") from None
    try:
        # What a step returns is held to JSON (a set, a date... is its bug), and passed on
        # as the plain values a parser gives, as the next step and the judge expect.
        document = msgspec.json.decode(msgspec.json.encode(upgraded))
        said = tuple(one_line(note) for note in notes if isinstance(note, str))
        if len(said) != len(notes):
            raise TypeError("its notes are not all text")
    except (TypeError, ValueError, msgspec.EncodeError) as error:
        reason = f"returned what is no JSON document and notes: {_why(error)}"
        raise MigrationFailed(step.contract, step.name, reason) from None
    return document, said


def _why(error: Exception) -> str:
    return one_line(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)


def backup_path(path: Path, version: int) -> Path:
    """Where a store keeps `path`'s document of `version` when it migrates it: beside it.

    `NAME.vVERSION.bak` (`session.json.v0.bak`), or, when a file has that
    name already (a backup of an earlier migration), `NAME.vVERSION.N.bak`
    with the first free N from 1: an earlier backup is never replaced.
    """
    candidate = path.with_name(f"{path.name}.v{version}.bak")
    number = 0
    while os.path.lexists(candidate):
        number += 1
        candidate = path.with_name(f"{path.name}.v{version}.{number}.bak")
    return candidate


def keep_and_replace(path: Path, old: bytes, new: bytes, version: int) -> Path:
    """Keep `old`, `path`'s document of `version`, beside it, then replace `path` with `new`.

    The backup is written whole first, to a name no file has (see
    `backup_path`), made exclusively, never through a link; only then is
    `path` replaced, atomically (`files.replace_file`). A signal or crash at
    any moment leaves the old document in `path` or in the backup, never
    lost. The caller holds `path`'s lock (`files.locked`) around its read and
    this call. Returns the backup's path; raises OSError when either write fails.
    """
    backup = backup_path(path, version)
    part = staged_file(path, old)
    try:
        os.link(part, backup)  # fails rather than replace a backup made since
    finally:
        part.unlink(missing_ok=True)
    replace_file(path, new)
    return backup
