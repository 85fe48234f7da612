"""The contracts this package knows: names, typed roots and bundled schemas.

Everything here is read from `plancontracts.generated`, which the code
generator derives from `schemas/`; nothing is listed by hand, limits
included (`field_bound`).
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any, Literal

import msgspec
import msgspec.inspect

from ...generated import ROOT_TYPES, SCHEMA_ONLY_RULES
from .errors import UnknownContractError

Bound = Literal["max_length", "min_length", "le", "ge"]


def contract_names() -> tuple[str, ...]:
    """The names of every contract, sorted."""
    return tuple(sorted(ROOT_TYPES))


def root_type(contract: str) -> Any:
    """The generated type of `contract`'s documents (a msgspec Struct, or a union or map of them).

    Raises `UnknownContractError` for a name that is not a contract.
    """
    try:
        return ROOT_TYPES[contract]
    except KeyError:
        raise UnknownContractError(contract, contract_names()) from None


def has_schema_only_rules(contract: str) -> bool:
    """Whether `contract` has rules the generated types cannot enforce."""
    root_type(contract)
    return bool(SCHEMA_ONLY_RULES[contract])


@cache
def _schema_text(contract: str) -> str:
    root_type(contract)
    resource = files("plancontracts.generated") / "schemas" / f"{contract}.json"
    return resource.read_text(encoding="utf-8")


def contract_schema(contract: str) -> dict[str, Any]:
    """`contract`'s JSON Schema as one self-contained document, a fresh copy on every call.

    Every reference is bundled into its `$defs`, so any JSON Schema tool can
    use it on its own. Raises `UnknownContractError` for an unknown name.
    """
    schema: dict[str, Any] = json.loads(_schema_text(contract))
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
