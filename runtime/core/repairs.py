"""Repairs of a document, each reported, and the normalizers that make them.

    result = normalize_block(value)   # or normalize_output: a family's normalizer
    result.value, result.repairs, result.violations, result.valid

A family may offer, for some of its contracts, one explicit step that
repairs what its protocol (or the upstream it replaces) says is repairable
and reports every change: where (a JSON Pointer), the value before and
after, and why. Judging never changes a document; normalizing is that
separate step, and what it cannot repair is left as it is and reported as a
violation.

A family declares its normalizers in its own package, as a module `repairs`
of `plancontracts.runtime.<family>` with a mapping `NORMALIZERS` from
contract name to `Normalizer`, found the way its `RULES` are (see
`runtime.core.rules`), so the core and the `normalize` command never name a
family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ...generated import FAMILIES
from .contracts import AnyContract, contract_name, declared_by_family, is_bundled, root_type
from .errors import Violations, shown
from .rules import Rules

__all__ = ["ABSENT", "Normalized", "Normalizer", "Repair", "normalizable", "normalizer_of"]


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"The `before` of a repair that filled in a missing field, the `after` of one that dropped it."


@dataclass(frozen=True)
class Repair:
    """One change a normalizer made: where, what was there, what is there now, and why."""

    pointer: str
    before: Any
    "The value before, or ABSENT for a field that was missing."
    after: Any
    "The value after, or ABSENT for a field or item dropped."
    reason: str

    def __str__(self) -> str:
        before = "(absent)" if self.before is ABSENT else shown(self.before)
        after = "(dropped)" if self.after is ABSENT else shown(self.after)
        return f"{self.pointer or '(document)'}: {before} -> {after} ({self.reason})"


@dataclass(frozen=True)
class Normalized:
    """What a normalizer made of a value."""

    value: Any
    "The repaired value (a new object; the input is not changed)."
    repairs: tuple[Repair, ...]
    violations: Violations
    "What is still wrong after the repairs, by the rules it was judged by."

    @property
    def valid(self) -> bool:
        """Whether the repaired value is a valid document of its contract."""
        return not self.violations


@dataclass(frozen=True)
class Normalizer:
    """How a family repairs the documents of one of its contracts."""

    normalize: Callable[[Any, Rules | None], Normalized]
    """Repairs a parsed JSON value (never changing it) and judges the result.

    Judged by the rules given, or the contract's own when None (the rules a
    `validate` option such as `--mode` chose). Takes any value a JSON parser
    returns and raises nothing.
    """
    field: str
    "The field of `normalize --json`'s record that holds the repaired document."


def normalizer_of(contract: AnyContract) -> Normalizer | None:
    """The normalizer `contract`'s family declares for it, or None when it has none.

    Raises `UnknownContractError` for a name that is not a contract.
    """
    root_type(contract)
    if not is_bundled(contract):  # a user's contract: nothing says what is repairable
        return None
    name = contract_name(contract)
    return _declared(FAMILIES[name]).get(name)


def normalizable() -> list[str]:
    """The names of the contracts a family declares a normalizer for, sorted."""
    return sorted(name for name, family in FAMILIES.items() if name in _declared(family))


def _declared(family: str) -> Mapping[str, Normalizer]:
    return declared_by_family(family, "repairs", "NORMALIZERS")
