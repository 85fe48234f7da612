"""Validating external JSON against a contract and decoding it into typed objects.

Typed decoding is the fast path: msgspec parses the text and converts it into
the generated structs, which enforce types, required and unknown fields,
enums, bounds and patterns; contracts with rules beyond their schema (see
`runtime.protocol_rules`) then have those checked. The authoritative schema
takes over in three cases: to explain a rejection (msgspec stops at the first
problem; the schema lists every one, each with its JSON Pointer), for
contracts with rules the structs cannot express, and where the two disagree
about a value, which happens for one known case only: JSON Schema counts `1.0`
as an integer and msgspec does not. The schema decides; such numbers are
typed as integers.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import TYPE_CHECKING, Any

import msgspec

from plancontracts.runtime.contracts import has_schema_only_rules, root_type, schema_validator
from plancontracts.runtime.errors import ContractError, Violation, shown
from plancontracts.runtime.jsontext import TOO_DEEP, MalformedJSON, escape_token, parse
from plancontracts.runtime.planning_mechanics import Mode
from plancontracts.runtime.protocol_rules import protocol_violations
from plancontracts.runtime.schema_text import display_pattern

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError as SchemaError

_ARRAY_INDEX = re.compile(r"[0-9]+")


def decode(contract: str, data: bytes | str, *, mode: Mode = "story") -> Any:
    """Decode one JSON document of `contract` into its generated type.

    `data` is the document's text, as UTF-8 bytes or as str. Returns an
    instance of the contract's root type (see `root_type`). Raises
    `ContractError` listing every violation when the text is not strict JSON
    or the document breaks the contract, and `UnknownContractError` when no
    contract has that name. `mode` matters for planning blocks only (see
    `violations`).
    """
    return convert(contract, parse_document(contract, data), mode=mode)


def convert(contract: str, value: Any, *, mode: Mode = "story") -> Any:
    """Convert an already parsed JSON `value` of `contract` into its generated type.

    `value` is what a JSON parser returns (dicts, lists, str, int, float,
    bool, None). Raises `ContractError` listing every violation, and
    `UnknownContractError` when no contract has that name. `mode` matters
    for planning blocks only (see `violations`).
    """
    target = root_type(contract)
    try:
        typed = msgspec.convert(value, target)
    except msgspec.ValidationError:
        problems = violations(contract, value, mode=mode)
        if problems:
            raise ContractError(contract, problems) from None
        return _convert_integral_floats(value, target)
    if has_schema_only_rules(contract):
        problems = violations(contract, value, mode=mode)
    else:  # the types held, so the schema holds: only the rules beyond it are left
        problems = _merged([], protocol_violations(contract, value, mode))
    if problems:
        raise ContractError(contract, problems)
    return typed


def violations(contract: str, value: Any, *, mode: Mode = "story") -> tuple[Violation, ...]:
    """Every violation of `contract` by the parsed JSON `value`, in document order.

    That is the schema's violations and, for the contracts with rules beyond
    their schema (planning blocks, frozen plans; see `runtime.protocol_rules`),
    those rules' violations. `mode` matters for planning blocks only: Think
    mode adds its own rules to Story mode's.
    """
    validator = schema_validator(contract)
    found: list[Violation] = []
    try:
        for error in validator.iter_errors(value):
            found.extend(_explain(error, validator.schema))
    except RecursionError:
        # Only a value built in Python gets here: the parser refuses such nesting first.
        return (Violation("", TOO_DEEP),)
    return _merged(found, protocol_violations(contract, value, mode))


def _merged(schema: list[Violation], protocol: list[Violation]) -> tuple[Violation, ...]:
    """Both lists in document order, without duplicates.

    Where a rule explains a map key the schema's pattern refused (a choice
    key that is not snake_case), its message replaces the pattern's.
    """
    explained = {violation.pointer for violation in protocol}
    kept = [
        violation
        for violation in schema
        if not (violation.pointer in explained and violation.message.startswith("the key "))
    ]
    return tuple(sorted(set(kept + protocol), key=_document_order))


def parse_document(contract: str, data: bytes | str) -> Any:
    """Parse one document's text strictly; malformed JSON is a ContractError of `contract`."""
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


