"""Validating external JSON against a contract and decoding it into typed objects.

Typed decoding is the fast path: msgspec parses the text and converts it into
the generated structs, which enforce types, required and unknown fields,
enums and bounds; the patterns the structs carry are matched after
(`runtime.core.typed_patterns`), and contracts whose family has rules beyond
the schema (see `runtime.core.rules`) then have those checked. With the
`fast` extra, a contract only its types judge decodes in one native call
(`ContractSet.decode`). The authoritative schema takes over in three cases:
to explain a rejection (msgspec stops at the first problem; the schema lists
them all, each with its JSON Pointer, up to `MAX_VIOLATIONS`), for contracts
with rules the structs cannot express, and where the two disagree about a
value, which happens for one known case only: JSON Schema counts `1.0` as an
integer and msgspec does not. The schema decides; such numbers are typed as
integers.

`decode`, `convert` and `violations` judge by plancontracts' own contracts,
named by handle (`decode(PLAN, data)` is typed as a `Plan`) or by name (typed
`Any`). A `ContractSet` judges by other schemas, such as a user's schema
folder, with the same parsing, messages, pointers and cap; without generated
types, its schemas alone judge.

Nothing here walks a value by recursion past what Python allows (the pattern
walk falls back to a loop), so every value the parser accepts, however deep,
gets its verdict.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import json
import re
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from functools import cache, partial
from itertools import chain, islice
from typing import TYPE_CHECKING, Any, TypeVar, overload

import msgspec

from ...generated import CONTRACTS, Contract
from .contracts import (
    BUNDLED_PACKAGE,
    AnyContract,
    contract_name,
    contract_names,
    has_schema_only_rules,
    owner_of,
    package_schema_text,
)
from .errors import (
    MAX_VIOLATIONS,
    ContractError,
    MalformedJSON,
    UnknownContractError,
    UnusableSchema,
    Violation,
    Violations,
    shown,
)
from .jsontext import DENSE_FROM, NATIVE_DEPTH, copy_json, escape_token, parse
from .jsontext import pointer as json_pointer
from .migrations import Migrated, MigrationStep, reads_valid, recognized_as_valid, upgraded
from .native import native
from .patterns import OutOfTime, matches, matching_budget, pattern_keywords
from .rules import Rules, rules_of
from .schema_text import display_pattern
from .schema_tree import validator_class
from .typed_patterns import Node, pattern_check, pattern_node

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as SchemaError
    from jsonschema.protocols import Validator
    from referencing import Registry

__all__ = [
    "BUNDLED",
    "ContractSet",
    "contracts_of",
    "convert",
    "decode",
    "parse_document",
    "violations",
]

_ARRAY_INDEX = re.compile(r"[0-9]+")
_TOO_DEEP_FOR_SCHEMA = (
    "nests too deeply to be judged by a schema that refers to itself "
    "(the limit is Python's recursion limit: 150 to 250 levels)"
)
_Document = TypeVar("_Document")
KeywordCheck = Callable[[Any, Any, Any, Any], Iterator["SchemaError"]]
"A keyword's check, as jsonschema calls it: (validator, the keyword's value, instance, schema)."
Relaxed = tuple[tuple[str, Callable[[KeywordCheck], KeywordCheck]], ...]
"Keywords judged otherwise: see `ContractSet.schema_violations`."
_Quick = tuple[Callable[[bytes], Any] | None, Node | None]
"A contract's fast path: its typed decoder when nothing but its types judges it, and its patterns."
_TypedPath = tuple[Callable[[Any], Any], Callable[[Any], bool]]
"A typed contract's conversion into its types and its patterns' check, for `convert`."
_UNSURE: Any = object()
"What the native decode returns when the slow path must judge."
_TYPES_REFUSE = (msgspec.ValidationError, msgspec.DecodeError, RecursionError)
"What msgspec's typed decoder raises for a document the slow path then explains."


class ContractSet:
    """Contracts that documents are judged against, each by its name.

    Every contract has a self-contained schema; some also have a generated
    type. A document of a typed contract decodes into its type: msgspec
    judges first, and the schema explains a rejection and checks what the
    type cannot express. A document of any other contract is judged by its
    schema alone and decodes to its parsed JSON value. Either way a rejection
    lists the same violations, with the same messages, pointers and cap, and
    the rules beyond the schema (see `runtime.core.rules`) are added to them.

    `BUNDLED` holds plancontracts' own contracts, with their types and their
    families' rules; `decode`, `convert` and `violations` judge by it.
    """

    def __init__(
        self,
        schemas: Mapping[str, Mapping[str, Any]],
        *,
        types: Mapping[str, Any] | None = None,
        schema_only_rules: Collection[str] = (),
        rules: Callable[[str], Rules | None] | None = None,
        pattern_seconds: float | None = None,
    ) -> None:
        """A set of the contracts that `schemas` maps by name to their self-contained schemas.

        Each schema must be a valid schema of the draft it declares (2020-12
        when it declares none), self-contained (as
        `plancontracts.runtime.core.schema_tree` bundles them); it is read,
        never changed. `types` maps the contracts
        that have one to their generated type; `schema_only_rules` names the
        typed contracts whose schema checks more than their type can; `rules`
        gives a contract's rules beyond the schema (by default, none).
        `pattern_seconds` bounds the time the schema's patterns may take to
        judge one document (None: no bound, for schemas whose patterns are
        known); past it, the document is refused, naming the pattern. No
        schema is read or fetched from anywhere: a reference the schemas do
        not hold is refused.
        """
        self._schemas = schemas
        self._types = types or {}
        self._schema_only_rules = schema_only_rules
        self._rules = rules
        self._pattern_seconds = pattern_seconds
        self._validators: dict[tuple[str, Relaxed], Validator] = {}
        self._default_rules: dict[str, Rules | None] = {}
        self._quick: dict[str, _Quick] = {}
        self._typed_paths: dict[tuple[str, bool], _TypedPath] = {}

    def names(self) -> tuple[str, ...]:
        """The names of the contracts, sorted."""
        return tuple(sorted(self._schemas))

    def __getitem__(self, name: str) -> Contract[Any]:
        """The handle of the contract `name`, for `decode`, `violations`, `schema_text`...

        Typed `Contract[Any]`: a set read from schemas has no generated types
        for mypy to know (a package `plancontracts generate` writes has).
        Raises `UnknownContractError`, with the closest names, for an unknown one.
        """
        self.require(name)
        return _SetContract(name, self._types.get(name, Any), "", contracts=self)

    def __contains__(self, name: object) -> bool:
        return name in self._schemas

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._schemas)

    def __repr__(self) -> str:
        shown = ", ".join(self.names()[:5]) + (", ..." if len(self) > 5 else "")
        return f"<ContractSet of {len(self)}: {shown}>"

    def schema(self, name: str) -> dict[str, Any]:
        """The self-contained schema of the contract `name`, a fresh copy on every call."""
        self.require(name)
        schema: dict[str, Any] = copy_json(self._schemas[name], lambda leaf: leaf)
        return schema

    def require(self, contract: str) -> None:
        """Raise `UnknownContractError` unless `contract` names one of the set's contracts."""
        if contract not in self._schemas:
            raise UnknownContractError(contract, self.names())

    def decode(self, contract: str, data: bytes | str, *, rules: Rules | None = None) -> Any:
        """Decode one JSON document of `contract`: see the module's `decode`.

        With the `fast` extra, a typed contract with no rules beyond its types
        (no family rules, no schema-only rules) decodes in one native call:
        the scan (what the strict parser refuses besides msgspec: duplicate
        keys, numbers past a float, lone surrogates, deep nesting), msgspec's
        typed decoder, and the walk that matches the patterns. Wherever that
        call is unsure, or something is refused, the path below judges and
        explains, so the verdict and the messages are the same. Other
        contracts take the path below, whose strict parse scans natively too.
        """
        module = native()
        if module is not None and rules is None and type(data) is bytes:
            quick = self._quick.get(contract)
            if quick is None:
                quick = self._quick[contract] = self._quick_of(contract)
            decoder, node = quick
            if decoder is not None and len(data) <= DENSE_FROM:
                typed = module.decode(data, NATIVE_DEPTH, decoder, node, _TYPES_REFUSE, _UNSURE)
                if typed is not _UNSURE:
                    return typed
        return self.convert(contract, self.parse_document(contract, data), rules=rules)

    def _quick_of(self, contract: str) -> _Quick:
        """The typed decoder and the patterns' node of a contract only its types judge."""
        self.require(contract)
        target = self._types.get(contract)
        if target is None or contract in self._schema_only_rules:
            return None, None
        if self._chosen(contract, None) is not None:
            return None, None
        return msgspec.json.Decoder(target).decode, pattern_node(target)

    def convert(self, contract: str, value: Any, *, rules: Rules | None = None) -> Any:
        """Convert a parsed JSON `value` of `contract`: see the module's `convert`."""
        chosen = self._chosen(contract, rules)
        target = self._types.get(contract)
        if target is None:  # the schema alone judges
            problems = self.violations(contract, value, rules=chosen)
            if problems:
                raise ContractError(contract, problems)
            return value
        # Found by the contract's name: looked up by type, a union hashes slowly.
        natively = native() is not None
        typed_path = self._typed_paths.get((contract, natively))
        if typed_path is None:
            typed_path = (_converter(target), pattern_check(target))
            self._typed_paths[contract, natively] = typed_path
        converted, holds = typed_path
        try:
            typed = converted(value)
        except msgspec.ValidationError:
            problems = self.violations(contract, value, rules=chosen)
            if problems:
                raise ContractError(contract, problems) from None
            return _convert_integral_floats(contract, value, target)
        if not holds(typed):
            problems = self.violations(contract, value, rules=chosen)
            if problems:
                raise ContractError(contract, problems)
        if contract in self._schema_only_rules:
            problems = self.violations(contract, value, rules=chosen)
            if problems:
                raise ContractError(contract, problems)
        elif chosen is not None:  # the types held, so the schema holds: the rules are left
            beyond = _rule_violations(chosen, value)
            if beyond:
                raise ContractError(contract, _merged([], beyond))
        return typed

    def violations(self, contract: str, value: Any, *, rules: Rules | None = None) -> Violations:
        """Every violation of `contract` by a parsed JSON `value`: see the module's `violations`."""
        chosen = self._chosen(contract, rules)
        return _merged(
            self._judged(self._validator(contract), value), _rule_violations(chosen, value)
        )

    def schema_violations(self, contract: str, value: Any, *, relaxed: Relaxed = ()) -> Violations:
        """The violations of `contract`'s schema alone by `value`: no rules beyond the schema.

        `relaxed` changes keywords for this judgement: pairs of a keyword's
        name and a function that is given the keyword's own check (as
        jsonschema's `validators.extend` takes them) and returns the check
        to judge by; keywords the schema's draft does not have are left
        out. Messages, pointers, the cap and the patterns' time bound are
        those of `violations`. Raises `UnknownContractError` for an unknown name.
        """
        self.require(contract)
        return _merged(self._judged(self._validator(contract, relaxed), value), [])

    def _judged(self, validator: Validator, value: Any) -> list[Violation]:
        errors = validator.iter_errors(value)
        # One violation may come from several errors: `required` reports each
        # missing field apart, and its explanation names them all at once.
        found: dict[Violation, None] = {}
        try:
            with matching_budget(self._pattern_seconds):
                for violation in chain.from_iterable(
                    _explain(error, validator.schema) for error in errors
                ):
                    found[violation] = None
                    if len(found) > MAX_VIOLATIONS:
                        break
        except RecursionError:
            # Only a schema that refers to itself makes the validator follow the
            # document's depth (none of plancontracts' own does): past Python's
            # recursion limit, the document is refused rather than judged.
            found[Violation("", _TOO_DEEP_FOR_SCHEMA)] = None
        except OutOfTime as out:
            pattern = shown(display_pattern(out.pattern or ""), limit=120)
            took = f"took more than {self._pattern_seconds} s"
            found[Violation("", f"matching the pattern {pattern} {took}: not judged")] = None
        return list(found)

    def parse_document(self, contract: str, data: bytes | str) -> Any:
        """Parse one document's text strictly: see the module's `parse_document`."""
        self.require(contract)
        if isinstance(data, str):
            try:
                data = data.encode("utf-8")
            except UnicodeEncodeError as error:
                where = f"at character {error.start}"
                raise ContractError(
                    contract, (Violation("", f"text holds a lone surrogate {where}, not UTF-8"),)
                ) from None
        elif not isinstance(data, bytes):
            raise TypeError(f"decode() takes bytes or str, not {type(data).__name__}")
        try:
            return parse(data)
        except MalformedJSON as error:
            raise ContractError(contract, (Violation(error.pointer, error.message),)) from None

    def _chosen(self, contract: str, rules: Rules | None) -> Rules | None:
        self.require(contract)
        if rules is None:
            if self._rules is None:
                return None
            if contract not in self._default_rules:  # found once: a family's module is read
                self._default_rules[contract] = self._rules(contract)
            return self._default_rules[contract]
        if rules.contract != contract:
            raise ValueError(f"{rules.name} are rules of {rules.contract}, not of {contract}")
        return rules

    def _validator(self, contract: str, relaxed: Relaxed = ()) -> Validator:
        validator = self._validators.get((contract, relaxed))
        if validator is None:
            self.require(contract)
            schema = self._schemas[contract]
            checker = _bounded_validator(validator_class(schema), relaxed)
            validator = checker(schema, registry=_nothing_retrieved())
            self._validators[contract, relaxed] = validator
        return validator


