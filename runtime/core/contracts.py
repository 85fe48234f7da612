"""The contracts this package knows: names, handles, typed roots and bundled schemas.

Everything here is read from `plancontracts.generated`, which the code
generator derives from `schemas/`; nothing is listed by hand, limits
included (`field_bound`). A contract is named by its handle (`PLAN`, typed
with its documents' type) or by its name (`"plan"`), alike. A handle may
also be a user's: one that a package `plancontracts generate` wrote holds
(its schemas are in that package), or one a set of `load_contracts` gives
(`contracts["recipe"]`, whose schemas the set holds).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from functools import cache
from importlib.resources import files
from typing import Any, Literal, Protocol, TypeAlias

import msgspec
import msgspec.inspect

from ...generated import CONTRACTS, SCHEMA_ONLY_RULES, Contract
from .errors import UnknownContractError

Bound = Literal["max_length", "min_length", "le", "ge"]
AnyContract: TypeAlias = Contract[Any] | str
'A contract, by its handle (`PLAN`, or a user\'s) or by its name (`"plan"`: a bundled one).'
BUNDLED_PACKAGE = Contract.__module__
"The package of plancontracts' own handles: `plancontracts.generated`."


class SchemaOwner(Protocol):
    """What holds the schemas of a handle that `load_contracts` gives: its set."""

    def schema(self, name: str) -> dict[str, Any]:
        """The self-contained schema of the contract `name`, a fresh copy."""
        ...


def contract_name(contract: AnyContract) -> str:
    """The name of `contract`, given by its handle or its name.

    Raises TypeError when `contract` is neither a str nor a handle.
    """
    if isinstance(contract, str):
        return contract
    if isinstance(contract, Contract):
        return contract.name
    raise TypeError(
        "a contract is its name or a handle (`PLAN`, one a package `plancontracts generate` "
        f"wrote, or `load_contracts(...)[name]`), not {type(contract).__name__}"
    )


def is_bundled(contract: AnyContract) -> bool:
    """Whether `contract` is one of plancontracts' own: a name, or a handle of theirs."""
    contract_name(contract)
    return isinstance(contract, str) or (
        contract.package == BUNDLED_PACKAGE and owner_of(contract) is None
    )


def owner_of(contract: Contract[Any]) -> SchemaOwner | None:
    """The set that holds a handle `load_contracts` gave, or None for a generated handle."""
    owner: SchemaOwner | None = getattr(contract, "contracts", None)
    return owner


def contract_names() -> tuple[str, ...]:
    """The names of every contract, sorted."""
    return tuple(sorted(CONTRACTS))


def root_type(contract: AnyContract) -> Any:
    """The generated type of `contract`'s documents (a msgspec Struct, or a union or map of them).

    Raises `UnknownContractError` for a name that is not a contract.
    """
    name = contract_name(contract)
    if not isinstance(contract, str):
        return contract.type
    try:
        return CONTRACTS[name].type
    except KeyError:
        raise UnknownContractError(name, contract_names()) from None


def has_schema_only_rules(contract: AnyContract) -> bool:
    """Whether `contract` (one of plancontracts' own) has rules its types cannot enforce."""
    root_type(contract)
    return bool(SCHEMA_ONLY_RULES[contract_name(contract)])


@cache
def package_schema_text(package: str, contract: str) -> str:
    """The bundled schema of `contract` in the generated package `package`, as written there.

    Raises `UnknownContractError` when the package has no schema of that name.
    """
    resource = files(package) / "schemas" / f"{contract}.json"
    try:
        return resource.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        raise UnknownContractError(contract, ()) from None


def contract_schema(contract: AnyContract) -> dict[str, Any]:
    """`contract`'s JSON Schema as one self-contained document, a fresh copy on every call.

    Every reference is bundled into it (see `runtime.core.schema_tree`), so
    any JSON Schema tool can use it on its own. `contract` is a bundled
    contract's name or any handle. Raises `UnknownContractError` for an
    unknown name.
    """
    if isinstance(contract, str):
        root_type(contract)
        package, name = BUNDLED_PACKAGE, contract
    else:
        owner = owner_of(contract)
        if owner is not None:
            return owner.schema(contract.name)
        package, name = contract.package, contract_name(contract)
    schema: dict[str, Any] = json.loads(package_schema_text(package, name))
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
            if isinstance(kind, msgspec.inspect.Metadata):  # a text with a pattern
                kind = kind.type
            value = getattr(kind, bound, None)
            if isinstance(value, int):
                return value
    raise LookupError(f"{struct.__name__}.{name} has no {bound} bound")


@cache
def declared_by_family(family: str, module: str, name: str) -> Mapping[str, Any]:
    """What `family` declares for its contracts: the mapping `name` of its module `module`.

    Such as `RULES` of `plancontracts.runtime.tool_plans.rules`: imported on
    first need, so the core never names a family. Empty where the family has
    no such module; an import the module itself makes that fails is raised.
    """
    runtime = __package__.rpartition(".")[0]  # this package's parent: plancontracts.runtime
    dotted = f"{runtime}.{family}.{module}"
    try:
        found = importlib.import_module(dotted)
    except ModuleNotFoundError as missing:
        if missing.name not in (dotted, f"{runtime}.{family}"):
            raise  # something the family's module imports is missing: a real error
        return {}  # the family declares none
    declared: Mapping[str, Any] = getattr(found, name)
    return declared