def _convert_integral_floats(value: Any, target: Any) -> Any:
    def integral(node: Any) -> Any:
        if isinstance(node, float) and node.is_integer():
            return int(node)
        if isinstance(node, dict):
            return {key: integral(child) for key, child in node.items()}
        if isinstance(node, list):
            return [integral(child) for child in node]
        return node

    try:
        return msgspec.convert(integral(value), target)
    except msgspec.ValidationError as error:
        raise AssertionError(
            f"the schema accepts a document that the generated types reject ({error}); "
            "this is a bug in plancontracts' code generation"
        ) from error


def _document_order(violation: Violation) -> tuple[tuple[int, int | str], ...]:
    tokens = violation.pointer.split("/")[1:]
    ordered = ((0, int(t)) if _ARRAY_INDEX.fullmatch(t) else (1, t) for t in tokens)
    return (*ordered, (2, violation.message))


# Messages ------------------------------------------------------------------


def _explain(error: SchemaError, root: Any) -> list[Violation]:
    """Turn one jsonschema error into violations with plain, one-line messages."""
    pointer = _pointer(error.absolute_path)
    keyword = str(error.validator)
    expected: Any = error.validator_value
    instance: Any = error.instance
    schema: Any = error.schema
    if "propertyNames" in error.relative_schema_path:
        # jsonschema reports a bad key at its object, with the key as the instance.
        key = str(instance)
        message = f"the key {_describe(keyword, expected, key)}"
        return [Violation(f"{pointer}/{escape_token(key)}", message)]
    if keyword == "additionalProperties" and expected is False:
        known = list(schema.get("properties", {}))
        return [
            Violation(f"{pointer}/{escape_token(key)}", _unknown_field(key, known))
            for key in instance
            if key not in known
        ]
    if keyword == "oneOf" and "discriminator" in schema:
        return _explain_tagged(error, schema, pointer, root)
    if keyword == "anyOf" and {"type": "null"} in expected:
        # A nullable value: explain what is wrong with the value it is not null for.
        null_branch = expected.index({"type": "null"})
        return [
            Violation(violation.pointer, f"{violation.message}, or null")
            for sub in error.context or ()
            if sub.relative_schema_path[0] != null_branch
            for violation in _explain(sub, root)
        ]
    return [Violation(pointer, _describe(keyword, expected, instance))]


def _explain_tagged(error: SchemaError, schema: Any, pointer: str, root: Any) -> list[Violation]:
    tag = schema["discriminator"]["propertyName"]
    tags = []
    for branch in schema["oneOf"]:
        target = root["$defs"][branch["$ref"].removeprefix("#/$defs/")]
        tags.append(target["properties"][tag]["const"])
    instance: Any = error.instance
    choices = ", ".join(json.dumps(value) for value in tags)
    if not isinstance(instance, dict):
        return [Violation(pointer, f"expected an object, got {_json_type(instance)}")]
    if tag not in instance:
        return [Violation(pointer, f'missing required field "{tag}" (one of {choices})')]
    if instance[tag] not in tags:
        message = f"unknown {tag} {shown(instance[tag])}; expected one of {choices}"
        return [Violation(f"{pointer}/{escape_token(tag)}", message)]
    chosen = tags.index(instance[tag])
    return [
        violation
        for sub in error.context or ()
        if sub.relative_schema_path[0] == chosen
        for violation in _explain(sub, root)
    ]


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
        case "minItems":
            return f"has {len(instance)} items; needs at least {expected}"
        case "maxItems":
            return f"has {len(instance)} items; at most {expected} allowed"
        case "minProperties" | "maxProperties":
            count = f"{len(instance)} field" + ("" if len(instance) == 1 else "s")
            if keyword == "minProperties":
                return f"has {count}; needs at least {expected}"
            return f"has {count}; at most {expected} allowed"
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
    close = difflib.get_close_matches(key, known, n=1)
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


def _pointer(path: Any) -> str:
    return "".join(f"/{escape_token(str(token))}" for token in path)