@dataclasses.dataclass(frozen=True)
class _SetContract(Contract[Any]):
    """A handle of a `ContractSet`, which holds its schema: see `ContractSet.__getitem__`."""

    contracts: ContractSet = dataclasses.field(kw_only=True, repr=False)


class _PackageSchemas(Mapping[str, Mapping[str, Any]]):
    """The schemas of a generated package by name, each read when first needed."""

    def __init__(self, package: str, names: Collection[str]) -> None:
        self._package = package
        self._names = names

    def __getitem__(self, name: str) -> Mapping[str, Any]:
        if name not in self._names:
            raise KeyError(name)
        schema: Mapping[str, Any] = json.loads(package_schema_text(self._package, name))
        return schema

    def __contains__(self, name: object) -> bool:
        return name in self._names  # without reading the schema

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names))

    def __len__(self) -> int:
        return len(self._names)


BUNDLED = ContractSet(
    _PackageSchemas(BUNDLED_PACKAGE, CONTRACTS),
    types={name: contract.type for name, contract in CONTRACTS.items()},
    schema_only_rules=frozenset(filter(has_schema_only_rules, contract_names())),
    rules=rules_of,
)
"plancontracts' own contracts: the set `decode`, `convert` and `violations` judge by."


@cache
def _package_contracts(package: str) -> ContractSet:
    """The contracts of a generated package, by its index, with their types and schemas.

    Raises `UnusableSchema` when `package` is not one `plancontracts generate` wrote.
    """
    module = sys.modules.get(package) or importlib.import_module(package)
    handles = getattr(module, "CONTRACTS", None)
    schema_only = getattr(module, "SCHEMA_ONLY_RULES", None)
    if not isinstance(handles, dict) or not isinstance(schema_only, dict):
        raise UnusableSchema(f"{package}: is not a package `plancontracts generate` wrote")
    return ContractSet(
        _PackageSchemas(package, handles),
        types={name: handle.type for name, handle in handles.items()},
        schema_only_rules=frozenset(name for name, rules in schema_only.items() if rules),
        pattern_seconds=PATTERN_SECONDS,
    )


