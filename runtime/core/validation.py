"""Validating external JSON against a contract and decoding it into typed objects.

Typed decoding is the fast path: msgspec parses the text and converts it into
the generated structs, which enforce types, required and unknown fields,
enums, bounds and patterns; contracts whose family has rules beyond the
schema (see `runtime.core.rules`) then have those checked. The authoritative
schema takes over in three cases: to explain a rejection (msgspec stops at
the first problem; the schema lists them all, each with its JSON Pointer, up
to `MAX_VIOLATIONS`), for contracts with rules the structs cannot express,
and where the two disagree about a value, which happens for one known case
only: JSON Schema counts `1.0` as an integer and msgspec does not. The schema
decides; such numbers are typed as integers.

Nothing here walks a value by recursion, so every value the parser accepts,
however deep, gets its verdict.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterator
from functools import cache
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

import msgspec

from .contracts import contract_schema, has_schema_only_rules, root_type
from .errors import MAX_VIOLATIONS, ContractError, Violation, Violations, shown
from .jsontext import MalformedJSON, copy_json, escape_token, parse
from .jsontext import pointer as json_pointer
from .rules import Rules, rules_of
from .schema_text import display_pattern

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError as SchemaError

_ARRAY_INDEX = re.compile(r"[0-9]+")


def decode(contract: str, data: bytes | str, *, rules: Rules | None = None) -> Any:
    """Decode one JSON document of `contract` into its generated type.

    `data` is the document's text, as UTF-8 bytes or as str. Returns an
    instance of the contract's root type (see `root_type`). Raises
    `ContractError` listing every violation when the text is not strict JSON
    or the document breaks the contract, and `UnknownContractError` when no
    contract has that name. `rules` are the checks beyond the schema (see
    `violations`).
    """
    return convert(contract, parse_document(contract, data), rules=rules)


def convert(contract: str, value: Any, *, rules: Rules | None = None) -> Any:
    """Convert an already parsed JSON `value` of `contract` into its generated type.

    `value` is what a JSON parser returns (dicts, lists, str, int, float,
    bool, None). Raises `ContractError` listing every violation, and
    `UnknownContractError` when no contract has that name. `rules` are the
    checks beyond the schema (see `violations`).
    """
    target = root_type(contract)
    chosen = _chosen(contract, rules)
    try:
        typed = msgspec.convert(value, target)
    except msgspec.ValidationError:
        problems = violations(contract, value, rules=chosen)
        if problems:
            raise ContractError(contract, problems) from None
        return _convert_integral_floats(value, target)
    if has_schema_only_rules(contract):
        problems = violations(contract, value, rules=chosen)
    else:  # the types held, so the schema holds: only the rules beyond it are left
        problems = _merged([], _rule_violations(chosen, value))
    if problems:
        raise ContractError(contract, problems)
    return typed


def violations(contract: str, value: Any, *, rules: Rules | None = None) -> Violations:
    """Every violation of `contract` by the parsed JSON `value`, in document order.

    That is the schema's violations and those of `rules`, the checks beyond
    the schema; by default the ones the contract's family declares (see
    `runtime.core.rules`), such as the planning protocol's for planning
    blocks in Story mode. Raises ValueError when `rules` are another
    contract's. Values of any size and depth are judged in time linear in
    their size: where there are more than `MAX_VIOLATIONS`, the search stops
    and the result lists the first ones found, with `complete` False.
    """
    chosen = _chosen(contract, rules)
    validator = _validator(contract)
    errors = validator.iter_errors(value)
    # One violation may come from several errors: `required` reports each
    # missing field apart, and its explanation names them all at once.
    found: dict[Violation, None] = {}
    for violation in chain.from_iterable(_explain(error, validator.schema) for error in errors):
        found[violation] = None
        if len(found) > MAX_VIOLATIONS:
            break
    return _merged(list(found), _rule_violations(chosen, value))


def _chosen(contract: str, rules: Rules | None) -> Rules | None:
    if rules is None:
        return rules_of(contract)
    if rules.contract != contract:
        raise ValueError(f"{rules.name} are rules of {rules.contract}, not of {contract}")
    return rules


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


def parse_document(contract: str, data: bytes | str) -> Any:
    """Parse one document's text strictly; malformed JSON is a ContractError of `contract`.

    Raises `UnknownContractError` first when no contract has that name, and
    TypeError when `data` is neither bytes nor str.
    """
    root_type(contract)
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
    try:
        return msgspec.convert(_integral(value), target)
    except msgspec.ValidationError as error:
        raise AssertionError(
            f"the schema accepts a document that the generated types reject ({error}); "
            "this is a bug in plancontracts' code generation"
        ) from error


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
def _validator(contract: str) -> Draft202012Validator:
    """A validator for `contract`'s schema whose work is bounded by what is explained.

    jsonschema's own keywords write a message quoting the offending value
    (its whole `repr`, however large or deep) and collect every error of
    every branch of `anyOf` and `oneOf`. These messages are never shown
    (violations are explained from the error's keyword and values, below),
    so the keywords that quote or collect are replaced by equivalents that
    do neither: each branch keeps at most MAX_VIOLATIONS + 1 errors. None
    walks the value by recursion, and no contract's schema refers to itself,
    so the validator's depth is the schema's, whatever the value's.
    Formats are annotations, as draft 2020-12 specifies by default; the
    contracts assert uuid and date-time with patterns instead.
    """
    # Imported here: jsonschema costs a tenth of a second to import, which
    # every skill script and CLI call would pay for nothing.
    from jsonschema import Draft202012Validator, validators

    extend: Callable[..., type[Draft202012Validator]] = validators.extend  # untyped in its stubs
    bounded = extend(Draft202012Validator, _bounded_keywords())
    validator: Draft202012Validator = bounded(contract_schema(contract))
    return validator


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
        if validator.is_type(instance, "string") and not re.search(regex, instance):
            yield ValidationError("does not match the pattern")

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
        known = schema.get("properties", {})
        patterns = schema.get("patternProperties", {})
        extras = (
            key
            for key in instance
            if key not in known and not any(re.search(p, key) for p in patterns)
        )
        if validator.is_type(allowed, "object"):
            for key in extras:
                yield from validator.descend(instance[key], allowed, path=key)
        elif allowed is False and next(extras, None) is not None:
            yield ValidationError("unknown fields")  # explained one key at a time

    return {
        "type": type_,
        "enum": enum,
        "const": const,
        "pattern": pattern,
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
        for key in instance:
            if key not in known:
                yield Violation(
                    f"{pointer}/{escape_token(key)}", _unknown_field(key, known), keyword
                )
    elif keyword == "oneOf" and "discriminator" in schema:
        yield from _explain_tagged(error, schema, pointer, root)
    elif keyword == "anyOf" and {"type": "null"} in expected:
        # A nullable value: explain what is wrong with the value it is not null for.
        null_branch = expected.index({"type": "null"})
        for sub in error.context or ():
            if sub.relative_schema_path[0] != null_branch:
                for violation in _explain(sub, root):
                    message = f"{violation.message}, or null"
                    yield Violation(violation.pointer, message, violation.keyword)
    else:
        yield Violation(pointer, _describe(keyword, expected, instance), keyword)


def _explain_tagged(
    error: SchemaError, schema: Any, pointer: str, root: Any
) -> Iterator[Violation]:
    tag = schema["discriminator"]["propertyName"]
    tags = []
    for branch in schema["oneOf"]:
        target = root["$defs"][branch["$ref"].removeprefix("#/$defs/")]
        tags.append(target["properties"][tag]["const"])
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
        chosen = tags.index(instance[tag])
        for sub in error.context or ():
            if sub.relative_schema_path[0] == chosen:
                yield from _explain(sub, root)


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
