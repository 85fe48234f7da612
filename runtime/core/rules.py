"""Rules beyond the schema: what a contract's family checks that JSON Schema cannot state.

A family declares its rules in its own package, as a module `rules` of
`plancontracts.runtime.<family>` with a mapping `RULES` from contract name
to `Rules`: the rules a document of that contract is judged by unless the
caller chooses others (planning blocks, for example, offer Think mode's
stricter rules besides the default Story mode's). Validation finds a
contract's family in the generated index and imports that module when it
first needs it, so the core never names a family.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ...generated import FAMILIES
from .contracts import AnyContract, contract_name, declared_by_family, is_bundled, root_type
from .errors import Violation

__all__ = ["Rules", "as_integer", "rules_of"]


@dataclass(frozen=True)
class Rules:
    """Checks of one contract beyond its schema."""

    contract: str
    name: str
    "How the rules are called in messages, such as `Think mode's rules`."
    find: Callable[[Any], Iterator[Violation]]
    """The violations of a parsed JSON value, one at a time.

    It reads the value whatever else is wrong with it, checks only what is
    there and well typed, and walks in loops, never by recursion, in time
    linear in the value's size: the caller stops it after enough violations.
    """


def rules_of(contract: AnyContract) -> Rules | None:
    """The rules `contract`'s family judges its documents by, or None when it has none.

    Raises `UnknownContractError` for a name that is not a contract.
    """
    root_type(contract)
    if not is_bundled(contract):  # a user's contract: its schema is all its rules
        return None
    name = contract_name(contract)
    return _declared(FAMILIES[name]).get(name)


def _declared(family: str) -> Mapping[str, Rules]:
    return declared_by_family(family, "rules", "RULES")


def as_integer(value: Any) -> int | None:
    """`value` as an integer if JSON Schema counts it as one (1 and 1.0, not true).

    Rules read values as parsed, whatever else is wrong with them: anything else is None.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None