PATTERN_SECONDS = 2.0
"""How long the patterns of a user's contracts may take to judge one document: a pattern such
as `^(a|a)*$` takes days on a string of 40 characters. plancontracts' own are not bounded: each
is known (tests/test_patterns.py)."""


def contracts_of(contract: AnyContract) -> tuple[ContractSet, str]:
    """The set that judges `contract`, and its name there.

    A name is one of plancontracts' own (`BUNDLED`); a handle belongs to
    plancontracts, to the generated package that wrote it, or to the set
    `load_contracts` gave it from. Raises TypeError for anything else.
    """
    name = contract_name(contract)
    if isinstance(contract, str):
        return BUNDLED, name
    owner = owner_of(contract)
    if isinstance(owner, ContractSet):
        return owner, name
    if contract.package == BUNDLED_PACKAGE:
        return BUNDLED, name
    return _package_contracts(contract.package), name


@overload
def decode(
    contract: Contract[_Document],
    data: bytes | str,
    *,
    rules: Rules | None = None,
    migrate: bool = False,
    options: Mapping[str, str] | None = None,
) -> _Document: ...
@overload
def decode(
    contract: str,
    data: bytes | str,
    *,
    rules: Rules | None = None,
    migrate: bool = False,
    options: Mapping[str, str] | None = None,
) -> Any: ...
def decode(
    contract: AnyContract,
    data: bytes | str,
    *,
    rules: Rules | None = None,
    migrate: bool = False,
    options: Mapping[str, str] | None = None,
) -> Any:
    """Decode one JSON document of `contract` into its generated type.

    `contract` is a handle (`PLAN`: the result is typed as a `Plan`) or a
    name (`"plan"`: typed `Any`). `data` is the document's text, as UTF-8
    bytes or as str. Returns an instance of the contract's root type (see
    `root_type`). Raises `ContractError` listing every violation when the
    text is not strict JSON or the document breaks the contract, and
    `UnknownContractError` when no contract has that name. `rules` are the
    checks beyond the schema (see `violations`).

    With `migrate`, a document an older version of the contract stored is
    brought to the current one first (see `migrate`, which also says what
    each step did; `options` are the steps' options): a current document
    decodes as without it, and one no step recognizes raises `ContractError`
    with one more violation saying so. A step that fails raises
    `MigrationFailed`, naming it.
    """
    if type(contract) is str and not migrate:  # the commonest call, with the least in its way
        return BUNDLED.decode(contract, data, rules=rules)
    contracts, name = contracts_of(contract)
    if not migrate:
        return contracts.decode(name, data, rules=rules)
    if not reads_valid(contract):  # a valid document is current: decoded at no extra cost
        try:
            return contracts.decode(name, data, rules=rules)
        except ContractError:
            pass
        parsed = contracts.parse_document(name, data)
    else:  # a valid document may be old: the steps reading those glance at it first
        parsed = contracts.parse_document(name, data)
        if not recognized_as_valid(contract, parsed):
            try:
                return contracts.convert(name, parsed, rules=rules)
            except ContractError:
                pass
    judge = partial(contracts.violations, name)
    value = upgraded(contract, parsed, judge=judge, options=options).value
    return contracts.convert(name, value, rules=rules)


