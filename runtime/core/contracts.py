"""The contracts this package knows: names, handles, typed roots and bundled schemas.

Everything here is read from `plancontracts.generated`, which the code
generator derives from `schemas/`; nothing is listed by hand, limits
included (`field_bound`). A contract is named by its handle (`PLAN`, typed
with its documents' type) or by its name (`"plan"`), alike.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any, Literal, TypeAlias

import msgspec
import msgspec.inspect

from ...generated import CONTRACTS, SCHEMA_ONLY_RULES, Contract
from .errors import UnknownContractError

Bound = Literal["max_length", "min_length", "le", "ge"]
AnyContract: TypeAlias = Contract[Any] | str
'A contract, by its handle (`PLAN`) or by its name (`"plan"`).'


def contract_name(contract: AnyContract) -> str:
    """The name of `contract`, given by its handle or its name.

    Raises TypeError when `contract` is neither a str nor a handle of
    `plancontracts.generated` (a handle another generated package defines
    belongs to that package's contracts, not to these).
    """
    if isinstance(contract, str):
        return contract
    if isinstance(contract, Contract):
        return contract.name
    raise TypeError(
        "a contract is its name or its handle in plancontracts.generated, "
        f"not {type(contract).__name__}"
    )


def contract_names() -> tuple[str, ...]:
    """The names of every contract, sorted."""
    return tuple(sorted(CONTRACTS))


def root_type(contract: AnyContract) -> Any:
    """The generated type of `contract`'s documents (a msgspec Struct, or a union or map of them).

    Raises `UnknownContractError` for a name that is not a contract.
    """
    name = contract_name(contract)
    try:
        return CONTRACTS[name].type
    except KeyError:
        raise UnknownContractError(name, contract_names()) from None


def has_schema_only_rules(contract: AnyContract) -> bool:
    """Whether `contract` has rules the generated types cannot enforce."""
    root_type(contract)
    return bool(SCHEMA_ONLY_RULES[contract_name(contract)])


@cache
def _schema_text(contract: str) -> str:
    root_type(contract)
    resource = files("plancontracts.generated") / "schemas" / f"{contract}.json"
    return resource.read_text(encoding="utf-8")


def contract_schema(contract: AnyContract) -> dict[str, Any]:
    """`contract`'s JSON Schema as one self-contained document, a fresh copy on every call.

    Every reference is bundled into its `$defs`, so any JSON Schema tool can
    use it on its own. Raises `UnknownContractError` for an unknown name.
    """
    schema: dict[str, Any] = json.loads(_schema_text(contract_name(contract)))
    return schema


def field_bound(struct: type[msgspec.Struct], name: str, bound: Bound) -> int:
    """A bound the schema sets on the field `name` (its Python name) of a generated struct.

    `bound` is `"max_length"` or `"min_length"` for text and arrays, `"le"`
    or `"ge"` for integers. Limits are read from the generated types, so the
    schema stays their one source. Raises LookupError when `struct` has no
    such field or the field has no such bound.
    """
    for member in msgspec.structs.fields(struct):
        if member.name == name:
            kind = msgspec.inspect.type_info(member.type)
            if isinstance(kind, msgspec.inspect.UnionType):  # an optional field
                kind = next(t for t in kind.types if not isinstance(t, msgspec.inspect.NoneType))
            value = getattr(kind, bound, None)
            if isinstance(value, int):
                return value
    raise LookupError(f"{struct.__name__}.{name} has no {bound} bound")
