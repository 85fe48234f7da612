"""The generated models and the schemas agree, for every contract, on every document drawn.

For each contract, hypothesis draws valid documents from the schema and
mutates each into a possibly invalid one. For every document:

- the typed path alone (msgspec converting into the generated types, then
  plancontracts checking the patterns the types carry) and the
  `jsonschema` library give the same verdict, except where the schema has
  rules the types cannot express (then the types may only be more lenient)
  and for integral floats such as `1.0` in an integer field, which JSON
  Schema accepts and msgspec does not;
- `decode`, the public path, accepts exactly what the schema accepts and the
  contract's rules beyond the schema (declared by families: `runtime.core.rules`) allow;
- `decode` gives the same value or the same violations with the native fast
  path and without it;
- a rejection names only places that exist in the document;
- an accepted document loses nothing: the typed object holds every value of
  the input and survives an encode/decode round trip unchanged.
"""

from __future__ import annotations

import json
import re
from contextlib import nullcontext
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from schema_strategies import matching, mutated, read_directly, valid_documents
from tiers import examples_at_most

from plancontracts import ContractError, contract_names, contract_schema, decode, root_type
from plancontracts.runtime.core.contracts import has_schema_only_rules
from plancontracts.runtime.core.native import turned_off
from plancontracts.runtime.core.rules import rules_of
from plancontracts.runtime.core.schema_text import display_pattern
from plancontracts.runtime.core.typed_patterns import conforming

# The largest documents: even the fast tier's thirty of each take seconds to draw and judge.
LARGEST = {"story-draft", "story-package"}


@pytest.mark.parametrize(
    "contract",
    [
        pytest.param(name, marks=pytest.mark.slow if name in LARGEST else ())
        for name in contract_names()
    ],
)
def test_typed_path_and_schema_agree(contract: str) -> None:
    schema = contract_schema(contract)
    validator = Draft202012Validator(schema)
    drawn = {"documents": 0, "valid mutants": 0, "invalid mutants": 0}
    # Each of the largest takes a hundred times a plan's time to draw and judge: fewer.
    count = examples_at_most(300) if contract in LARGEST else settings().max_examples

    @settings(max_examples=count)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        document = data.draw(valid_documents(schema), label="document")
        assert judge(contract, validator, document), f"the strategy drew an invalid {contract}"
        mutant = data.draw(mutated(document), label="mutant")
        verdict = judge(contract, validator, mutant)
        drawn["documents"] += 1
        drawn["valid mutants" if verdict else "invalid mutants"] += 1

    check()
    # A strategy that silently drew nothing would make this test prove nothing.
    assert drawn["documents"] >= count, drawn
    assert drawn["invalid mutants"] > 0, drawn


def schema_patterns(value: Any) -> set[str]:
    """Every `pattern` keyword in a schema, as written."""
    if isinstance(value, dict):
        found = {value["pattern"]} if isinstance(value.get("pattern"), str) else set()
        return found.union(*(schema_patterns(child) for child in value.values()))
    if isinstance(value, list):
        return set().union(*(schema_patterns(child) for child in value))
    return set()


PATTERNS = sorted(set().union(*(schema_patterns(contract_schema(n)) for n in contract_names())))


def test_every_pattern_of_the_contracts_is_drawn_directly() -> None:
    # One left to `st.from_regex` would still be right, at several times the cost.
    assert PATTERNS
    assert [p for p in PATTERNS if read_directly(display_pattern(p)) is None] == []


# The agreement test checks every drawn document against its schema; these two
# check the drawing of patterns alone, which needs fewer examples.
@settings(max_examples=examples_at_most(200))
@given(st.data())
def test_a_pattern_drawn_directly_draws_only_strings_it_matches(data: st.DataObject) -> None:
    pattern = data.draw(st.sampled_from(PATTERNS), label="pattern")
    text = data.draw(matching(display_pattern(pattern)), label="text")
    assert re.fullmatch(pattern, text), (pattern, text)


@pytest.mark.parametrize("pattern", [r"^(a|b)\1$", r"^\w+$", r"^a$|^b$", "(?i)^ab$"])
def test_a_pattern_it_cannot_read_is_left_to_from_regex(pattern: str) -> None:
    assert read_directly(pattern) is None

    @settings(max_examples=examples_at_most(50))
    @given(matching(pattern))
    def check(text: str) -> None:
        assert re.fullmatch(pattern, text), text

    check()


def judge(contract: str, validator: Draft202012Validator, document: Any) -> bool:
    """Check every agreement property on one document; return the schema's verdict."""
    schema_ok = validator.is_valid(document)
    try:
        conforming(document, root_type(contract))
        typed_ok = True
    except msgspec.ValidationError:
        typed_ok = False
    if schema_ok and not typed_ok:
        assert has_integral_float(document), "the types reject a document the schema accepts"
    if typed_ok and not schema_ok:
        assert has_schema_only_rules(contract), "the types accept a document the schema rejects"

    text = json.dumps(document).encode()
    rules = rules_of(contract)
    rules_ok = rules is None or next(rules.find(document), None) is None
    assert_both_ways_agree(contract, text)
    try:
        typed = decode(contract, text)
    except ContractError as error:
        assert not (schema_ok and rules_ok), "decode() rejects a document the contract accepts"
        for violation in error.violations:
            assert resolves(document, violation.pointer), violation
        return schema_ok
    assert schema_ok, "decode() accepts a document the schema rejects"
    assert rules_ok, "decode() accepts a document that breaks the contract's rules"
    assert holds(msgspec.to_builtins(typed), document), "the typed object lost input values"
    assert decode(contract, msgspec.json.encode(typed)) == typed
    return True


def has_integral_float(value: Any) -> bool:
    if isinstance(value, float):
        return value.is_integer()
    if isinstance(value, dict):
        return any(has_integral_float(child) for child in value.values())
    if isinstance(value, list):
        return any(has_integral_float(child) for child in value)
    return False


def resolves(document: Any, pointer: str) -> bool:
    """Whether the JSON Pointer names a value in `document`."""
    node = document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and re.fullmatch("[0-9]+", token) and int(token) < len(node):
            node = node[int(token)]
        else:
            return False
    return True


def holds(output: Any, given_value: Any) -> bool:
    """Whether `output` contains every value of `given_value` (it may add defaults)."""
    if isinstance(given_value, dict):
        return isinstance(output, dict) and all(
            key in output and holds(output[key], child) for key, child in given_value.items()
        )
    if isinstance(given_value, list):
        return (
            isinstance(output, list | tuple)  # frozen structs hold arrays as tuples
            and len(output) == len(given_value)
            and all(holds(o, g) for o, g in zip(output, given_value, strict=True))
        )
    if isinstance(given_value, float) and given_value.is_integer() and isinstance(output, int):
        return output == given_value  # an integral float typed as an integer
    if type(given_value) is int and type(output) is float:
        return output == given_value  # an integer in a `number` field
    return type(output) is type(given_value) and output == given_value


def assert_both_ways_agree(contract: str, text: bytes) -> None:
    """`decode` gives the same typed value, or the same violations, with and without the fast path.

    Without the `fast` extra both calls take the slow path, and agree trivially;
    the suite runs with it installed (dev.py installs it), and again without it
    (test_fast_path_off.py).
    """
    outcomes = []
    for off in (False, True):
        with turned_off() if off else nullcontext():
            try:
                outcomes.append(decode(contract, text))
            except ContractError as error:
                outcomes.append(error.violations)
    assert outcomes[0] == outcomes[1]