def migrate(
    contract: AnyContract,
    value: Any,
    *,
    options: Mapping[str, str] | None = None,
    steps: Iterable[MigrationStep] = (),
) -> Migrated:
    """`value`, a parsed stored document of `contract`, brought to the contract's current version.

    `contract` is a handle or a name. `options` are what steps need that a
    document does not hold (`calendar` for WorldArchitect's world-time
    strings...). `steps` are a caller's own, for a user's contract (steps of
    other contracts are left out); they are tried before the family's (see
    `runtime.core.migrations`). A valid document is returned as it is, with
    no step taken, unless a step that reads valid documents recognizes it.
    Raises `ContractError` (the document's violations, then one saying no
    migration recognizes it) for an invalid document no step recognizes,
    `MigrationFailed` naming the step when a step raises, lacks an option or
    writes a document the contract refuses, and `UnknownContractError` for
    an unknown name.
    """
    contracts, name = contracts_of(contract)
    judge = partial(contracts.violations, name)
    return upgraded(contract, value, judge=judge, options=options, steps=steps)


@overload
def convert(
    contract: Contract[_Document], value: Any, *, rules: Rules | None = None
) -> _Document: ...
@overload
def convert(contract: str, value: Any, *, rules: Rules | None = None) -> Any: ...
def convert(contract: AnyContract, value: Any, *, rules: Rules | None = None) -> Any:
    """Convert an already parsed JSON `value` of `contract` into its generated type.

    `contract` is a handle or a name, as for `decode`. `value` is what a JSON
    parser returns (dicts, lists, str, int, float, bool, None). Raises
    `ContractError` listing every violation, and `UnknownContractError` when
    no contract has that name. `rules` are the checks beyond the schema (see
    `violations`).
    """
    contracts, name = contracts_of(contract)
    return contracts.convert(name, value, rules=rules)


