"""The Python API: `decode` returns typed objects or raises `ContractError`, with pointers."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from plancontracts import (
    ContractError,
    UnknownContractError,
    Violation,
    contract_schema,
    decode,
    violations,
)
from plancontracts.generated import tool_plans
from plancontracts.runtime.core.errors import MAX_VIOLATIONS, MalformedJSON, shown
from plancontracts.runtime.core.jsontext import DENSE_FROM, parse, parsed_cost
from plancontracts.runtime.core.validation import ContractSet

PLAN = contract_schema("plan")["examples"][0]


def plan_with(**changes: Any) -> bytes:
    return json.dumps({**PLAN, **changes}).encode()


def violation_of(contract: str, data: bytes | str) -> Violation:
    with pytest.raises(ContractError) as raised:
        decode(contract, data)
    assert raised.value.contract == contract
    [violation] = raised.value.violations
    return violation


def test_decode_returns_the_generated_type_with_snake_case_names() -> None:
    plan = decode("plan", json.dumps(PLAN))
    assert isinstance(plan, tool_plans.Plan)
    assert plan.tools[0].tool_path == "skills/torch-lighter/light.py"
    assert plan.tools[1].retry_policy is msgspec.UNSET
    assert plan.tools[1].async_ is False  # the schema default, applied
    assert plan.metadata is not msgspec.UNSET
    assert plan.metadata.parent_plan_id is None


def test_decode_takes_bytes_and_str_alike() -> None:
    text = json.dumps(PLAN, ensure_ascii=False)
    assert decode("plan", text) == decode("plan", text.encode())


def test_decode_refuses_other_types() -> None:
    with pytest.raises(TypeError, match="bytes or str"):
        # A wrong type on purpose: what mypy refuses, decode refuses at run time too.
        decode("plan", bytearray(b"{}"))  # type: ignore[call-overload]


def test_an_unknown_contract_is_a_lookup_error_naming_the_known_ones() -> None:
    with pytest.raises(
        UnknownContractError, match=r'unknown contract "plans" \(did you mean "plan"\?\).*plan,'
    ):
        decode("plans", b"{}")


def test_a_contract_error_lists_every_violation_with_its_pointer() -> None:
    document = json.loads(plan_with(parallel="yes"))
    document["tools"][0]["toolId"] = "light 1"
    del document["tools"][1]["toolPath"]
    with pytest.raises(ContractError) as raised:
        decode("plan", json.dumps(document))
    found = {(v.pointer, v.message) for v in raised.value.violations}
    assert found == {
        ("/parallel", 'expected true or false, got the string "yes"'),
        ("/tools/0/toolId", '"light 1" does not match the pattern "^[A-Za-z][A-Za-z0-9_-]{0,63}$"'),
        ("/tools/1", 'missing required field "toolPath"'),
    }
    assert str(raised.value).startswith("not a valid plan document (3 violations):")


def test_violations_lists_problems_without_raising() -> None:
    assert violations("plan", json.loads(json.dumps(PLAN))) == ()
    assert [v.pointer for v in violations("plan", {"tools": []})] == [""]


def test_tagged_union_errors_speak_of_the_chosen_event_type() -> None:
    unknown = violation_of("tool-event", b'{"version": "0", "type": "lag", "message": "x"}')
    assert unknown.pointer == "/type"
    assert unknown.message.startswith('unknown type "lag"; expected one of "log", "state_patch"')
    bad_level = violation_of(
        "tool-event", b'{"version": "0", "type": "log", "level": "loud", "message": "x"}'
    )
    assert bad_level == Violation("/level", '"loud" is not one of "debug", "info", "warn", "error"')


def test_keys_of_maps_are_checked_and_reported_at_the_key() -> None:
    entry = {
        "failed_at": 0,
        "freeze_until": 3_600_000_000,
        "original_dc": 5,
        "freeze_hours": 1,
        "description": "crossing the river",
    }
    violation = violation_of("frozen-plans", json.dumps({"River Crossing": entry}))
    assert violation.pointer == "/River Crossing"
    assert violation.message.startswith('the key "River Crossing" does not match the pattern')


def test_a_rule_beyond_the_schema_explains_a_key_in_its_own_words() -> None:
    block = {"choices": {"AIGenerated": {"text": "A", "description": "B"}}}
    violation = violation_of("planning-block", json.dumps(block))
    assert violation.pointer == "/choices/AIGenerated"
    assert violation.message == (
        'choice key "AIGenerated" is not snake_case: a choice id is lower-case words and digits '
        'joined by "_", starting with a letter, optionally prefixed "god:" or "think:" '
        '(for example "ai_generated")'
    )


class _Update(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    step_id: str
    title: str | msgspec.UnsetType = msgspec.UNSET
    details: str | msgspec.UnsetType = msgspec.UNSET


def test_a_rule_the_types_cannot_express_is_enforced_by_the_schema() -> None:
    # At least one of `title` and `details`: minProperties on an object with
    # named fields, which no msgspec type can say (codegen lists it as such).
    text = {"type": "string"}
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["step_id"],
        "minProperties": 2,
        "properties": {"step_id": text, "title": text, "details": text},
    }
    contracts = ContractSet(
        {"update": schema}, types={"update": _Update}, schema_only_rules={"update"}
    )
    with pytest.raises(ContractError) as raised:
        contracts.decode("update", b'{"step_id": "S001"}')
    assert list(raised.value.violations) == [Violation("", "has 1 field; needs at least 2")]
    decoded = contracts.decode("update", b'{"step_id": "S001", "details": "Retry"}')
    assert decoded == _Update(step_id="S001", details="Retry")


def test_a_trailing_newline_does_not_pass_a_pattern() -> None:
    violation = violation_of("session-mark-step", b'{"step_id": "S001\\n", "status": "done"}')
    assert violation.pointer == "/step_id"


def test_integral_floats_count_as_integers_as_json_schema_says() -> None:
    plan = json.loads(json.dumps(PLAN))
    plan["metadata"]["generationAttempt"] = 2.0
    assert decode("plan", json.dumps(plan)).metadata.generation_attempt == 2
    frozen = contract_schema("frozen-plans")["examples"][0]
    frozen["bridge_crossing"]["freeze_hours"] = 4.0  # an enum of integers
    assert decode("frozen-plans", json.dumps(frozen))["bridge_crossing"].freeze_hours == 4


def test_hostile_strings_are_reported_on_one_line() -> None:
    violation = violation_of("plan", plan_with(requestId="\u202e\nDROP TABLE"))
    assert "\n" not in violation.message
    assert "\u202e" not in violation.message
    assert "\\u202e" in violation.message


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "empty document: expected a JSON value"),
        (b" \n\t", "empty document: expected a JSON value"),
        (b"\xef\xbb\xbf{}", "starts with a UTF-8 byte order mark"),
        (b'{"a": NaN}', "NaN and Infinity are not JSON numbers (line 1, column 7)"),
        (b"[1,\n -Infinity]", "NaN and Infinity are not JSON numbers (line 2, column 3)"),
        (b'{"a": "\xff"}', "not valid UTF-8: byte 0xff at offset 7 (line 1, column 8)"),
        (b'{"a": "\\ud800"}', "half of a UTF-16 surrogate pair"),
        (b'{"a": 1', "malformed JSON: Expecting ',' delimiter (line 1, column 8)"),
        (b"[1, 2,]", "malformed JSON: trailing comma in array (line 1, column 7)"),
        (b'{"a": 1} {"b": 2}', "malformed JSON: trailing characters (line 1, column 11)"),
        (b'{"a": 1e400}', "a number is too large to represent as a 64-bit float"),
        (b"[" * 100_000 + b"]" * 100_000, "nest too deeply"),
    ],
    ids=lambda value: repr(value[:20]) if isinstance(value, bytes) else None,
)
def test_malformed_json_gets_one_clear_line(data: bytes, message: str) -> None:
    violation = violation_of("plan", data)
    assert violation.pointer == ""
    assert message in violation.message
    assert "\n" not in violation.message


def test_a_lone_surrogate_in_str_input_is_a_contract_error() -> None:
    violation = violation_of("plan", '{"requestId": "\ud800"}')
    assert "lone surrogate at character 15" in violation.message


def test_a_duplicate_key_is_reported_where_it_is() -> None:
    data = b'{"tools": [{"toolId": "a", "toolPath": "x", "toolId": "b"}], "requestId": "x"}'
    assert violation_of("plan", data) == Violation(
        "/tools/0/toolId", 'duplicate key "toolId" in one object'
    )


def test_a_50_megabyte_string_is_judged_without_trouble() -> None:
    violation = violation_of("plan", plan_with(narrative="x" * (50 * 1024 * 1024)))
    assert violation == Violation("/narrative", "is 52428800 characters long; at most 4000 allowed")


# Duplicate keys: the fast check against a plain, exact one ------------------------


def keys_with_duplicates(document: Any) -> bool:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        if len({key for key, _ in pairs}) != len(pairs):
            raise KeyError("duplicate")
        return dict(pairs)

    try:
        json.loads(document, object_pairs_hook=hook)
    except KeyError:
        return True
    return False


KEYS = st.sampled_from(["a", "b", "a:", ":", "b\\", 'q"', "\u00e9", "x:y:z"])
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet=':"\\ab{}[],', max_size=6),
)


@st.composite
def json_texts(draw: st.DrawFn, depth: int = 3) -> str:
    """JSON text whose objects may repeat a key, and whose strings are full of colons."""
    if depth == 0 or draw(st.booleans()):
        text = json.dumps(draw(SCALARS))
        return text.replace(":", "\\u003a") if draw(st.booleans()) else text
    if draw(st.booleans()):
        return "[" + ", ".join(draw(st.lists(json_texts(depth - 1), max_size=3))) + "]"
    members = draw(st.lists(st.tuples(KEYS, json_texts(depth - 1)), max_size=4))
    spacing = draw(st.sampled_from([":", " : ", ":\n"]))
    return "{" + ", ".join(f"{json.dumps(k)}{spacing}{v}" for k, v in members) + "}"


@given(json_texts())
def test_the_fast_duplicate_check_agrees_with_an_exact_one(text: str) -> None:
    if keys_with_duplicates(text):
        with pytest.raises(MalformedJSON, match=r"^duplicate key"):
            parse(text.encode())
    else:
        parse(text.encode())


def test_a_pattern_is_quoted_whole_and_as_a_reader_writes_it() -> None:
    violation = violation_of("plan", plan_with(requestId="not-a-uuid"))
    assert violation == Violation(
        "/requestId",
        '"not-a-uuid" does not match the pattern "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}'
        '-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"',
    )


# Hostile documents: bounded lists of violations ------------------------------------


def test_an_unknown_contract_is_named_before_the_text_is_read() -> None:
    with pytest.raises(UnknownContractError, match='unknown contract "nosuch"'):
        decode("nosuch", b"{x")


def test_a_document_breaking_its_contract_a_million_times_lists_the_first_100() -> None:
    with pytest.raises(ContractError) as raised:
        decode("plan", plan_with(tools=[1] * 1_000_000))
    found = raised.value.violations
    assert len(found) == MAX_VIOLATIONS == 100
    assert not found.complete
    assert Violation("/tools", "has 1000000 items; at most 1024 allowed") in found
    assert str(raised.value).startswith(
        "not a valid plan document (more than 100 violations; the first 100 found are listed):"
    )


def test_a_million_unknown_fields_are_listed_in_bounded_form() -> None:
    document = {**PLAN, **{f"k{index}": 1 for index in range(1_000_000)}}
    found = violations("plan", document)
    assert len(found) == 100
    assert not found.complete
    assert found[0] == Violation("/k0", 'unknown field "k0"')


def test_a_complete_list_says_so() -> None:
    found = violations("plan", {"tools": []})
    assert found.complete
    assert found.summary() == "1 violation"


@pytest.mark.parametrize(
    "key", ["1" * 5000, "x" * 10_000_000], ids=["5000 digits", "10 MB, no suggestion"]
)
def test_any_key_gets_a_verdict(key: str) -> None:
    violation = violation_of("plan", json.dumps({**PLAN, key: 1}))
    assert violation.pointer == f"/{key}"
    assert violation.message == f"unknown field {shown(key)}"


def test_values_are_quoted_short_whatever_their_size_or_depth() -> None:
    deep: Any = "x"
    for _ in range(100_000):
        deep = [deep]
    assert shown(deep) == "[" * 59 + "…"
    assert shown({"a": [1] * 10_000_000}, limit=20) == '{"a": [1, 1, 1, 1, …'


def test_a_large_document_of_tiny_values_is_refused_before_it_is_parsed() -> None:
    dense = b"[" + b",".join([b"[]"] * (DENSE_FROM // 3 + 1)) + b"]"
    assert len(dense) > DENSE_FROM
    with pytest.raises(MalformedJSON, match="holds too many small values to judge in bounded"):
        parse(dense)
    with pytest.raises(ContractError) as raised:
        decode("plan", dense)
    assert [v.pointer for v in raised.value.violations] == [""]
    # Up to DENSE_FROM bytes every document is parsed: its cost is within the constant.
    small = b"[" + b",".join([b"[]"] * (DENSE_FROM // 3 - 1)) + b"]"
    assert len(parse(small)) == DENSE_FROM // 3 - 1


def test_what_strings_hold_is_never_counted_as_structure() -> None:
    text = "{[,:" * (DENSE_FROM // 2)
    data = json.dumps({"note": text, "escaped": '\\"{[' * 1000}).encode()
    assert len(data) > DENSE_FROM
    assert parse(data)["note"] == text
    # The text, held a few times over, and little else.
    assert parsed_cost(data) < 5 * len(data)