def violations(contract: AnyContract, value: Any, *, rules: Rules | None = None) -> Violations:
    """Every violation of `contract` by the parsed JSON `value`, in document order.

    `contract` is a handle or a name, as for `decode`. The violations are
    the schema's and those of `rules`, the checks beyond the schema; by
    default the ones the contract's family declares (see
    `runtime.core.rules`), such as the planning protocol's for planning
    blocks in Story mode. Raises ValueError when `rules` are another
    contract's. Values of any size and depth are judged in time linear in
    their size: where there are more than `MAX_VIOLATIONS`, the search stops
    and the result lists the first ones found, with `complete` False.
    """
    contracts, name = contracts_of(contract)
    return contracts.violations(name, value, rules=rules)


def parse_document(contract: AnyContract, data: bytes | str) -> Any:
    """Parse one document's text strictly; malformed JSON is a ContractError of `contract`.

    Raises `UnknownContractError` first when no contract has that name, and
    TypeError when `data` is neither bytes nor str.
    """
    contracts, name = contracts_of(contract)
    return contracts.parse_document(name, data)


def _rule_violations(rules: Rules | None, value: Any) -> list[Violation]:
    # One more than the cap, so that a longer list says there are more.
    return list(islice(rules.find(value), MAX_VIOLATIONS + 1)) if rules else []


def _merged(schema: list[Violation], beyond: list[Violation]) -> Violations:
    """Both lists in document order, without duplicates, cut at MAX_VIOLATIONS.

    Where a rule explains a map key the schema refused (a choice key that is
    not snake_case), its message replaces the schema's. Each list holds more
    than MAX_VIOLATIONS only when its search was cut short.
    """
    explained = {violation.pointer for violation in beyond}
    kept = [
        violation
        for violation in schema
        if not (violation.pointer in explained and violation.keyword == "propertyNames")
    ]
    ordered = sorted(set(kept + beyond), key=_document_order)
    cut = max(len(schema), len(beyond), len(ordered)) > MAX_VIOLATIONS
    return Violations(ordered[:MAX_VIOLATIONS], complete=not cut)


@cache
def _converter(target: Any) -> Callable[[Any], Any]:
    """`msgspec.convert` into `target`, with the type's information built once.

    msgspec caches what it learns of a Struct type, but rebuilds it on every
    call for any other type: a tagged union (`tool-event`) or a map
    (`frozen-plans`) cost five times their conversion in that rebuilding.
    Such a type is converted as the one field of a Struct made for it.
    """
    if isinstance(target, type) and issubclass(target, msgspec.Struct):
        return lambda value: msgspec.convert(value, target)
    holder = msgspec.defstruct("Holder", [("value", target)])
    return lambda value: getattr(msgspec.convert({"value": value}, holder), "value")  # noqa: B009


def _convert_integral_floats(contract: str, value: Any, target: Any) -> Any:
    """`value`, which the schema accepts, converted with its integral floats as integers.

    Raises ContractError, one violation, when the generated types still cannot
    hold it: a number past a float's range (an integer of 400 digits where the
    schema says `number`), which the schema takes and a float does not. Any
    other refusal would be a generated type stricter than its schema.
    """
    try:
        return msgspec.convert(_integral(value), target)
    except msgspec.ValidationError as error:
        if not str(error).startswith("Number out of range"):
            raise AssertionError(
                f"the schema accepts a document that the generated types reject ({error}); "
                "this is a bug in plancontracts' code generation"
            ) from error
        pointer = _past_a_float(value)
        message = "is a number past the range of a float, which the generated type holds"
        raise ContractError(contract, (Violation(pointer, message, "type"),)) from None


def _past_a_float(value: Any) -> str:
    """The JSON Pointer of the first integer of `value` past a float's range, in document order.

    Each item keeps a link to its parent's path, spelt out only for the one found:
    copying paths on the way down would cost depth squared.
    """
    Link = tuple[Any, str | int] | None
    pending: list[tuple[Link, Any]] = [(None, value)]
    while pending:
        link, item = pending.pop()
        if isinstance(item, int) and not isinstance(item, bool) and abs(item) > _LARGEST_FLOAT:
            path: list[str | int] = []
            while link is not None:
                link, key = link
                path.append(key)
            return json_pointer(path[::-1])
        if isinstance(item, dict):
            pending += [((link, key), sub) for key, sub in reversed(item.items())]
        elif isinstance(item, list):
            pending += [((link, index), sub) for index, sub in reversed(list(enumerate(item)))]
    return ""


_LARGEST_FLOAT = int(sys.float_info.max)


def _integral(value: Any) -> Any:
    """A copy of a JSON value with every integral float as an int (2.0 as 2)."""

    def integral(leaf: Any) -> Any:
        return int(leaf) if isinstance(leaf, float) and leaf.is_integer() else leaf

    return copy_json(value, integral)


def _document_order(violation: Violation) -> tuple[tuple[int, int, str], ...]:
    # A value's own violations come before those inside it, where it starts.
    # An index sorts by its value, compared as its length, then its digits:
    # int() would refuse a key of more than 4,300 digits.
    tokens = violation.pointer.split("/")[1:]
    ordered = ((0, len(t), t) if _ARRAY_INDEX.fullmatch(t) else (1, 0, t) for t in tokens)
    return (*ordered, (-1, 0, violation.message))


# The schema's judgement ---------------------------------------------------------


@cache
def _bounded_validator(base: Any, relaxed: Relaxed = ()) -> Any:
    """A validator class whose work is bounded by what is explained.

    jsonschema's own keywords write a message quoting the offending value
    (its whole `repr`, however large or deep) and collect every error of
    every branch of `anyOf` and `oneOf`. These messages are never shown
    (violations are explained from the error's keyword and values, below),
    so the keywords that quote or collect are replaced by equivalents that
    do neither: each branch keeps at most MAX_VIOLATIONS + 1 errors. None
    walks the value by recursion, and no contract's schema refers to itself,
    so the validator's depth is the schema's, whatever the value's.
    Formats are annotations, as draft 2020-12 specifies by default; the
    contracts assert uuid and date-time with patterns instead. `relaxed`
    then changes keywords: see `ContractSet.schema_violations`.
    """
    # Imported here: jsonschema costs a tenth of a second to import, which
    # every skill script and CLI call would pay for nothing.
    from attrs import fields
    from jsonschema import validators

    # Only the keywords the draft has: draft 4 has no `const`, and must not start judging by it.
    bounded = {
        key: keyword for key, keyword in _bounded_keywords().items() if key in base.VALIDATORS
    }
    own = {**base.VALIDATORS, **bounded}
    bounded |= {name: relax(own[name]) for name, relax in relaxed if name in own}
    extend: Callable[..., Any] = validators.extend  # untyped in its stubs
    checker = extend(base, bounded)

    def evolve(self: Any, **changes: Any) -> Any:
        # jsonschema's own evolve picks the stock class of any `$schema` it meets below the
        # root (a `$ref` back to the root, an embedded file): the bounded keywords would be
        # lost there, and `$` read as Python reads it. A contract's schemas are of one draft.
        changes.setdefault("schema", self.schema)
        for field in fields(checker):
            if field.init and field.alias not in changes:
                changes[field.alias] = getattr(self, field.name)
        return checker(**changes)

    checker.evolve = evolve
    return checker


@cache
def _nothing_retrieved() -> Registry[Any]:
    """A registry that retrieves nothing: every schema judged by is self-contained.

    jsonschema's default one fetches an unknown URI over the network, or reads a `file:` one.
    """
    from referencing import Registry
    from referencing.exceptions import NoSuchResource

    def refuse(uri: str) -> Any:
        raise NoSuchResource(uri)

    # attrs' `retrieve` field is not visible to mypy as an argument.
    return Registry(retrieve=refuse)  # type: ignore[call-arg]


def _bounded_keywords() -> dict[str, Callable[..., Iterator[SchemaError]]]:
    from jsonschema.exceptions import ValidationError

    Keyword = Callable[[Any, Any, Any, Any], Iterator[ValidationError]]

    def sizes(measure: Callable[[int], bool], kind: str) -> Keyword:
        def keyword(validator: Any, bound: Any, instance: Any, _: Any) -> Iterator[SchemaError]:
            if validator.is_type(instance, kind) and not measure(len(instance) - bound):
                yield ValidationError("size out of bounds")

        return keyword

    def type_(validator: Any, types: Any, instance: Any, schema: Any) -> Iterator[SchemaError]:
        wanted = types if isinstance(types, list) else [types]
        if not any(validator.is_type(instance, kind) for kind in wanted):
            yield ValidationError("wrong type")

    def enum(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[SchemaError]:
        if not any(_equal(instance, each) for each in allowed):
            yield ValidationError("not one of the allowed values")

    def const(validator: Any, expected: Any, instance: Any, schema: Any) -> Iterator[SchemaError]:
        if not _equal(instance, expected):
            yield ValidationError("not the constant")

    def pattern(validator: Any, regex: str, instance: Any, schema: Any) -> Iterator[SchemaError]:
        if validator.is_type(instance, "string") and not matches(regex, instance):
            yield ValidationError("does not match the pattern")

    def unique_items(validator: Any, unique: Any, instance: Any, _: Any) -> Iterator[SchemaError]:
        # Compared by a canonical form, hashed: linear, where comparing every pair was quadratic.
        if unique is True and validator.is_type(instance, "array"):
            seen: set[str] = set()
            for item in instance:
                form = _canonical(item)
                if form in seen:
                    yield ValidationError("items are not unique")
                    return
                seen.add(form)

    def branches(validator: Any, schemas: list[Any], instance: Any) -> Iterator[list[SchemaError]]:
        for index, branch in enumerate(schemas):
            errors = validator.descend(instance, branch, schema_path=index)
            yield list(islice(errors, MAX_VIOLATIONS + 1))

    def any_of(validator: Any, schemas: Any, instance: Any, schema: Any) -> Iterator[SchemaError]:
        context: list[SchemaError] = []
        for errors in branches(validator, schemas, instance):
            if not errors:
                return
            context += errors
        yield ValidationError("valid under no branch", context=context)

    def one_of(validator: Any, schemas: Any, instance: Any, schema: Any) -> Iterator[SchemaError]:
        context: list[SchemaError] = []
        valid = 0
        for errors in branches(validator, schemas, instance):
            context += errors
            valid += not errors
            if valid > 1:
                yield ValidationError("valid under more than one branch")
                return
        if not valid:
            yield ValidationError("valid under no branch", context=context)

    def additional_properties(
        validator: Any, allowed: Any, instance: Any, schema: Any
    ) -> Iterator[SchemaError]:
        if not validator.is_type(instance, "object"):
            return
        extras = _extra_keys(instance, schema)
        if validator.is_type(allowed, "object"):
            for key in extras:
                yield from validator.descend(instance[key], allowed, path=key)
        elif allowed is False and next(extras, None) is not None:
            yield ValidationError("unknown fields")  # explained one key at a time

    return {
        "type": type_,
        "enum": enum,
        "const": const,
        **pattern_keywords(),
        "pattern": pattern,
        "uniqueItems": unique_items,
        "anyOf": any_of,
        "oneOf": one_of,
        "additionalProperties": additional_properties,
        "minLength": sizes(lambda over: over >= 0, "string"),
        "maxLength": sizes(lambda over: over <= 0, "string"),
        "minItems": sizes(lambda over: over >= 0, "array"),
        "maxItems": sizes(lambda over: over <= 0, "array"),
        "minProperties": sizes(lambda over: over >= 0, "object"),
        "maxProperties": sizes(lambda over: over <= 0, "object"),
    }


def _extra_keys(instance: dict[str, Any], schema: Any) -> Iterator[str]:
    """The keys of `instance` that neither `properties` nor `patternProperties` of `schema` name."""
    known = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    return (
        key for key in instance if key not in known and not any(matches(p, key) for p in patterns)
    )


def _canonical(value: Any) -> str:
    """`value` as text that is the same for JSON-equal values, for hashing.

    As JSON Schema compares values: 1 and 1.0 are equal, true and 1 are not,
    and an object's key order does not count. Built without recursion.
    """
    out: list[str] = []
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, _Literal):
            out.append(item)
        elif isinstance(item, dict):
            out.append("{")
            pending.append(_Literal("}"))
            for key in sorted(item, reverse=True):
                pending += [_Literal(","), item[key], _Literal(json.dumps(key) + ":")]
        elif isinstance(item, list):
            out.append("[")
            pending.append(_Literal("]"))
            for element in reversed(item):
                pending += [_Literal(","), element]
        elif isinstance(item, bool) or item is None:
            out.append(json.dumps(item))
        elif isinstance(item, int | float):
            # An integral float is its integer (1.0 is 1); other floats keep their repr.
            integral = isinstance(item, int) or (item.is_integer())
            out.append(str(int(item)) if integral else repr(item))
        else:
            out.append(json.dumps(item))
    return "".join(out)


class _Literal(str):
    """A piece of `_canonical`'s text, told apart from a string value still to be written."""


def _equal(one: Any, two: Any) -> bool:
    """Whether two JSON values are equal as JSON Schema compares them (1 is 1.0, not true)."""
    pairs = [(one, two)]
    while pairs:
        left, right = pairs.pop()
        if isinstance(left, dict) and isinstance(right, dict):
            if left.keys() != right.keys():
                return False
            pairs += [(left[key], right[key]) for key in left]
        elif isinstance(left, list) and isinstance(right, list):
            if len(left) != len(right):
                return False
            pairs += zip(left, right, strict=True)
        elif isinstance(left, dict | list) or isinstance(right, dict | list):
            return False
        elif isinstance(left, bool) or isinstance(right, bool):
            if left is not right:
                return False
        elif left != right:
            return False
    return True


# Messages ------------------------------------------------------------------


def _explain(error: SchemaError, root: Any) -> Iterator[Violation]:
    """Turn one jsonschema error into violations with plain, one-line messages, as they are needed.

    One error can stand for millions of violations (an object with a million
    unknown fields), so they come one at a time, for the caller to stop.
    """
    pointer = json_pointer(error.absolute_path)
    keyword = str(error.validator)
    expected: Any = error.validator_value
    instance: Any = error.instance
    schema: Any = error.schema
    if "propertyNames" in error.relative_schema_path:
        # jsonschema reports a bad key at its object, with the key as the instance.
        key = str(instance)
        message = f"the key {_describe(keyword, expected, key)}"
        yield Violation(f"{pointer}/{escape_token(key)}", message, "propertyNames")
    elif keyword == "additionalProperties" and expected is False:
        known = list(schema.get("properties", {}))
        for key in _extra_keys(instance, schema):
            yield Violation(f"{pointer}/{escape_token(key)}", _unknown_field(key, known), keyword)
    elif keyword == "oneOf" and "discriminator" in schema and (tagged := _tags(schema, root)):
        yield from _explain_tagged(error, schema, tagged, pointer, root)
    elif keyword == "anyOf" and {"type": "null"} in expected:
        # A nullable value: explain what is wrong with the value it is not null for.
        null_branch = expected.index({"type": "null"})
        for sub in error.context or ():
            if sub.relative_schema_path[0] != null_branch:
                for violation in _explain(sub, root):
                    message = f"{violation.message}, or null"
                    yield Violation(violation.pointer, message, violation.keyword)
    else:
        exclusive = f"exclusive{keyword.title()}"
        if keyword in ("minimum", "maximum") and _member(schema, exclusive) is True:
            keyword = exclusive  # draft 4's: a flag beside the bound
        yield Violation(pointer, _describe(keyword, expected, instance), keyword)


def _explain_tagged(
    error: SchemaError, schema: Any, tagged: tuple[str, list[Any]], pointer: str, root: Any
) -> Iterator[Violation]:
    tag, tags = tagged
    instance: Any = error.instance
    choices = ", ".join(json.dumps(value) for value in tags)
    if not isinstance(instance, dict):
        yield Violation(pointer, f"expected an object, got {_json_type(instance)}", "type")
    elif tag not in instance:
        message = f'missing required field "{tag}" (one of {choices})'
        yield Violation(pointer, message, "required")
    elif not any(_equal(instance[tag], known) for known in tags):
        message = f"unknown {tag} {shown(instance[tag])}; expected one of {choices}"
        yield Violation(f"{pointer}/{escape_token(tag)}", message, "const")
    else:
        chosen = next(index for index, known in enumerate(tags) if _equal(instance[tag], known))
        explained = False
        for sub in error.context or ():
            if sub.relative_schema_path[0] == chosen:
                for violation in _explain(sub, root):
                    explained = True
                    yield violation
        if not explained:  # the tag chose a branch that holds: another one held too
            yield Violation(pointer, _describe("oneOf", schema["oneOf"], instance), "oneOf")


def _tags(schema: Any, root: Any) -> tuple[str, list[Any]] | None:
    """The tag of a tagged `oneOf` and the value each branch sets it to, or None where unclear.

    plancontracts' own schemas set each with a `const`, in a definition the
    branch refers to; other schemas may not, and are then explained as any
    `oneOf` is.
    """
    tag = _member(schema, "discriminator", "propertyName")
    if not isinstance(tag, str) or not isinstance(schema["oneOf"], list):
        return None
    tags = []
    for branch in schema["oneOf"]:
        target = branch
        reference = _member(branch, "$ref")
        if isinstance(reference, str) and reference.startswith("#/$defs/"):
            target = _member(root, "$defs", reference.removeprefix("#/$defs/"))
        value = _member(target, "properties", tag)
        if not isinstance(value, dict) or "const" not in value:
            return None
        tags.append(value["const"])
    return tag, tags


def _member(node: Any, *keys: str) -> Any:
    """`node[keys[0]][keys[1]]...`, or None where one of them is missing or not an object."""
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _describe(keyword: str, expected: Any, instance: Any) -> str:
    match keyword:
        case "type":
            wanted = expected if isinstance(expected, list) else [expected]
            names = " or ".join(_TYPE_NAMES[name] for name in wanted)
            return f"expected {names}, got {_json_type(instance)}"
        case "required":
            missing = [shown(name) for name in expected if name not in instance]
            noun = "field" if len(missing) == 1 else "fields"
            return f"missing required {noun} {', '.join(missing)}"
        case "enum":
            return f"{shown(instance)} is not one of {', '.join(shown(v) for v in expected)}"
        case "const":
            return f"must be {shown(expected)}, got {shown(instance)}"
        case "pattern":
            pattern = shown(display_pattern(expected), limit=400)
            return f"{shown(instance)} does not match the pattern {pattern}"
        case "minLength":
            return f"is {len(instance)} characters long; needs at least {expected}"
        case "maxLength":
            return f"is {len(instance)} characters long; at most {expected} allowed"
        case "minItems" | "maxItems":
            count = f"{len(instance)} item" + ("" if len(instance) == 1 else "s")
            if keyword == "minItems":
                return f"has {count}; needs at least {expected}"
            return f"has {count}; at most {expected} allowed"
        case "minProperties" | "maxProperties":
            count = f"{len(instance)} field" + ("" if len(instance) == 1 else "s")
            if keyword == "minProperties":
                return f"has {count}; needs at least {expected}"
            return f"has {count}; at most {expected} allowed"
        case "uniqueItems":
            first: dict[str, int] = {}
            for index, item in enumerate(instance):
                earlier = first.setdefault(_canonical(item), index)
                if earlier != index:
                    return f"items {earlier} and {index} are equal; items must be unique"
            return "items must be unique"
        case "minimum" | "exclusiveMinimum" | "maximum" | "exclusiveMaximum":
            return f"{shown(instance)} is {_BOUNDS[keyword]} {expected}"
        case _:
            return f"breaks the rule {keyword!r} of the schema ({shown(expected)})"


_TYPE_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}
_BOUNDS = {
    "minimum": "less than the minimum",
    "exclusiveMinimum": "not greater than",
    "maximum": "greater than the maximum",
    "exclusiveMaximum": "not less than",
}


def _unknown_field(key: str, known: list[str]) -> str:
    # difflib indexes every character of the key. A key more than 2.34 times as
    # long as every known name cannot reach its 0.6 similarity cutoff (2 x the
    # shorter length / the sum of both), so such keys skip it: one can be 16 MB.
    longest = max(map(len, known), default=0)
    close = difflib.get_close_matches(key, known, n=1) if len(key) <= 3 * longest else []
    hint = f'; did you mean "{close[0]}"?' if close else ""
    return f"unknown field {shown(key)}{hint}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return f"the string {shown(value)}"
    return "an array" if isinstance(value, list) else "an object"
